package main

import (
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchboard-io/switchboard"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func newDeregisterCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "deregister ID",
		Short: "Delete an instance's row",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := switchboard.ValidateID(args[0]); err != nil {
				return usage(err)
			}
			c, cat, err := g.catalog(cmd.Context(), true)
			if err != nil {
				return err
			}
			defer cat.Close()
			if err := cat.Deregister(cmd.Context(), args[0]); err != nil {
				if errors.Is(err, switchboard.ErrNotFound) {
					return fmt.Errorf("no instance with id %q in %s", args[0], switchboard.RedactDSN(c.Discovery.DSN))
				}
				return err
			}
			fmt.Fprintf(g.stdout, "deregistered %s\n", args[0])
			return nil
		},
	}
}

func newReapCmd(g *globals) *cobra.Command {
	var olderThan string
	cmd := &cobra.Command{
		Use:   "reap [--older-than D]",
		Short: "Delete rows stale for twice their own TTL, or last seen more than D ago",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Zero asks the catalog for each row's own 2 × TTL: a row with a
			// long TTL is never reaped while it is still active.
			var cutoff time.Duration
			if olderThan != "" {
				var err error
				if cutoff, err = switchboard.ParseDuration("older-than", olderThan); err != nil {
					return usage(err)
				}
			}
			_, cat, err := g.catalog(cmd.Context(), true)
			if err != nil {
				return err
			}
			defer cat.Close()
			n, err := cat.Reap(cmd.Context(), cutoff)
			if err != nil {
				return err
			}
			if cutoff == 0 {
				fmt.Fprintf(g.stdout, "reaped %d rows (stale for twice their ttl)\n", n)
			} else {
				fmt.Fprintf(g.stdout, "reaped %d rows (last seen more than %s ago)\n", n, cutoff.Round(time.Millisecond))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&olderThan, "older-than", "", "delete rows last seen more than D ago, whatever their ttl (default: each row's own 2 × ttl)")
	return cmd
}

func newVersionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		Run: func(*cobra.Command, []string) {
			goVersion := "unknown"
			if bi, ok := debug.ReadBuildInfo(); ok {
				goVersion = bi.GoVersion
			}
			fmt.Fprintf(g.stdout, "switchboard %s (%s)\n", version, goVersion)
		},
	}
}
