package main

import (
	"github.com/spf13/cobra"

	"github.com/switchboard-io/switchboard"
)

// queryFlags are the filters ls and watch share.
type queryFlags struct {
	q    switchboard.Query
	json bool
}

func (qf *queryFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&qf.q.Name, "name", "", "only instances with this name")
	f.StringVar(&qf.q.Type, "type", "", "only instances of this type")
	f.StringVar(&qf.q.Capability, "capability", "", "only instances with this capability")
	f.BoolVar(&qf.q.All, "all", false, "include stale instances (past their TTL, not yet reaped)")
	f.BoolVar(&qf.json, "json", false, "JSON output")
}

// query returns the filters in canonical form (names are sanitised as on
// registration, so --name My_Service finds my-service).
func (qf *queryFlags) query() (switchboard.Query, error) {
	q := qf.q
	if q.Name != "" {
		n, err := switchboard.SanitizeName(q.Name)
		if err != nil {
			return q, usage(err)
		}
		q.Name = n
	}
	if q.Capability != "" {
		if err := switchboard.ValidateCapability(q.Capability); err != nil {
			return q, usage(err)
		}
	}
	return q, nil
}
