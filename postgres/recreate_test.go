package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/testkit"
	"github.com/switchboard-io/switchboard/postgres/pgtest"
)

// TestBootstrapComesBackAfterRestartEmpty: a database restarted empty (its
// tables gone, as a fresh container or a restore without them leaves it)
// must not keep a registration out until the process restarts:
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
	pgtest.RetryDeadlock(t, "drop the catalog's tables", func() error {
		_, err := conn.Exec(context.Background(), `DROP TABLE instances, changes, change_log, leases, schema_migrations`)
		return err
	})
}

// TestReadsSayTablesMissing: while the catalog's tables are gone, only
// writers create them again. Every other call says what is wrong (the
// tables are missing, a registration creates them again) and is
// ErrNoCatalog, not a bare "relation does not exist"; so does a running
// watcher's error event. After a registration, reads work again.
func TestReadsSayTablesMissing(t *testing.T) {
	ctx := ctxT(t)
	c, conn, dsn := newCatalog(t)
	// A handle whose watcher runs across the drop, polling often so that
	// it reads the catalog without waiting for a notification.
	w := openDSN(t, dsn, switchboard.Options{PollInterval: 50 * time.Millisecond})
	in, err := c.Register(ctx, inst("before", "127.0.0.1:7003"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Acquire(ctx, "l", "h", time.Minute); err != nil {
		t.Fatal(err)
	}
	events, err := w.Watch(ctx, switchboard.Query{})
	if err != nil {
		t.Fatal(err)
	}
	for ev := range events {
		if ev.Kind == switchboard.EventSynced {
			break
		}
	}
	ro := openDSN(t, dsn, switchboard.Options{MustExist: true})
	dropAll(t, conn)

	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, switchboard.ErrNoCatalog) {
			t.Errorf("%s: %v, want ErrNoCatalog", what, err)
			return
		}
		msg := err.Error()
		for _, want := range []string{"catalog tables missing", "registration", "creates them again", "(schema "} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: %q does not say %q", what, msg, want)
			}
		}
		if strings.Count(msg, "catalog tables missing") != 1 {
			t.Errorf("%s: said more than once: %q", what, msg)
		}
		if strings.Count(msg, "watch: ") > 1 {
			t.Errorf("%s: says watch twice: %q", what, msg)
		}
	}
	_, err = c.List(ctx, switchboard.Query{})
	check("List", err)
	_, err = c.Get(ctx, in.ID)
	check("Get", err)
	_, err = c.Watch(ctx, switchboard.Query{})
	check("Watch", err)
	check("Deregister", c.Deregister(ctx, in.ID))
	_, err = c.Reap(ctx, 0)
	check("Reap", err)
	_, err = c.Leases(ctx)
	check("Leases", err)
	var evErr error
	for ev := range events {
		if ev.Kind == switchboard.EventError {
			evErr = ev.Err
			break
		}
	}
	check("watch event", evErr)

	// A handle that creates nothing says who does.
	_, err = ro.List(ctx, switchboard.Query{})
	check("List, MustExist", err)
	if err != nil && !strings.Contains(err.Error(), "not opened with MustExist") {
		t.Errorf("List, MustExist: %q does not say which process creates the tables", err)
	}

	if _, err := c.Register(ctx, in); err != nil {
		t.Fatal(err)
	}
	got, err := c.List(ctx, switchboard.Query{})
	if err != nil || len(got) != 1 || got[0].ID != in.ID {
		t.Fatalf("List after the registration: %+v %v", got, err)
	}
}
