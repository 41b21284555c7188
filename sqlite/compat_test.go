//go:build unix

package sqlite

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/backend"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

// rawExec runs statements on the file at path outside any Catalog, as a
// newer release's migration would.
func rawExec(t *testing.T, path string, stmts ...string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

func rawInt(t *testing.T, path, query string) int {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(query).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// A catalog records its compat version, the one the exclusive migrations
// give, at creation.
func TestCompatVersionRecorded(t *testing.T) {
	c, path := newFile(t)
	c.Close()
	want := backend.CompatVersion(len(migrations), exclusiveMigrations)
	if want != 6 {
		t.Fatalf("compat version of schema %d is %d; migration %d records 6", len(migrations), want, compatSince)
	}
	if got := rawInt(t, path, `SELECT value FROM meta WHERE key = 'compat_version'`); got != want {
		t.Fatalf("recorded compat version %d, want %d", got, want)
	}
}

// A catalog migrated further by a newer program, with additive migrations
// only (its compat version still at most this program's), is used as it
// is: registrations, lists and watches work and the newer version stays.
func TestNewerCompatibleSchemaOpens(t *testing.T) {
	c, path := newFile(t)
	mustRegister(t, c, sample("before"))
	c.Close()
	next := len(migrations) + 1
	rawExec(t, path,
		`ALTER TABLE instances ADD COLUMN future TEXT NOT NULL DEFAULT ''`,
		fmt.Sprintf(`INSERT INTO schema_migrations (version, applied_at) VALUES (%d, 0)`, next))

	c = openFile(t, path)
	ctx := tctx(t)
	mustRegister(t, c, sample("after"))
	got, err := c.List(ctx, switchboard.Query{})
	if err != nil || len(got) != 2 {
		t.Fatalf("list on a newer compatible schema: %v, %v", got, err)
	}
	if v := rawInt(t, path, `SELECT max(version) FROM schema_migrations`); v != next {
		t.Fatalf("schema version %d after use, want %d kept", v, next)
	}
}

// fileDigest is a digest of the catalog file and its WAL.
func fileDigest(t *testing.T, path string) string {
	t.Helper()
	h := sha256.New()
	for _, p := range []string{path, path + "-wal"} {
		b, err := os.ReadFile(p)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		h.Write(b)
		h.Write([]byte{0})
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

// A catalog whose compat version is above what this program knows is
// refused with one line naming both versions and what to do, and the file
// is left as it was, byte for byte.
func TestNewerIncompatibleSchemaRefused(t *testing.T) {
	for _, mustExist := range []bool{false, true} {
		t.Run(fmt.Sprintf("mustExist=%v", mustExist), func(t *testing.T) {
			c, path := newFile(t)
			mustRegister(t, c, sample("kept"))
			c.Close()
			next := len(migrations) + 1
			rawExec(t, path,
				fmt.Sprintf(`INSERT INTO schema_migrations (version, applied_at) VALUES (%d, 0)`, next),
				fmt.Sprintf(`UPDATE meta SET value = %d WHERE key = 'compat_version'`, next),
				`PRAGMA wal_checkpoint(TRUNCATE)`)
			before := fileDigest(t, path)

			opts := quiet
			opts.MustExist = mustExist
			_, err := Open(tctx(t), fileDSN(path), opts)
			want := fmt.Sprintf("this catalog's schema is version %d, written by a newer switchboard; this program knows up to %d and the catalog needs at least %d: upgrade switchboard", next, len(migrations), next)
			if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("open: %v\nwant one line containing %q", err, want)
			}
			if after := fileDigest(t, path); after != before {
				t.Fatal("the refused open changed the file")
			}
		})
	}
}

// A newer catalog without a compat record (from a program of its own
// lineage that lost it) is refused too: nothing says this program may use it.
func TestNewerSchemaWithoutCompatRefused(t *testing.T) {
	c, path := newFile(t)
	c.Close()
	rawExec(t, path,
		fmt.Sprintf(`INSERT INTO schema_migrations (version, applied_at) VALUES (%d, 0)`, len(migrations)+1),
		`DELETE FROM meta WHERE key = 'compat_version'`)
	_, err := Open(tctx(t), fileDSN(path), quiet)
	if err == nil || !strings.Contains(err.Error(), "records no compatible version: upgrade switchboard") {
		t.Fatalf("open: %v", err)
	}
}

// halfMigrateEnv makes the test binary a child process that opens the
// catalog named by its value with one more migration, says "migrating"
// inside that migration's transaction (its statements run, its version not
// yet recorded), and waits there to be killed.
const halfMigrateEnv = "SWITCHBOARD_TEST_HALF_MIGRATE"

func halfMigrate(path string) {
	migrations = append(migrations, `CREATE TABLE half_done (x INTEGER);
		ALTER TABLE instances ADD COLUMN half_col INTEGER NOT NULL DEFAULT 7;
		UPDATE meta SET value = 99 WHERE key = 'compat_version';`)
	migrateHook = func(int) {
		fmt.Println("migrating")
		select {}
	}
	_, err := Open(context.Background(), fileDSN(path), quiet)
	fmt.Println("open returned:", err)
	os.Exit(1)
}

// A process killed in the middle of a migration leaves the previous
// version whole: none of the migration's statements is seen, the next
// open (of this program) finds the catalog current, and a program with
// the extra migration applies it from the start.
func TestKilledMigrationRollsBack(t *testing.T) {
	c, path := newFile(t)
	mustRegister(t, c, sample("kept"))
	c.Close()

	cmd := startChild(t, halfMigrateEnv, path, "migrating")
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	if v := rawInt(t, path, `SELECT max(version) FROM schema_migrations`); v != len(migrations) {
		t.Fatalf("schema version %d after the kill, want %d", v, len(migrations))
	}
	if n := rawInt(t, path, `SELECT count(*) FROM sqlite_master WHERE name = 'half_done'`); n != 0 {
		t.Fatal("the killed migration's table is there")
	}
	if n := rawInt(t, path, `SELECT count(*) FROM pragma_table_info('instances') WHERE name = 'half_col'`); n != 0 {
		t.Fatal("the killed migration's column is there")
	}
	if v := rawInt(t, path, `SELECT value FROM meta WHERE key = 'compat_version'`); v != 6 {
		t.Fatalf("compat version %d after the kill, want 6", v)
	}
	c = openFile(t, path)
	got, err := c.List(tctx(t), switchboard.Query{})
	if err != nil || len(got) != 1 || got[0].ID != "kept" {
		t.Fatalf("list after the killed migration: %v, %v", got, err)
	}
}

// Applying an exclusive migration raises the compat version to it, so that
// programs that know only earlier versions refuse the catalog; an additive
// one leaves it.
func TestExclusiveMigrationRaisesCompat(t *testing.T) {
	c, path := newFile(t)
	c.Close()
	saved := migrations
	t.Cleanup(func() { migrations = saved; delete(exclusiveMigrations, len(saved)+2) })
	migrations = append(migrations[:len(saved):len(saved)], `CREATE TABLE additive_one (x INTEGER);`)
	c = openFile(t, path)
	c.Close()
	if v := rawInt(t, path, `SELECT value FROM meta WHERE key = 'compat_version'`); v != 6 {
		t.Fatalf("compat version %d after an additive migration, want 6", v)
	}
	exclusiveMigrations[len(saved)+2] = true
	migrations = append(migrations, `DROP TABLE additive_one;`)
	c = openFile(t, path)
	c.Close()
	if v := rawInt(t, path, `SELECT value FROM meta WHERE key = 'compat_version'`); v != len(saved)+2 {
		t.Fatalf("compat version %d after an exclusive migration, want %d", v, len(saved)+2)
	}
}

// An exclusive migration waits, rather than racing them, until no live row
// was registered by a program that knows only earlier schema versions: it
// says what it waits for, applies nothing meanwhile, and runs once those
// rows are gone (here: deregistered). Rows this program registers record
// its schema version; rows of programs from before the column record 0.
func TestExclusiveMigrationWaitsForOlderWriters(t *testing.T) {
	c, path := newFile(t)
	mustRegister(t, c, sample("old-writer"))
	mustRegister(t, c, sample("new-writer"))
	// old-writer as a program from before schema_version leaves it.
	rawExec(t, path, `UPDATE instances SET schema_version = 0 WHERE id = 'old-writer'`)
	if v := rawInt(t, path, `SELECT schema_version FROM instances WHERE id = 'new-writer'`); v != len(migrations) {
		t.Fatalf("a row this program registered records schema %d, want %d", v, len(migrations))
	}
	// An unchanged re-registration records it too.
	rawExec(t, path, `UPDATE instances SET schema_version = 0 WHERE id = 'new-writer'`)
	mustRegister(t, c, sample("new-writer"))
	if v := rawInt(t, path, `SELECT schema_version FROM instances WHERE id = 'new-writer'`); v != len(migrations) {
		t.Fatalf("an unchanged re-registration left schema %d, want %d", v, len(migrations))
	}

	saved, savedRetry := migrations, backend.ExclusiveRetry
	v := len(saved) + 1
	t.Cleanup(func() { migrations = saved; delete(exclusiveMigrations, v); backend.ExclusiveRetry = savedRetry })
	migrations = append(migrations[:len(saved):len(saved)], `CREATE TABLE exclusive_one (x INTEGER);`)
	exclusiveMigrations[v] = true
	backend.ExclusiveRetry = 10 * time.Millisecond
	// Rows of this program's schema are older writers for migration v too;
	// new-writer stands for a row the program that knows v registered.
	rawExec(t, path, fmt.Sprintf(`UPDATE instances SET schema_version = %d WHERE id = 'new-writer'`, v))

	// waiting starts an open that logs to its own buffer.
	waiting := func(ctx context.Context) <-chan error {
		logs := &testkit.SyncBuffer{}
		opts := quiet
		opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
		opened := make(chan error, 1)
		go func() {
			c2, err := Open(ctx, fileDSN(path), opts)
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
	ctx, cancel := context.WithCancel(tctx(t))
	opened := waiting(ctx)
	cancel()
	err := <-opened
	var ow *backend.OlderWriters
	if !errors.As(err, &ow) || ow.Migration != v || ow.Count != 1 || len(ow.IDs) != 1 || ow.IDs[0] != "old-writer" ||
		!strings.Contains(err.Error(), "needs exclusive use") {
		t.Fatalf("open beside an older writer: %v", err)
	}

	opened = waiting(tctx(t))
	if n := rawInt(t, path, `SELECT count(*) FROM sqlite_master WHERE name = 'exclusive_one'`); n != 0 {
		t.Fatal("the exclusive migration ran beside a live older writer")
	}
	if err := c.Deregister(tctx(t), "old-writer"); err != nil {
		t.Fatal(err)
	}
	if err := <-opened; err != nil {
		t.Fatalf("open once the older writer left: %v", err)
	}
	if n := rawInt(t, path, `SELECT count(*) FROM sqlite_master WHERE name = 'exclusive_one'`); n != 1 {
		t.Fatal("the exclusive migration did not run")
	}
	if got := rawInt(t, path, `SELECT value FROM meta WHERE key = 'compat_version'`); got != v {
		t.Fatalf("compat version %d, want %d", got, v)
	}
}
