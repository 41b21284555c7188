package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/hub"
	"github.com/switchboard-io/switchboard/postgres/pgtest"
)

// TestTrafficNotices: the notification of a registration with a weight,
// zone and check, of a drain and of a check result carries the instance
// exactly as a log read returns it, and as the call returned it.
func TestTrafficNotices(t *testing.T) {
	c, _, dsn := newCatalog(t)
	conn := listenRaw(t, dsn)
	ctx := ctxT(t)
	in := inst("svc", "10.0.0.1:4317")
	in.ID, in.Weight, in.Zone = "t1", 250, "eu-west-1a"
	in.Check = &switchboard.Check{Target: "grpc://10.0.0.1:4317/pkg.Health", Interval: 3 * time.Second, Failures: 2}
	steps := []func() (switchboard.Instance, error){
		func() (switchboard.Instance, error) { return c.Register(ctx, in) },
		func() (switchboard.Instance, error) { return c.Drain(ctx, "t1", true) },
		func() (switchboard.Instance, error) {
			return c.SetHealth(ctx, "t1", switchboard.Health{Status: switchboard.StatusWarning, Output: "HTTP 429 ünï"})
		},
	}
	var seq int64
	for i, step := range steps {
		out, err := step()
		if err != nil {
			t.Fatal(err)
		}
		b, err := decodeNotice(nextNotice(t, conn).Payload)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		batch, err := source{c}.ChangesSince(ctx, hub.Cursor{Seq: seq, Read: seq})
		if err != nil || len(batch.Changes) != 1 {
			t.Fatalf("step %d: log read: %+v %v", i, batch, err)
		}
		seq = batch.Changes[0].Seq
		if got := b.Changes[0]; !reflect.DeepEqual(got, batch.Changes[0]) {
			t.Fatalf("step %d: notice carries\n%+v\nthe log read gives\n%+v", i, got, batch.Changes[0])
		}
		if got := b.Changes[0].Instance; !reflect.DeepEqual(got, out) {
			t.Fatalf("step %d: notice carries\n%+v\nthe call returned\n%+v", i, got, out)
		}
	}
}

// TestTrafficAcrossHandles: a watcher in another handle (another process)
// hears of drains and check results through notifications, and through
// log reads when the change does not fit one (large components); each
// event's instance is what Get returns.
func TestTrafficAcrossHandles(t *testing.T) {
	dsn := pgtest.Schema(t, testDSN)
	c := openDSN(t, dsn, switchboard.Options{})
	other := openDSN(t, dsn, switchboard.Options{PollInterval: time.Hour})
	ctx := ctxT(t)
	ch, err := other.Watch(ctx, switchboard.Query{All: true})
	if err != nil {
		t.Fatal(err)
	}
	r := record(t, ch)
	r.waitFor(t, "snapshot", func(evs []switchboard.Event) bool { return has(evs, switchboard.EventSynced, "") })
	for _, id := range []string{"small", "large"} {
		in := inst("svc", "10.0.0.1:4317")
		in.ID, in.Weight, in.Zone = id, 7, "z"
		in.Check = &switchboard.Check{Target: "tcp://10.0.0.1:4317", Interval: time.Second}
		if id == "large" {
			in.Components = json.RawMessage(`{"blob": "` + strings.Repeat("x", 20_000) + `"}`)
		}
		if _, err := c.Register(ctx, in); err != nil {
			t.Fatal(err)
		}
		// Each step waits for the watcher to reach its revision: a log
		// read joins entries with the row as it is now, so changes made
		// faster than a read would arrive as one.
		for i, step := range []func() (switchboard.Instance, error){
			func() (switchboard.Instance, error) { return c.Get(ctx, id) },
			func() (switchboard.Instance, error) { return c.Drain(ctx, id, true) },
			func() (switchboard.Instance, error) {
				return c.SetHealth(ctx, id, switchboard.Health{Status: switchboard.StatusPassing, Output: "ok"})
			},
			func() (switchboard.Instance, error) {
				return c.SetHealth(ctx, id, switchboard.Health{Status: switchboard.StatusCritical, Output: "refused"})
			},
			func() (switchboard.Instance, error) { return c.Drain(ctx, id, false) },
		} {
			want, err := step()
			if err != nil {
				t.Fatal(err)
			}
			var got switchboard.Instance
			r.waitFor(t, id+"'s change", func(evs []switchboard.Event) bool {
				i := slices.IndexFunc(evs, func(ev switchboard.Event) bool {
					return ev.Instance.ID == id && ev.Revision == want.Revision
				})
				if i >= 0 {
					got = evs[i].Instance
				}
				return i >= 0
			})
			if !sameTraffic(got, want) || got.Revision != want.Revision {
				t.Fatalf("%s: step %d: the event carries\n%+v\nthe write returned\n%+v", id, i, got, want)
			}
		}
	}
}

func sameTraffic(a, b switchboard.Instance) bool {
	return a.Weight == b.Weight && a.Zone == b.Zone && a.Draining == b.Draining && reflect.DeepEqual(a.Check, b.Check) &&
		a.Health.Status == b.Health.Status && a.Health.Output == b.Health.Output && a.Health.Since.Equal(b.Health.Since)
}

// TestResyncSeesTrafficColumns: a change of any traffic column made behind
// the log (plain SQL) reaches watchers through the periodic resync: the
// row digest covers every one of them.
func TestResyncSeesTrafficColumns(t *testing.T) {
	dsn := pgtest.Schema(t, testDSN)
	c := openDSN(t, dsn, switchboard.Options{PollInterval: 200 * time.Millisecond})
	updates := map[string]string{
		"weight":   `weight = 5`,
		"zone":     `zone = 'behind'`,
		"draining": `draining = true`,
		"check":    `check_spec = '{"target": "tcp://h:1", "interval": "2s"}'`,
		"output":   `health_output = 'behind the log'`,
		"since":    `health_since = now() - interval '1 day'`,
		"status":   `health_status = 'warning'`,
	}
	for id := range updates {
		reg(t, c, id, "h:1")
	}
	ch, err := c.Watch(ctxT(t), switchboard.Query{All: true})
	if err != nil {
		t.Fatal(err)
	}
	r := record(t, ch)
	r.waitFor(t, "snapshot", func(evs []switchboard.Event) bool { return has(evs, switchboard.EventSynced, "") })
	h, err := c.startHub()
	if err != nil {
		t.Fatal(err)
	}
	h.Resync() // learns the digests
	conn, err := pgx.Connect(ctxT(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for id, set := range updates {
		exec(t, conn, `UPDATE instances SET `+set+` WHERE id = $1`, id)
	}
	r.waitFor(t, "every row updated by the resync", func(evs []switchboard.Event) bool {
		for id := range updates {
			if !has(evs, switchboard.EventUpdated, id) {
				return false
			}
		}
		return true
	})
	for id := range updates {
		got, err := c.Get(ctxT(t), id)
		if err != nil {
			t.Fatal(err)
		}
		r.mu.Lock()
		i := slices.IndexFunc(r.events, func(ev switchboard.Event) bool {
			return ev.Kind == switchboard.EventUpdated && ev.Instance.ID == id
		})
		ev := r.events[i]
		r.mu.Unlock()
		if !sameTraffic(ev.Instance, got) {
			t.Errorf("%s: the resync's update carries %+v, Get %+v", id, ev.Instance, got)
		}
	}
}

// TestTrafficMigration: rows a catalog of the version before the traffic
// state wrote read with the defaults once it is migrated (weight 100, no
// zone, not draining, no check, no health), keeping their revisions; and
// writes in that version's form (which name none of the new columns) leave
// the traffic state alone.
func TestTrafficMigration(t *testing.T) {
	dsn := pgtest.Schema(t, testDSN)
	ctx := ctxT(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	exec(t, conn, `CREATE TABLE schema_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`)
	for v := 1; v <= 6; v++ {
		exec(t, conn, migrations[v])
		exec(t, conn, `INSERT INTO schema_migrations (version) VALUES ($1)`, v)
	}
	// A registration as version 6 writes it: the row, then its entry,
	// whose trigger sets the revision.
	exec(t, conn, `INSERT INTO instances (id, name, type, address, capabilities, version, metadata, components, ttl)
		VALUES ('old', 'svc', 'writer', 'h:1', '{a}', '1', '{"k": "v"}', NULL, '1 hour')`)
	exec(t, conn, `INSERT INTO changes (id, op) VALUES ('old', 'upsert')`)

	c := openDSN(t, dsn, switchboard.Options{})
	got, err := c.Get(ctx, "old")
	if err != nil {
		t.Fatal(err)
	}
	if got.Weight != switchboard.DefaultWeight || got.Zone != "" || got.Draining || got.Check != nil ||
		got.Health.Status != "" || got.Health.Output != "" || !got.Health.Since.IsZero() || got.Revision != 1 {
		t.Fatalf("a row from before the migration: %+v", got)
	}
	if l, err := c.List(ctx, switchboard.Query{}); err != nil || len(l) != 1 {
		t.Fatalf("List: %+v %v", l, err)
	}

	in := got
	in.Weight, in.Zone = 3, "z"
	in.Check = &switchboard.Check{Target: "tcp://h:1", Interval: time.Second}
	if _, err := c.Register(ctx, in); err != nil {
		t.Fatal(err)
	}
	drained, err := c.Drain(ctx, "old", true)
	if err != nil {
		t.Fatal(err)
	}
	// Version 6's re-registration of the row: its columns only.
	exec(t, conn, `INSERT INTO instances (id, name, type, address, capabilities, version, metadata, components, ttl)
		VALUES ('old', 'svc', 'writer', 'h:2', '{a}', '2', '{}', NULL, '1 hour')
		ON CONFLICT (id) DO UPDATE SET address = EXCLUDED.address, version = EXCLUDED.version, metadata = EXCLUDED.metadata, last_seen = now()`)
	after, err := c.Get(ctx, "old")
	if err != nil {
		t.Fatal(err)
	}
	if after.Address != "h:2" || !sameTraffic(after, drained) {
		t.Fatalf("after an older version's registration: %+v; want the traffic state of %+v kept", after, drained)
	}
}

// TestTrafficRefusals: a check whose expected body holds a NUL byte
// (valid UTF-8, which jsonb cannot hold) is refused as invalid before
// anything is written; a check result's NUL bytes are stored as U+FFFD.
func TestTrafficRefusals(t *testing.T) {
	c, _, _ := newCatalog(t)
	ctx := ctxT(t)
	in := inst("svc", "10.0.0.1:80")
	in.ID = "nul"
	in.Check = &switchboard.Check{Target: "http://10.0.0.1/health", Interval: time.Second, Body: "a\x00b"}
	_, err := c.Register(ctx, in)
	var fe *switchboard.FieldError
	if !errors.As(err, &fe) || fe.Field != "check.body" || !errors.Is(err, switchboard.ErrInvalid) {
		t.Fatalf("a check body with NUL: %v, want an invalid check.body", err)
	}
	if _, err := c.Get(ctx, "nul"); !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("the refused registration stored a row: %v", err)
	}
	in.Check.Body = "ok"
	if _, err := c.Register(ctx, in); err != nil {
		t.Fatal(err)
	}
	out, err := c.SetHealth(ctx, "nul", switchboard.Health{Status: switchboard.StatusCritical, Output: "got \x00 byte"})
	if err != nil {
		t.Fatal(err)
	}
	if out.Health.Output != "got \uFFFD byte" {
		t.Fatalf("output stored as %q", out.Health.Output)
	}
}
