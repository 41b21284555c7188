package main

import (
	"github.com/spf13/cobra"

	"github.com/switchboard-io/switchboard"
)

// queryFlags are the filters and output flags ls and watch share.
type queryFlags struct {
	q   switchboard.Query
	out outputFlags
}

func (qf *queryFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&qf.q.Name, "name", "", "only instances with this name (sanitised as on registration)")
	f.StringVar(&qf.q.Type, "type", "", "only instances of this type")
	f.StringVar(&qf.q.Capability, "capability", "", "only instances with this capability")
	f.BoolVar(&qf.q.All, "all", false, "include stale instances (past their TTL, not yet reaped)")
	qf.out.add(cmd)
}

// query returns the filters in canonical form (names are sanitised as on
// registration, so --name My_Service finds my-service).
func (qf *queryFlags) query() (switchboard.Query, error) {
	q := qf.q
	if q.Name != "" {
		n, err := switchboard.SanitizeName(q.Name)
		if err != nil {
			return q, usage(flagField(err, "--name"))
		}
		q.Name = n
	}
	if q.Capability != "" {
		if err := switchboard.ValidateCapability(q.Capability); err != nil {
			return q, usage(flagField(err, "--capability"))
		}
	}
	return q, nil
}

// flagField renames the field of a validation error to the flag that gave
// the value.
func flagField(err error, flag string) error {
	if fe, ok := err.(*switchboard.FieldError); ok {
		out := *fe
		out.Field = flag
		return &out
	}
	return err
}
