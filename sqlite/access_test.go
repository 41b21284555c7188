//go:build unix

package sqlite

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
)

// nobody is the unprivileged user the read-only tests run as when they run
// as root (root may write any file, so permissions would prove nothing).
const nobody = 65534

// asChild runs this test binary's test name as nobody in a subprocess
// (env SWITCHBOARD_ACCESS_CHILD=1 and extra), or, when the tests do not run
// as root, in a subprocess as the current user; it returns the child's
// output and fails t if the child failed. The binary is copied where nobody
// may execute it; the test is skipped with the reason when no child can
// be started as nobody.
func asChild(t *testing.T, name string, extra ...string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^"+name+"$", "-test.v")
	cmd.Env = append(append(os.Environ(), "SWITCHBOARD_ACCESS_CHILD=1"), extra...)
	if os.Geteuid() == 0 {
		dir := openDir(t)
		copied := filepath.Join(dir, "sqlite.test")
		if err := copyFile(exe, copied); err != nil {
			t.Fatal(err)
		}
		cmd.Path, cmd.Args[0] = copied, copied
		cmd.Dir = dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		var ee *exec.ExitError
		if os.Geteuid() == 0 && !errors.As(err, &ee) {
			t.Skipf("cannot start a child as nobody (uid %d) to test permissions root would bypass: %v", nobody, err)
		}
		t.Fatalf("child %s: %v\n%s", name, err, out)
	}
	if !strings.Contains(string(out), "--- PASS: "+name) {
		t.Fatalf("child %s did not pass:\n%s", name, out)
	}
	return string(out)
}

// openDir is a temporary directory every user may enter and read (the
// path to it included), not write.
func openDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for p := dir; p != os.TempDir() && p != "/" && p != "."; p = filepath.Dir(p) {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if filepath.Dir(p) == os.TempDir() {
			break
		}
	}
	return dir
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}

// listTree lists dir's entries.
func listTree(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func openAs(ctx context.Context, path string, mustExist bool) (*Catalog, error) {
	return Open(ctx, switchboard.DSN{Scheme: "sqlite", Path: path, Raw: "sqlite://" + path},
		switchboard.Options{MustExist: mustExist, Logger: slog.New(slog.DiscardHandler)})
}

// A catalog another user wrote, which this one may read but not write
// (file and directory read-only): read-only handles (ls, watch) list and
// watch it, creating nothing; a writer is refused with one line naming
// the file and why, and a new catalog in a directory this user cannot
// write likewise, instead of "unable to open database file (14)".
func TestReadOnlyCatalogAsAnotherUser(t *testing.T) {
	if os.Getenv("SWITCHBOARD_ACCESS_CHILD") == "1" {
		readOnlyChild(t, os.Getenv("SWITCHBOARD_ACCESS_DIR"))
		return
	}
	dir := openDir(t)
	path := filepath.Join(dir, "catalog.db")
	ctx := context.Background()
	c, err := openAs(ctx, path, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"alpha", "beta"} {
		if _, err := c.Register(ctx, switchboard.Instance{ID: name + "-1", Name: name, Type: "t", Address: "127.0.0.1:1", TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	// While the writer runs (its -wal and -shm files there), the other
	// user may write neither the files nor the directory.
	t.Run("writer running", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("the catalog's files belong to this user: run as root to test another user's")
		}
		t.Logf("as uid %d:\n%s", nobody, asChild(t, "TestReadOnlyCatalogAsAnotherUser", "SWITCHBOARD_ACCESS_DIR="+dir))
	})
	// Once it has stopped, the files and the directory read-only.
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for _, e := range listTree(t, dir) {
		if err := os.Chmod(filepath.Join(dir, e), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o755) })
	before := strings.Join(listTree(t, dir), " ")
	if os.Geteuid() != 0 {
		readOnlyChild(t, dir)
	} else {
		t.Logf("as uid %d:\n%s", nobody, asChild(t, t.Name(), "SWITCHBOARD_ACCESS_DIR="+dir))
	}
	if after := strings.Join(listTree(t, dir), " "); after != before {
		t.Fatalf("files before %q, after %q", before, after)
	}
}

// readOnlyChild is the part that runs as the user who may not write dir.
func readOnlyChild(t *testing.T, dir string) {
	path := filepath.Join(dir, "catalog.db")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := openAs(ctx, path, true)
	if err != nil {
		t.Fatalf("a read-only open of a catalog this user may only read: %v", err)
	}
	defer r.Close()
	got, err := r.List(ctx, switchboard.Query{})
	if err != nil || len(got) != 2 {
		t.Fatalf("List: %d instances, %v", len(got), err)
	}
	events, err := r.Watch(ctx, switchboard.Query{})
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	added := 0
	for ev := range events {
		if ev.Kind == switchboard.EventAdded {
			added++
		}
		if ev.Kind == switchboard.EventSynced {
			break
		}
	}
	if added != 2 {
		t.Fatalf("Watch: %d added before synced, want 2", added)
	}

	uid := fmt.Sprintf("uid %d", os.Geteuid())
	_, err = openAs(ctx, path, false)
	want := "sqlite: catalog " + path + " is not writable by this process (" + uid + "): write access " + path +
		": permission denied; commands that only read it (ls, watch) work, one that registers needs a catalog it may write (--dsn sqlite://PATH)"
	if err == nil || err.Error() != want || !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("a writer's open:\n got %v\nwant %s", err, want)
	}
	fresh := filepath.Join(dir, "new.db")
	_, err = openAs(ctx, fresh, false)
	want = "sqlite: cannot create the catalog " + fresh + ": directory " + dir + " is not writable by this process (" + uid + "): write access " + dir +
		": permission denied; choose a writable path with --dsn sqlite://PATH"
	if err == nil || err.Error() != want {
		t.Fatalf("a new catalog in a read-only directory:\n got %v\nwant %s", err, want)
	}
	if _, err := openAs(ctx, fresh, true); !errors.Is(err, switchboard.ErrNoCatalog) {
		t.Fatalf("a read-only open of a missing catalog: %v, want ErrNoCatalog", err)
	}
}
