package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchboard-io/switchboard"
)

func newWatchCmd(g *globals) *cobra.Command {
	var qf queryFlags
	var verbose bool
	cmd := &cobra.Command{
		Use:   "watch [--name N] [--type T] [--capability C] [--all] [-o table|wide|json]",
		Short: "Print the current set as added events, then one line per change, until interrupted",
		Long: `Watch the catalog: first every instance that matches as an "added" event, then one line per
change as it happens (pushed by the catalog, not polled), until Ctrl-C.

Events: added, updated (address, capabilities, version or metadata changed), removed/deregistered
(a graceful stop or 'switchboard deregister'), removed/expired (no heartbeat within the TTL; judged
by this process's own timer). A heartbeat is not an event. With --all, an expired instance is
"updated" with stale: true instead of removed.

Formats: table (default; a header, then one line per event: the time in the local zone with the
zone's name, and the date once the watch has run past midnight; long values are cut with "…" so
the columns stay aligned), wide (nothing cut), json (one object per line:
{"time":…,"event":…,"reason":…,"instance":{…}}, time in UTC, when this watcher received it;
--json is the same). An empty cell is "-". When the catalog cannot be reached, one line says so on
stderr and the watch goes on with the last known set.

On a terminal, one line on stderr says what is watched and how to stop. Ctrl-C or SIGTERM ends
the watch with exit 0; if the catalog ends it instead (its handle closed or failed), one line on
stderr says that the watch ended, and why when known, and the exit code is 1.`,
		Example: `  switchboard watch
  switchboard watch --capability storage -o wide
  switchboard watch --json | jq -c 'select(.event == "removed")'`,
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
			c, cat, err := g.readCatalog(cmd.Context())
			if err != nil {
				return err
			}
			defer cat.Close()
			ch, err := cat.Watch(cmd.Context(), q)
			if err != nil {
				return err
			}
			if g.terminal(g.stderr) {
				fmt.Fprintf(g.stderr, "switchboard: watching %s in %s; changes print as they happen; Ctrl-C to stop\n",
					describeQuery(q), switchboard.RedactDSN(c.Discovery.DSN))
			}
			p := &eventPrinter{stdout: g.stdout, stderr: g.stderr, format: format, start: time.Now()}
			if format != formatJSON {
				fmt.Fprintln(g.stdout, p.header())
			}
			// lastErr is the catalog's error while it is unreachable (an
			// error event not yet followed by a resync).
			var lastErr error
			for ev := range ch {
				switch ev.Kind {
				case switchboard.EventError:
					lastErr = ev.Err
				case switchboard.EventSynced:
					lastErr = nil
					if verbose {
						sayServer(g.stderr, cat, "synced from")
					}
				}
				if err := p.print(ev); err != nil {
					return err
				}
			}
			if cmd.Context().Err() != nil {
				return nil // interrupted: how a watch is meant to stop
			}
			return watchEnded(cmd.Context(), cat, lastErr)
		},
	}
	qf.add(cmd)
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "say on stderr which server each (re)sync came from (a server DSN may list several)")
	cmd.Annotations = map[string]string{annEnv: envDSNHelp + "\n" + envPollHelp, annExit: exitLong}
	return cmd
}

// sayServer writes "switchboard: <what> <server>" to w when cat is a
// client of switchboard serve, which names the server it asks now.
func sayServer(w io.Writer, cat switchboard.Catalog, what string) {
	if s, ok := cat.(interface{ Server() string }); ok {
		fmt.Fprintf(w, "switchboard: %s %s\n", what, s.Server())
	}
}

// watchEnded is the error of a watch whose events stopped while nobody
// interrupted it: the catalog closed the channel on its own. The reason is
// the catalog's last error when it was unreachable, else what the catalog
// answers now (a closed handle says so), when it fails.
func watchEnded(ctx context.Context, cat switchboard.Catalog, lastErr error) error {
	const msg = "watch ended: the catalog stopped the event stream"
	if lastErr != nil {
		return fmt.Errorf("%s; last catalog error: %w", msg, lastErr)
	}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := cat.Now(pctx); err != nil {
		return fmt.Errorf("%s: %w", msg, err)
	}
	return errors.New(msg + " (no reason given)")
}

// describeQuery says in words what a watch selects.
func describeQuery(q switchboard.Query) string {
	var parts []string
	if q.Name != "" {
		parts = append(parts, "name "+q.Name)
	}
	if q.Type != "" {
		parts = append(parts, "type "+q.Type)
	}
	if q.Capability != "" {
		parts = append(parts, "capability "+q.Capability)
	}
	s := "all instances"
	if len(parts) > 0 {
		s = "instances with " + strings.Join(parts, ", ")
	}
	if q.All {
		return s + " (stale ones too)"
	}
	return s
}

// eventPrinter writes watch events in one format.
type eventPrinter struct {
	stdout, stderr io.Writer
	format         string
	start          time.Time
}

// Column widths of the streamed table: a line cannot know later lines, so
// the columns are fixed and longer values are cut (not in wide).
const (
	colTime    = 17
	colEvent   = 22 // removed/check_critical
	colName    = 24
	colType    = 10
	colAddress = 21 // 255.255.255.255:65535
	colID      = 36 // a UUID
)

func (p *eventPrinter) header() string {
	return strings.TrimRight(fit("TIME", colTime, true)+"  "+fit("EVENT", colEvent, true)+"  "+fit("NAME", colName, true)+"  "+
		fit("TYPE", colType, true)+"  "+fit("ADDRESS", colAddress, true)+"  "+fit("ID", colID, true)+"  CAPABILITIES", " ")
}

// print writes one event. Catalog errors go to stderr so stdout stays one
// line (one JSON object) per change.
func (p *eventPrinter) print(ev switchboard.Event) error {
	now := time.Now()
	switch ev.Kind {
	case switchboard.EventSynced:
		return nil
	case switchboard.EventError:
		_, err := fmt.Fprintf(p.stderr, "switchboard: catalog unreachable, showing the last known set: %v\n", ev.Err)
		return err
	}
	if p.format == formatJSON {
		b, err := eventJSON(ev, now)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(p.stdout, "%s\n", b)
		return err
	}
	_, err := fmt.Fprintln(p.stdout, eventLine(ev, now, p.start, p.format == formatWide))
	return err
}

// eventJSON is the event's JSON with the time it was received first.
func eventJSON(ev switchboard.Event, at time.Time) ([]byte, error) {
	b, err := json.Marshal(ev)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(b)+40)
	out = append(out, `{"time":"`...)
	out = append(out, at.UTC().Format(switchboard.TimeFormat)...)
	out = append(out, `",`...)
	return append(out, b[1:]...), nil
}

// eventLine is one event in the table columns; at is when it was seen,
// start the day the watch began (the date is shown once it differs).
func eventLine(ev switchboard.Event, at, start time.Time, wide bool) string {
	in := ev.Instance
	kind := string(ev.Kind)
	switch st := in.Status(); {
	case ev.Reason != "":
		kind += "/" + string(ev.Reason)
	case ev.Kind != switchboard.EventRemoved && st != switchboard.StatusPassing:
		kind += "/" + string(st) // out of rotation, or warning
	}
	return fit(clock(at, start, "15:04:05.000"), colTime, true) + "  " + fit(kind, colEvent, true) + "  " +
		fit(dash(in.Name), colName, wide) + "  " + fit(dash(in.Type), colType, wide) + "  " +
		fit(dash(in.Address), colAddress, wide) + "  " + fit(dash(in.ID), colID, wide) + "  " + capsCell(in.Capabilities, wide)
}
