package postgres

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/hub"
	"github.com/switchboard-io/switchboard/postgres/pgtest"
)

// TestDefaultTTLRounded: the catalog's default TTL is stored as every TTL
// is (millis.Round): rounded up to whole milliseconds, as on
// SQLite, not kept to the microsecond.
func TestDefaultTTLRounded(t *testing.T) {
	ctx := ctxT(t)
	dflt := 3*time.Second + time.Microsecond
	c := openDSN(t, pgtest.Schema(t, testDSN), switchboard.Options{DefaultTTL: dflt})
	out, err := c.Register(ctx, inst("dflt", "127.0.0.1:7000"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Get(ctx, out.ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := 3*time.Second + time.Millisecond; out.TTL != want || got.TTL != want {
		t.Fatalf("default TTL %v stored as %v (Register) and %v (Get), want %v", dflt, out.TTL, got.TTL, want)
	}
	// Rounded once, when the catalog opens, not at every registration.
	if want := 3*time.Second + time.Millisecond; c.opts.DefaultTTL != want {
		t.Fatalf("Open kept the default TTL %v, want it rounded to %v", c.opts.DefaultTTL, want)
	}
}

// TestLegacyTTLReadRounded: a row an older version registered keeps a TTL
// in microseconds until it is registered again; every read reports it in
// whole milliseconds, rounded up as millis.Round stores TTLs now (catalogtest's
// TTLPrecision): Get and the log read (Scan), List and a watch's snapshot
// (the binary decoding), and a notification of it.
func TestLegacyTTLReadRounded(t *testing.T) {
	c, conn, _ := newCatalog(t)
	ctx := ctxT(t)
	const want = 2*time.Second + time.Millisecond
	exec(t, conn, `INSERT INTO instances (id, name, type, address, capabilities, version, metadata, components, ttl, registered_at, last_seen)
		VALUES ('legacy', 'old', 'writer', '10.0.0.1:1', '{}', '', '{}', NULL, '2.000500 seconds', now(), now())`)
	got, err := c.Get(ctx, "legacy")
	if err != nil || got.TTL != want {
		t.Fatalf("Get: ttl %v, %v; want %v", got.TTL, err, want)
	}
	list, err := c.List(ctx, switchboard.Query{All: true})
	if err != nil || len(list) != 1 || list[0].TTL != want {
		t.Fatalf("List: %+v, %v; want ttl %v", list, err, want)
	}
	w, err := c.Watch(ctx, switchboard.Query{All: true})
	if err != nil {
		t.Fatal(err)
	}
	if ev := <-w; ev.Kind != switchboard.EventAdded || ev.Instance.TTL != want {
		t.Fatalf("watch snapshot: %+v; want ttl %v", ev, want)
	}
	// Gone stale, a heartbeat revives it: logged, and read from the log.
	exec(t, conn, `UPDATE instances SET last_seen = now() - interval '1 hour' WHERE id = 'legacy'`)
	if missing, err := c.Heartbeat(ctx, "legacy"); err != nil || len(missing) != 0 {
		t.Fatalf("Heartbeat: %v, %v", missing, err)
	}
	batch, err := source{c}.ChangesSince(ctx, hub.Cursor{Seq: 0})
	if err != nil || len(batch.Changes) != 1 || batch.Changes[0].Instance.TTL != want {
		t.Fatalf("log read: %+v, %v; want ttl %v", batch, err, want)
	}
	// A notification of the row carries its TTL in microseconds: decoded
	// as the log read would give it. (One from a version older than the
	// traffic state is not decoded at all: TestDecodeNoticeRejects.)
	weight := switchboard.DefaultWeight
	payload, err := json.Marshal(notice{Epoch: batch.Epoch, Seq: 7, At: time.Now(), Op: "upsert", ID: "legacy",
		Row: &noticeInstance{Name: "old", Type: "writer", Address: "10.0.0.1:1", TTLMicros: 2_000_500, Weight: &weight}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := decodeNotice(string(payload))
	if err != nil || len(b.Changes) != 1 || b.Changes[0].Instance.TTL != want {
		t.Fatalf("notice: %+v, %v; want ttl %v", b, err, want)
	}
}
