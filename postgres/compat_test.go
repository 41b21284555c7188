package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/backend"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

// A catalog records its compat version, the one the exclusive migrations
// give, at creation.
func TestCompatVersionRecorded(t *testing.T) {
	_, conn, _ := newCatalog(t)
	known := len(migrations) - 1
	want := backend.CompatVersion(known, exclusiveMigrations)
	if want != 4 {
		t.Fatalf("compat version of schema %d is %d; migration %d records 4", known, want, compatSince)
	}
	if got := count(t, conn, compatSQL); got != want {
		t.Fatalf("recorded compat version %d, want %d", got, want)
	}
}

// A catalog migrated further by a newer program, with additive migrations
// only, is used as it is, with or without MustExist: registrations and
// lists work and the newer version stays.
func TestNewerCompatibleSchemaOpens(t *testing.T) {
	c, conn, dsn := newCatalog(t)
	ctx := ctxT(t)
	if _, err := c.Register(ctx, inst("before", "127.0.0.1:1")); err != nil {
		t.Fatal(err)
	}
	c.Close()
	next := len(migrations)
	exec(t, conn, `ALTER TABLE instances ADD COLUMN future text NOT NULL DEFAULT ''`)
	exec(t, conn, `INSERT INTO schema_migrations (version) VALUES ($1)`, next)
	for _, mustExist := range []bool{false, true} {
		c := openDSN(t, dsn, switchboard.Options{MustExist: mustExist})
		if _, err := c.Register(ctx, inst(fmt.Sprintf("after-%v", mustExist), "127.0.0.1:2")); err != nil {
			t.Fatal(err)
		}
		got, err := c.List(ctx, switchboard.Query{})
		if err != nil || len(got) < 2 {
			t.Fatalf("list on a newer compatible schema: %v, %v", got, err)
		}
	}
	if v := count(t, conn, `SELECT max(version) FROM schema_migrations`); v != next {
		t.Fatalf("schema version %d after use, want %d kept", v, next)
	}
}

// A catalog whose compat version is above what this program knows is
// refused with one line naming both versions and what to do, and nothing
// in it is written.
func TestNewerIncompatibleSchemaRefused(t *testing.T) {
	c, conn, dsn := newCatalog(t)
	ctx := ctxT(t)
	if _, err := c.Register(ctx, inst("kept", "127.0.0.1:1")); err != nil {
		t.Fatal(err)
	}
	c.Close()
	next := len(migrations)
	exec(t, conn, `INSERT INTO schema_migrations (version) VALUES ($1)`, next)
	exec(t, conn, `UPDATE change_log SET compat_version = $1`, next)
	state := func() string {
		var s string
		if err := conn.QueryRow(context.Background(), `SELECT
			(SELECT string_agg(table_name || '.' || column_name, ',' ORDER BY table_name, column_name) FROM information_schema.columns WHERE table_schema = current_schema())
			|| '|' || (SELECT string_agg(version::text || '@' || applied_at::text, ',' ORDER BY version) FROM schema_migrations)
			|| '|' || (SELECT to_jsonb(c)::text FROM change_log c)
			|| '|' || (SELECT string_agg(to_jsonb(i)::text, ',' ORDER BY id) FROM instances i)
			|| '|' || (SELECT count(*) FROM changes)::text`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	before := state()
	want := fmt.Sprintf("this catalog's schema is version %d, written by a newer switchboard; this program knows up to %d and the catalog needs at least %d: upgrade switchboard", next, next-1, next)
	for _, mustExist := range []bool{false, true} {
		d, err := switchboard.ParseDSN(dsn)
		if err != nil {
			t.Fatal(err)
		}
		c, err := Open(ctx, d, switchboard.Options{MustExist: mustExist, Logger: quietLogger()})
		if err == nil {
			c.Close()
		}
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Fatalf("open (MustExist %v): %v\nwant one line containing %q", mustExist, err, want)
		}
	}
	if after := state(); after != before {
		t.Fatalf("the refused open changed the catalog:\n%s\n%s", before, after)
	}
}

// A migration whose connection is lost midway (the process killed: the
// server sees its connection close) is rolled back whole: the version and
// every statement of it are gone, the rows are intact, and the next open
// applies it from the start.
func TestKilledMigrationRollsBack(t *testing.T) {
	c, conn, dsn := newCatalog(t)
	ctx := ctxT(t)
	if _, err := c.Register(ctx, inst("kept", "127.0.0.1:1")); err != nil {
		t.Fatal(err)
	}
	c.Close()
	saved := migrations
	known := len(saved) - 1
	t.Cleanup(func() { migrations = saved; migrateHook = nil })
	migrations = append(saved[:len(saved):len(saved)], `
CREATE TABLE half_done (x int);
ALTER TABLE instances ADD COLUMN half_col int NOT NULL DEFAULT 7;
UPDATE change_log SET compat_version = 99;
`)
	reached := make(chan struct{})
	release := make(chan struct{})
	migrateHook = func(int) {
		close(reached)
		<-release
	}
	d, err := switchboard.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	opened := make(chan error, 1)
	go func() {
		c, err := Open(ctx, d, switchboard.Options{Logger: quietLogger()})
		if err == nil {
			c.Close()
		}
		opened <- err
	}()
	select {
	case <-reached:
	case <-ctx.Done():
		t.Fatal("the migration did not start")
	}
	exec(t, conn, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND state = 'idle in transaction' AND query LIKE '%half_done%'`)
	close(release)
	if err := <-opened; err == nil {
		t.Fatal("the open whose connection was killed mid-migration succeeded")
	}
	migrateHook = nil

	testkit.WaitUntil(t, "the killed migration rolled back", func() bool {
		return count(t, conn, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE '%half_done%' AND pid <> pg_backend_pid()`) == 0
	})
	if v := count(t, conn, `SELECT max(version) FROM schema_migrations`); v != known {
		t.Fatalf("schema version %d after the kill, want %d", v, known)
	}
	if n := count(t, conn, `SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = 'half_done'`); n != 0 {
		t.Fatal("the killed migration's table is there")
	}
	if n := count(t, conn, `SELECT count(*) FROM information_schema.columns WHERE table_schema = current_schema() AND column_name = 'half_col'`); n != 0 {
		t.Fatal("the killed migration's column is there")
	}
	if v := count(t, conn, compatSQL); v != 4 {
		t.Fatalf("compat version %d after the kill, want 4", v)
	}
	// A program with the extra migration applies it from the start.
	c2 := openDSN(t, dsn, switchboard.Options{})
	if v := count(t, conn, `SELECT max(version) FROM schema_migrations`); v != known+1 {
		t.Fatalf("schema version %d after the retry, want %d", v, known+1)
	}
	got, err := c2.List(ctx, switchboard.Query{})
	if err != nil || len(got) != 1 {
		t.Fatalf("list after the retried migration: %v, %v", got, err)
	}
}

// An exclusive migration waits, rather than racing them, until no live row
// was registered by a program that knows only earlier schema versions: it
// says what it waits for, applies nothing meanwhile, and runs once those
// rows are gone. Rows this program registers record its schema version
// (on an insert, an update and an unchanged renewal alike); rows of
// programs from before the column record 0.
func TestExclusiveMigrationWaitsForOlderWriters(t *testing.T) {
	c, conn, dsn := newCatalog(t)
	ctx := ctxT(t)
	known := len(migrations) - 1
	for _, id := range []string{"old-writer", "new-writer", "new-writer"} {
		exec(t, conn, `UPDATE instances SET schema_version = 0 WHERE id = 'new-writer'`)
		in := inst("w", "127.0.0.1:1")
		in.ID, in.TTL = id, time.Minute
		if _, err := c.Register(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	if v := count(t, conn, `SELECT schema_version FROM instances WHERE id = 'new-writer'`); v != known {
		t.Fatalf("an unchanged re-registration left schema %d, want %d", v, known)
	}
	exec(t, conn, `UPDATE instances SET schema_version = 0 WHERE id = 'old-writer'`)

	saved, savedRetry := migrations, backend.ExclusiveRetry
	v := len(saved)
	t.Cleanup(func() { migrations = saved; delete(exclusiveMigrations, v); backend.ExclusiveRetry = savedRetry })
	migrations = append(saved[:len(saved):len(saved)], `CREATE TABLE exclusive_one (x int);`)
	exclusiveMigrations[v] = true
	backend.ExclusiveRetry = 10 * time.Millisecond
	// Rows of this program's schema are older writers for migration v too;
	// new-writer stands for a row the program that knows v registered.
	exec(t, conn, fmt.Sprintf(`UPDATE instances SET schema_version = %d WHERE id = 'new-writer'`, v))
	d, err := switchboard.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}

	// waiting starts an open that logs to its own buffer.
	waiting := func(ctx context.Context) <-chan error {
		logs := &testkit.SyncBuffer{}
		opened := make(chan error, 1)
		go func() {
			c2, err := Open(ctx, d, switchboard.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
			if err == nil {
				c2.Close()
			}
			opened <- err
		}()
		testkit.WaitUntil(t, "the open to say what it waits for", func() bool {
			return strings.Contains(logs.String(), "waiting to migrate") && strings.Contains(logs.String(), "old-writer")
		})
		return opened
	}

	// Given up by its context, the open names the migration and the row.
	short, cancel := context.WithCancel(ctx)
	opened := waiting(short)
	cancel()
	err = <-opened
	var ow *backend.OlderWriters
	if !errors.As(err, &ow) || ow.Migration != v || ow.Count != 1 || len(ow.IDs) != 1 || ow.IDs[0] != "old-writer" ||
		!strings.Contains(err.Error(), "needs exclusive use") {
		t.Fatalf("open beside an older writer: %v", err)
	}

	opened = waiting(ctx)
	tables := `SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = 'exclusive_one'`
	if count(t, conn, tables) != 0 {
		t.Fatal("the exclusive migration ran beside a live older writer")
	}
	if err := c.Deregister(ctx, "old-writer"); err != nil {
		t.Fatal(err)
	}
	if err := <-opened; err != nil {
		t.Fatalf("open once the older writer left: %v", err)
	}
	if count(t, conn, tables) != 1 {
		t.Fatal("the exclusive migration did not run")
	}
	if got := count(t, conn, compatSQL); got != v {
		t.Fatalf("compat version %d, want %d", got, v)
	}
}
