package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchboard-io/switchboard"
)

func newLsCmd(g *globals) *cobra.Command {
	var qf queryFlags
	cmd := &cobra.Command{
		Use:   "ls [--name N] [--type T] [--capability C] [--all] [--json]",
		Short: "List active instances (with --all, stale ones too)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q, err := qf.query()
			if err != nil {
				return err
			}
			_, cat, err := g.catalog(cmd.Context(), true)
			if err != nil {
				return err
			}
			defer cat.Close()
			list, err := cat.List(cmd.Context(), q)
			if err != nil {
				return err
			}
			if qf.json {
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
			return printTable(g.stdout, list, now)
		},
	}
	qf.add(cmd)
	return cmd
}

func printTable(w io.Writer, list []switchboard.Instance, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tTYPE\tADDRESS\tCAPABILITIES\tVERSION\tLAST SEEN\tSTATE")
	for _, in := range list {
		state := "active"
		if in.Stale {
			state = "stale"
		}
		caps := strings.Join(in.Capabilities, ",")
		if caps == "" {
			caps = "-"
		}
		version := in.Version
		if version == "" {
			version = "-"
		}
		age := now.Sub(in.LastSeen).Round(time.Millisecond)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s ago\t%s\n", in.ID, in.Name, in.Type, in.Address, caps, version, age, state)
	}
	return tw.Flush()
}
