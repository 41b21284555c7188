package postgres

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/hub"
)

// listenRaw LISTENs on Channel on a connection of its own.
func listenRaw(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctxT(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(ctxT(t), `LISTEN `+Channel); err != nil {
		t.Fatal(err)
	}
	return conn
}

func nextNotice(t *testing.T, conn *pgx.Conn) *pgconn.Notification {
	t.Helper()
	n, err := conn.WaitForNotification(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestNotificationCarriesChange: the payload of a registration is the
// instance exactly as a log read returns it (metadata, components byte for
// byte, TTL to the microsecond, times), with the entry's seq and the
// catalog's epoch; a deregistration's carries its reason.
func TestNotificationCarriesChange(t *testing.T) {
	c, _, dsn := newCatalog(t)
	conn := listenRaw(t, dsn)
	ctx := ctxT(t)
	in := inst("svc", "10.0.0.1:4317", "storage", "gpu")
	in.ID = "n1"
	in.TTL = 1500*time.Millisecond + 7*time.Microsecond
	in.Metadata = map[string]string{"zone": "a", "ünï": "cödé"}
	in.Components = json.RawMessage(`{"z": [1, 2], "a": {"port": "in"}}`)
	out, err := c.Register(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	b, err := decodeNotice(nextNotice(t, conn).Payload)
	if err != nil {
		t.Fatal(err)
	}
	batch, err := source{c}.ChangesSince(ctx, hub.Cursor{Seq: 0})
	if err != nil || len(batch.Changes) != 1 {
		t.Fatalf("log read: %+v %v", batch, err)
	}
	read := batch.Changes[0]
	if b.Epoch != batch.Epoch || b.Seq != read.Seq || len(b.Changes) != 1 || b.Now.IsZero() {
		t.Fatalf("notice epoch %q seq %d (%d changes), log read epoch %q seq %d", b.Epoch, b.Seq, len(b.Changes), batch.Epoch, read.Seq)
	}
	if got := b.Changes[0]; !reflect.DeepEqual(got, read) {
		t.Fatalf("notice carries\n%+v\nthe log read gives\n%+v", got, read)
	}
	if got := b.Changes[0].Instance; !reflect.DeepEqual(got, out) {
		t.Fatalf("notice carries\n%+v\nRegister returned\n%+v", got, out)
	}

	// Without metadata or components, as a log read leaves them (nil).
	bare := inst("svc", "10.0.0.2:1")
	bare.ID = "n2"
	if _, err := c.Register(ctx, bare); err != nil {
		t.Fatal(err)
	}
	b2, err := decodeNotice(nextNotice(t, conn).Payload)
	if err != nil {
		t.Fatal(err)
	}
	got2, err := c.Get(ctx, "n2")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(b2.Changes[0].Instance, got2) {
		t.Fatalf("bare instance: notice %+v, Get %+v", b2.Changes[0].Instance, got2)
	}

	if err := c.Deregister(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	d, err := decodeNotice(nextNotice(t, conn).Payload)
	if err != nil {
		t.Fatal(err)
	}
	var wrote time.Time
	if err := conn.QueryRow(ctx, `SELECT at FROM changes WHERE seq = $1`, b2.Seq+1).Scan(&wrote); err != nil {
		t.Fatal(err)
	}
	want := hub.Change{Seq: b2.Seq + 1, ID: "n1", Deleted: true, Reason: switchboard.ReasonDeregistered,
		Instance: switchboard.Instance{ID: "n1"}, At: wrote.UTC()}
	if !reflect.DeepEqual(d.Changes, []hub.Change{want}) {
		t.Fatalf("deregistration notice %+v, want %+v", d.Changes, want)
	}
}

// TestLargeChangeFallsBackToLogRead: an instance whose change does not fit
// a notification (components of 20 KB) is notified empty, and a watcher in
// another handle still gets it, whole, from the log; a small change after
// it travels in its notification again.
func TestLargeChangeFallsBackToLogRead(t *testing.T) {
	c, _, dsn := newCatalog(t)
	conn := listenRaw(t, dsn)
	watcher := openDSN(t, dsn, switchboard.Options{PollInterval: time.Hour})
	r, ctx, _ := watchSynced(t, watcher)

	big := inst("svc", "10.0.0.1:1")
	big.ID = "big"
	big.Components = json.RawMessage(`{"blob": "` + strings.Repeat("x", 20_000) + `"}`)
	if _, err := c.Register(ctx, big); err != nil {
		t.Fatal(err)
	}
	if p := nextNotice(t, conn).Payload; p != "" {
		t.Fatalf("a 20 KB change was notified with a %d-byte payload, want an empty one", len(p))
	}
	r.waitFor(t, "big", func(evs []switchboard.Event) bool { return has(evs, switchboard.EventAdded, "big") })
	r.mu.Lock()
	for _, ev := range r.events {
		if ev.Kind == switchboard.EventAdded && ev.Instance.ID == "big" && string(ev.Instance.Components) != string(big.Components) {
			t.Errorf("watcher got components of %d bytes, want %d", len(ev.Instance.Components), len(big.Components))
		}
	}
	r.mu.Unlock()

	small := inst("svc", "10.0.0.1:2")
	small.ID = "small"
	if _, err := c.Register(ctx, small); err != nil {
		t.Fatal(err)
	}
	if _, err := decodeNotice(nextNotice(t, conn).Payload); err != nil {
		t.Fatalf("small change after a large one: %v", err)
	}
	r.waitFor(t, "small", func(evs []switchboard.Event) bool { return has(evs, switchboard.EventAdded, "small") })
	if got := r.changes(0); !reflect.DeepEqual(got, []string{"added big", "added small"}) {
		t.Fatalf("events %q", got)
	}
}

// TestDecodeNoticeRejects: payloads this version cannot apply are errors
// (the listener then reads the log), never a half-filled change.
func TestDecodeNoticeRejects(t *testing.T) {
	for _, p := range []string{
		`not json`,
		`{}`,
		`{"e": "x", "s": 1, "id": "a", "o": "upsert"}`,
		`{"e": "x", "s": 1, "id": "a", "o": "rename"}`,
		`{"e": "x", "s": 0, "id": "a", "o": "delete"}`,
		`{"e": "", "s": 1, "id": "a", "o": "delete"}`,
		// A program older than the traffic state: its row names none of it.
		`{"e": "x", "s": 1, "id": "a", "o": "upsert", "i": {"name": "n", "type": "t", "address": "h:1", "capabilities": [],
			"version": "", "metadata": {}, "components": null, "ttl_us": 1000000, "registered_at": "2026-01-01T00:00:00Z",
			"last_seen": "2026-01-01T00:00:00Z", "stale": false}}`,
	} {
		if b, err := decodeNotice(p); err == nil {
			t.Errorf("decodeNotice(%s) = %+v, want an error", p, b)
		}
	}
}
