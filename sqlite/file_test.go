package sqlite

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

// MustExist creates nothing: no directory, no file, no schema.
func TestMustExist(t *testing.T) {
	dir := t.TempDir()
	opts := quiet
	opts.MustExist = true
	missing := filepath.Join(dir, "typo", "path", "x.db")
	_, err := Open(tctx(t), fileDSN(missing), opts)
	if !errors.Is(err, switchboard.ErrNoCatalog) || !strings.Contains(err.Error(), "no catalog at "+missing+" (nothing has registered there yet)") {
		t.Fatalf("missing catalog: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "typo")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a directory was created: %v", err)
	}
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(tctx(t), fileDSN(empty), opts); !errors.Is(err, switchboard.ErrNoCatalog) {
		t.Fatalf("file without a catalog: %v", err)
	}
	if fi, err := os.Stat(empty); err != nil || fi.Size() != 0 {
		t.Fatalf("the empty file was written: %v %v", fi, err)
	}

	c, path := newFile(t)
	mustRegister(t, c, sample("x"))
	r, err := Open(tctx(t), fileDSN(path), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Get(tctx(t), "x"); err != nil {
		t.Fatal(err)
	}
	if err := r.Deregister(tctx(t), "x"); err != nil {
		t.Fatal(err)
	}
}

// rmCatalog removes the database and its sidecar files, as
// `rm .data/switchboard.db*` does.
func rmCatalog(t *testing.T, path string) {
	t.Helper()
	matches, _ := filepath.Glob(path + "*")
	for _, m := range matches {
		if err := os.Remove(m); err != nil {
			t.Fatal(err)
		}
	}
}

// bootedHandle opens a new catalog file whose log it returns, with a
// bootstrap of "boot" (TTL 2 s, heartbeats every 200 ms); both end with
// the test.
func bootedHandle(t *testing.T) (c *Catalog, path string, log *testkit.SyncBuffer) {
	t.Helper()
	log = &testkit.SyncBuffer{}
	opts := quiet
	opts.Logger = slogTo(log)
	path = filepath.Join(t.TempDir(), "catalog.db")
	c, err := Open(tctx(t), fileDSN(path), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	in := sample("boot")
	in.TTL = 2 * time.Second
	reg, err := switchboard.Bootstrap(tctx(t), c, in, switchboard.BootstrapOptions{HeartbeatInterval: 200 * time.Millisecond, Logger: opts.Logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	return c, path, log
}

// oneReopenWarning checks that log warned once of the file's deletion.
func oneReopenWarning(t *testing.T, log *testkit.SyncBuffer) {
	t.Helper()
	if n := strings.Count(log.String(), "while open; opening the path again"); n != 1 {
		t.Fatalf("want one warning, got %d:\n%s", n, log.String())
	}
}

// A handle whose file is deleted under it reopens the path within a check
// period: its bootstraps register again, and its watchers and another
// handle's end with exactly the new file's rows.
func TestFileDeletedUnderOpenCatalog(t *testing.T) {
	a, path, log := bootedHandle(t)
	mustRegister(t, a, sample("plain")) // no heartbeat: gone with the file
	w, err := a.Watch(tctx(t), switchboard.Query{})
	if err != nil {
		t.Fatal(err)
	}
	set := testkit.NewWatchSet(w)
	set.WaitForSet(t, "the first snapshot", func() string { return "boot plain" })

	rmCatalog(t, path)
	set.WaitForSet(t, "the re-created file's rows", func() string { return "boot" })
	testkit.WaitUntil(t, "the file to exist again", func() bool { _, err := os.Stat(path); return err == nil })
	b := openFile(t, path) // another process, in effect
	if _, err := b.Get(tctx(t), "boot"); err != nil {
		t.Fatalf("the bootstrap did not register again in the new file: %v", err)
	}
	oneReopenWarning(t, log)
	// Writes of both handles meet in the new file.
	mustRegister(t, b, sample("later"))
	set.WaitForSet(t, "a write of the other handle", func() string { return "boot later" })
}

// A handle without watchers runs no ticker for the identity check: its own
// operations run it. A bootstrap's heartbeats notice the deleted file,
// reopen the path and register again in the new file.
func TestFileDeletedUnderAHandleWithoutWatchers(t *testing.T) {
	a, path, log := bootedHandle(t)
	rmCatalog(t, path)
	testkit.WaitUntil(t, "the file to exist again", func() bool { _, err := os.Stat(path); return err == nil })
	b := openFile(t, path) // another process, in effect
	testkit.WaitUntil(t, "the bootstrap's registration in the new file", func() bool {
		_, err := b.Get(tctx(t), "boot")
		return err == nil
	})
	oneReopenWarning(t, log)
	a.mu.Lock()
	ticker := a.fileTicker
	a.mu.Unlock()
	if ticker != nil {
		t.Fatal("a handle without watchers runs the identity check on a ticker")
	}
}

// A file replaced by a backup taken earlier (moved into place) is reopened
// too: watchers end with exactly the backup's rows plus the bootstraps that
// registered again.
func TestFileReplacedByBackup(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.db")
	a := openFile(t, path)
	mustRegister(t, a, sample("old"))
	backup := filepath.Join(t.TempDir(), "backup.db")
	if err := a.Backup(tctx(t), backup); err != nil {
		t.Fatal(err)
	}
	if err := a.Backup(tctx(t), backup); !errors.Is(err, os.ErrExist) {
		t.Fatalf("backup over an existing file: %v", err)
	}
	if err := a.Deregister(tctx(t), "old"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"new-1", "new-2", "new-3"} {
		mustRegister(t, a, sample(id))
	}
	in := sample("boot")
	in.TTL = 2 * time.Second
	reg, err := switchboard.Bootstrap(tctx(t), a, in, switchboard.BootstrapOptions{HeartbeatInterval: 200 * time.Millisecond, Logger: quiet.Logger})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	w, err := a.Watch(tctx(t), switchboard.Query{All: true})
	if err != nil {
		t.Fatal(err)
	}
	set := testkit.NewWatchSet(w)
	set.WaitForSet(t, "the first snapshot", func() string { return "boot new-1 new-2 new-3" })

	// The restore procedure of the README: a copy next to the catalog,
	// renamed over it.
	testkit.RestoreSQLite(t, backup, path)
	set.WaitForSet(t, "the backup's rows and the bootstrap", func() string { return "boot old" })
	b := openFile(t, path)
	ins, err := b.List(tctx(t), switchboard.Query{All: true})
	if err != nil || testkit.JoinIDs(ins) != "boot old" {
		t.Fatalf("restored catalog lists %q, %v", testkit.JoinIDs(ins), err)
	}
}

func TestBackupIsConsistentAndNewEpoch(t *testing.T) {
	a, _ := newFile(t)
	for _, id := range []string{"a", "b", "c"} {
		mustRegister(t, a, sample(id))
	}
	dst := filepath.Join(t.TempDir(), "copy.db")
	if err := a.Backup(context.Background(), dst); err != nil {
		t.Fatal(err)
	}
	if m, _ := filepath.Glob(dst + ".partial-*"); len(m) != 0 {
		t.Fatalf("partial files left: %v", m)
	}
	b := openFile(t, dst)
	ins, err := b.List(tctx(t), switchboard.Query{All: true})
	if err != nil || testkit.JoinIDs(ins) != "a b c" {
		t.Fatalf("backup lists %q, %v", testkit.JoinIDs(ins), err)
	}
	if ea, eb := epochOf(t, a), epochOf(t, b); ea == eb || eb == "" {
		t.Fatalf("backup epoch %q, source %q: want a new one", eb, ea)
	}
}

func epochOf(t *testing.T, c *Catalog) string {
	t.Helper()
	var e string
	if err := c.read(tctx(t), func(tx *txn) error { return tx.QueryRowContext(tctx(t), epochSQL).Scan(&e) }); err != nil {
		t.Fatal(err)
	}
	return e
}

func slogTo(w *testkit.SyncBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// When a handle lets go of a deleted file, SQLite must not delete, by
// name, the -wal and -shm files that now belong to the new file at the same
// path: another process's commits still in that WAL would vanish.
func TestReopenKeepsTheNewFilesWAL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.db")
	a := openFile(t, path)
	a.checksFile = false // reopened by hand below
	mustRegister(t, a, sample("old"))
	if _, err := a.List(tctx(t), switchboard.Query{}); err != nil {
		t.Fatal(err)
	}
	rmCatalog(t, path)
	b := openFile(t, path) // the new file, written by "another process"
	b.checksFile = false
	for _, id := range []string{"n1", "n2", "n3"} {
		mustRegister(t, b, sample(id))
	}
	if err := a.reopen(tctx(t)); err != nil { // closes a's connections to the old file
		t.Fatal(err)
	}
	c := openFile(t, path) // a third process, opened afterwards
	ins, err := c.List(tctx(t), switchboard.Query{All: true})
	if err != nil || testkit.JoinIDs(ins) != "n1 n2 n3" {
		t.Fatalf("a process opened after the reopen sees %q, %v; want n1 n2 n3", testkit.JoinIDs(ins), err)
	}
	ins, err = a.List(tctx(t), switchboard.Query{All: true})
	if err != nil || testkit.JoinIDs(ins) != "n1 n2 n3" {
		t.Fatalf("the reopened handle sees %q, %v", testkit.JoinIDs(ins), err)
	}
}
