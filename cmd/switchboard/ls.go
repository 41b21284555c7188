package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchboard-io/switchboard"
)

func newLsCmd(g *globals) *cobra.Command {
	var qf queryFlags
	var verbose bool
	cmd := &cobra.Command{
		Use:   "ls [--name N] [--type T] [--capability C] [--all] [-o table|wide|json]",
		Short: "List active instances (with --all, stale ones too)",
		Long: `List the instances of the catalog, sorted by name, then id.

Only active instances are listed (last seen within their TTL, check not critical); --all adds
stale rows (past their TTL, not yet reaped) with STATE stale and rows whose check is critical.
STATE is active, draining (out of rotation: drain), critical, warning or stale. The filters combine; --name is sanitised as on
registration, so --name My_Service finds my-service.

Formats: table (default; long capability lists are cut to "a,b,+3 more"), wide (adds TTL,
REGISTERED, WEIGHT, ZONE, CHECK (status, since, last output) and METADATA, nothing cut), json (an array of instances, [] when empty; --json
is the same). An empty cell is "-".`,
		Example: `  switchboard ls
  switchboard ls --capability storage -o wide
  switchboard ls --name querier --all --json | jq '.[].address'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := qf.out.resolve(cmd)
			if err != nil {
				return err
			}
			q, err := qf.query()
			if err != nil {
				return err
			}
			_, cat, err := g.existingCatalog(cmd.Context())
			if err != nil {
				return err
			}
			defer cat.Close()
			list, err := cat.List(cmd.Context(), q)
			if err != nil {
				return err
			}
			if verbose {
				sayServer(g.stderr, cat, "answered by")
			}
			sortInstances(list)
			if format == formatJSON {
				if list == nil {
					list = []switchboard.Instance{}
				}
				b, err := json.Marshal(list)
				if err != nil {
					return err
				}
				fmt.Fprintf(g.stdout, "%s\n", b)
				return nil
			}
			now, err := cat.Now(cmd.Context())
			if err != nil {
				return err
			}
			if len(list) == 0 {
				fmt.Fprintln(g.stderr, "no instances found") // as kubectl: stdout stays empty
				return nil
			}
			return printTable(g.stdout, list, now, format == formatWide)
		},
	}
	qf.add(cmd)
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "say on stderr which server answered (a server DSN may list several)")
	cmd.Annotations = map[string]string{annEnv: envDSNHelp}
	return cmd
}

// sortInstances orders by name, then id, whatever order the backend used.
func sortInstances(list []switchboard.Instance) {
	slices.SortFunc(list, func(a, b switchboard.Instance) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.ID, b.ID))
	})
}

func printTable(w io.Writer, list []switchboard.Instance, now time.Time, wide bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := "NAME\tID\tTYPE\tADDRESS\tCAPABILITIES\tVERSION\tLAST SEEN\tSTATE"
	if wide {
		header += "\tTTL\tREGISTERED\tWEIGHT\tZONE\tCHECK\tMETADATA"
	}
	fmt.Fprintln(tw, header)
	for _, in := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s ago\t%s", dash(in.Name), dash(in.ID), dash(in.Type), dash(in.Address),
			capsCell(in.Capabilities, wide), dash(in.Version), age(now, in.LastSeen), stateCell(&in))
		if wide {
			fmt.Fprintf(tw, "\t%s\t%s\t%d\t%s\t%s\t%s", in.TTL, clock(in.RegisteredAt, now, "15:04:05"),
				in.TrafficWeight(), dash(in.Zone), checkCell(&in, now), metaCell(in.Metadata))
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// stateCell is an instance's STATE: stale (past its TTL), else its traffic
// status (draining, critical, warning), else active.
func stateCell(in *switchboard.Instance) string {
	switch st := in.Status(); {
	case in.Stale:
		return "stale"
	case st == switchboard.StatusPassing:
		return "active"
	default:
		return string(st)
	}
}

// checkCell is an instance's CHECK: its check's status, since when, and
// what it last said; "-" without a check.
func checkCell(in *switchboard.Instance, now time.Time) string {
	if in.Check == nil {
		return "-"
	}
	h := in.Health
	cell := string(cmp.Or(h.Status, switchboard.StatusPassing))
	if !h.Since.IsZero() {
		cell += " " + age(now, h.Since) + " ago"
	}
	if h.Output != "" {
		cell += ": " + h.Output
	}
	return printable(cell)
}
