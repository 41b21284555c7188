package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchboard-io/switchboard"
)

// leaseJSON is the --json form of one lease.
type leaseJSON struct {
	Name      string `json:"name"`
	Holder    string `json:"holder"`
	Token     int64  `json:"token"`
	TTL       string `json:"ttl"`
	ExpiresAt string `json:"expires_at"`
	Held      bool   `json:"held"`
}

func newLeasesCmd(g *globals) *cobra.Command {
	var out outputFlags
	cmd := &cobra.Command{
		Use:   "leases [-o table|wide|json]",
		Short: "List leases: holder, fencing token and expiry",
		Long: `List the catalog's leases (used for leader election), sorted by name: the holder, the fencing
token (it grows with every new holder and is never reset), the TTL and when the lease expires by
the catalog's clock. A released lease keeps its row with holder "-".

Formats: table (default), wide (adds HELD and the expiry as a time with its zone), json (an
array of {name, holder, token, ttl, expires_at, held}; --json is the same).`,
		Example: `  switchboard leases
  switchboard leases -o json | jq '.[] | select(.held)'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := out.resolve(cmd)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			c, cat, err := g.existingCatalog(ctx)
			if err != nil {
				return err
			}
			defer cat.Close()
			leaser, ok := cat.(switchboard.Leaser)
			if !ok {
				return fmt.Errorf("the catalog at %s offers no leases", switchboard.RedactDSN(c.Discovery.DSN))
			}
			list, err := leaser.Leases(ctx)
			if err != nil {
				return err
			}
			now, err := cat.Now(ctx)
			if err != nil {
				return err
			}
			slices.SortFunc(list, func(a, b switchboard.Lease) int { return strings.Compare(a.Name, b.Name) })
			if format == formatJSON {
				rows := make([]leaseJSON, 0, len(list))
				for _, l := range list {
					rows = append(rows, leaseJSON{Name: l.Name, Holder: l.Holder, Token: l.Token, TTL: l.TTL.String(),
						ExpiresAt: l.ExpiresAt.UTC().Format(switchboard.TimeFormat), Held: l.Holder != "" && l.ExpiresAt.After(now)})
				}
				b, err := json.Marshal(rows)
				if err != nil {
					return err
				}
				fmt.Fprintf(g.stdout, "%s\n", b)
				return nil
			}
			if len(list) == 0 {
				fmt.Fprintln(g.stderr, "no leases found")
				return nil
			}
			wide := format == formatWide
			tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
			header := "NAME\tHOLDER\tTOKEN\tTTL\tEXPIRES"
			if wide {
				header += "\tHELD\tEXPIRES AT"
			}
			fmt.Fprintln(tw, header)
			for _, l := range list {
				holder, expires := l.Holder, ""
				switch d := l.ExpiresAt.Sub(now).Round(time.Millisecond); {
				case holder == "":
					holder, expires = "-", "released"
				case d > 0:
					expires = "in " + d.String()
				default:
					expires = "expired " + (-d).String() + " ago"
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s", printable(l.Name), printable(holder), l.Token, l.TTL, expires)
				if wide {
					fmt.Fprintf(tw, "\t%t\t%s", l.Holder != "" && l.ExpiresAt.After(now), clock(l.ExpiresAt, now, "15:04:05.000"))
				}
				fmt.Fprintln(tw)
			}
			return tw.Flush()
		},
	}
	out.add(cmd)
	return cmd
}
