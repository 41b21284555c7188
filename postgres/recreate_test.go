package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

// TestBootstrapComesBackAfterRestartEmpty: a database restarted empty (its
// tables gone, as a fresh container or a restore without them leaves it)
// must not keep a registration out until the process restarts (SPEC §3):
// the heartbeat creates the schema again, finds the row missing and the
// bootstrap registers it again.
func TestBootstrapComesBackAfterRestartEmpty(t *testing.T) {
	c, conn, _ := newCatalog(t)
	ctx := ctxT(t)
	in := inst("phoenix", "127.0.0.1:7000")
	in.TTL = 10 * time.Second
	reg, err := switchboard.Bootstrap(ctx, c, in, switchboard.BootstrapOptions{
		HeartbeatInterval: 50 * time.Millisecond, DisableReaper: true, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	// A watcher from before: it must see the catalog again (a new epoch:
	// the re-created log starts over), not wait for sequence numbers the
	// new log reaches only much later.
	events, err := c.Watch(ctx, switchboard.Query{})
	if err != nil {
		t.Fatal(err)
	}
	for ev := range events {
		if ev.Kind == switchboard.EventSynced {
			break
		}
	}
	dropAll(t, conn)
	testkit.WaitUntil(t, "the registration back in a re-created catalog", func() bool {
		got, err := c.Get(context.Background(), reg.ID())
		return err == nil && got.Name == "phoenix" && reg.Stats().Reregistrations >= 1
	})
	if n := count(t, conn, `SELECT count(*) FROM schema_migrations`); n != len(migrations)-1 {
		t.Fatalf("schema_migrations has %d rows, want %d", n, len(migrations)-1)
	}
	// A direct Register of a new instance works too, and so do leases.
	other, err := c.Register(ctx, inst("other", "127.0.0.1:7001"))
	if err != nil {
		t.Fatal(err)
	}
	seen := false
	for ev := range events { // ends with ctx
		if seen = ev.Kind == switchboard.EventAdded && ev.Instance.ID == other.ID; seen {
			break
		}
	}
	if !seen {
		t.Fatal("the watcher from before the drop never saw the new registration")
	}
	if _, err := c.Acquire(ctx, "l", "h", time.Minute); err != nil {
		t.Fatal(err)
	}
}

// TestRegisterRecreatesDroppedTables: Register alone (no heartbeat first)
// on a catalog whose tables are gone.
func TestRegisterRecreatesDroppedTables(t *testing.T) {
	c, conn, _ := newCatalog(t)
	ctx := ctxT(t)
	dropAll(t, conn)
	out, err := c.Register(ctx, inst("again", "127.0.0.1:7002"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.Get(ctx, out.ID); err != nil || got.Name != "again" {
		t.Fatalf("Get: %+v %v", got, err)
	}
}

// dropAll drops the catalog's tables, as a database restarted empty has
// none. Heartbeats and the watcher's reads lock the same tables in
// another order meanwhile: PostgreSQL may end the DROP as a deadlock's
// victim, and then it is tried again.
func dropAll(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		_, err := conn.Exec(context.Background(), `DROP TABLE instances, changes, change_log, leases, schema_migrations`)
		var pe *pgconn.PgError
		if err == nil {
			return
		}
		if !errors.As(err, &pe) || pe.Code != "40P01" || attempt == 20 {
			t.Fatalf("drop the catalog's tables (attempt %d): %v", attempt, err)
		}
	}
}
