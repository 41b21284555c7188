package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchboard-io/switchboard"
)

func newWatchCmd(g *globals) *cobra.Command {
	var qf queryFlags
	cmd := &cobra.Command{
		Use:   "watch [--name N] [--type T] [--capability C] [--all] [--json]",
		Short: "Print the current set as added events, then one line per change, until interrupted",
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
			ch, err := cat.Watch(cmd.Context(), q)
			if err != nil {
				return err
			}
			for ev := range ch {
				if err := printEvent(g.stdout, g.stderr, ev, qf.json); err != nil {
					return err
				}
			}
			return nil
		},
	}
	qf.add(cmd)
	return cmd
}

// printEvent writes one event line. Catalog errors go to stderr so stdout
// stays one JSON object per change.
func printEvent(stdout, stderr io.Writer, ev switchboard.Event, asJSON bool) error {
	switch ev.Kind {
	case switchboard.EventSynced:
		return nil
	case switchboard.EventError:
		_, err := fmt.Fprintf(stderr, "switchboard: catalog unreachable, showing the last known set: %v\n", ev.Err)
		return err
	}
	if asJSON {
		b, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "%s\n", b)
		return err
	}
	_, err := fmt.Fprintln(stdout, eventLine(ev))
	return err
}

func eventLine(ev switchboard.Event) string {
	in := ev.Instance
	kind := string(ev.Kind)
	if ev.Reason != "" {
		kind += "/" + string(ev.Reason)
	}
	return fmt.Sprintf("%s  %-22s %-15s %-10s %-22s %s  [%s]", time.Now().Format("15:04:05.000"), kind, in.Name, in.Type,
		in.Address, in.ID, strings.Join(in.Capabilities, ","))
}
