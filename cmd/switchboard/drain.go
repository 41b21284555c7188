package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/switchboard-io/switchboard"
)

func newDrainCmd(g *globals) *cobra.Command {
	var undo bool
	cmd := &cobra.Command{
		Use:   "drain ID [--undo]",
		Short: "Take an instance out of rotation without deregistering it",
		Long: `Mark the instance with this id as draining: it stays registered and heartbeating, listed by
ls and watch (status "draining"; watchers see one updated event), and lookups, picks, the gRPC
resolver, the connection pool and DNS stop sending it new traffic. --undo puts it back.

Use it before a deploy or a maintenance; a registration stopped with Ctrl-C drains itself first.
Draining a drained instance changes nothing. Over a server DSN it needs the instance's secret
(--secret) or the admin token. Exit 1 when there is no such id.`,
		Example: `  switchboard drain 3f6c2a9e-8a57-4d0b-9d1e-2b7c1f0e4a11
  switchboard drain 3f6c2a9e-8a57-4d0b-9d1e-2b7c1f0e4a11 --undo`,
		Args: oneArg("ID (the instance id, as printed by register or ls)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.onInstance(cmd.Context(), args[0], func(cat switchboard.Catalog, where string) error {
				d, ok := cat.(switchboard.Drainer)
				if !ok {
					return fmt.Errorf("the catalog at %s cannot drain instances", where)
				}
				in, err := d.Drain(cmd.Context(), args[0], !undo)
				if err != nil {
					return err
				}
				fmt.Fprintf(g.stdout, "%s %s (status %s)\n", map[bool]string{true: "drained", false: "undrained"}[!undo], args[0], in.Status())
				return nil
			})
		},
		Annotations: map[string]string{annEnv: envDSNHelp + "\n" + envSecretHelp},
	}
	cmd.Flags().BoolVar(&undo, "undo", false, "put the instance back into rotation")
	g.addSecretFlag(cmd, "over a server DSN, the secret of an instance another client registered (16 to 256 printable ASCII characters; "+envSecret+")")
	return cmd
}
