package main

import (
	"encoding/json"
	"fmt"
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
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "leases [--json]",
		Short: "List leases: holder, fencing token and expiry",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			c, cat, err := g.catalog(ctx, true)
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
			if asJSON {
				out := make([]leaseJSON, 0, len(list))
				for _, l := range list {
					out = append(out, leaseJSON{Name: l.Name, Holder: l.Holder, Token: l.Token, TTL: l.TTL.String(),
						ExpiresAt: l.ExpiresAt.UTC().Format(switchboard.TimeFormat), Held: l.Holder != "" && l.ExpiresAt.After(now)})
				}
				b, err := json.Marshal(out)
				if err != nil {
					return err
				}
				fmt.Fprintf(g.stdout, "%s\n", b)
				return nil
			}
			tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tHOLDER\tTOKEN\tTTL\tEXPIRES")
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
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", l.Name, holder, l.Token, l.TTL, expires)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "JSON output")
	return cmd
}
