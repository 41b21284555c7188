package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/testkit"
	"github.com/switchboard-io/switchboard/postgres/pgtest"
)

// withPassword returns a PostgreSQL DSN of this machine's server (trust
// authentication: any password is accepted) carrying the password s3cr3t.
func withPassword(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dsn, drop, err := pgtest.NewDatabase(ctx)
	if err != nil {
		t.Fatalf("PostgreSQL (start it with .ci/run or pg_ctlcluster): %v", err)
	}
	t.Cleanup(drop)
	user, rest, ok := strings.Cut(strings.TrimPrefix(dsn, "postgres://"), "@")
	if !ok {
		t.Fatalf("unexpected test DSN %q", dsn)
	}
	return "postgres://" + strings.SplitN(user, ":", 2)[0] + ":s3cr3t@" + rest
}

// A PostgreSQL DSN's password appears in no error and no log line of the
// CLI.
func TestCLIRedactsPasswords(t *testing.T) {
	dsn := withPassword(t)
	unreachable := "postgres://postgres:s3cr3t@127.0.0.1:1/test?connect_timeout=2"
	for _, args := range [][]string{
		{"deregister", "--dsn", dsn, "nope"},
		{"ls", "--dsn", unreachable, "--log-level", "debug"},
		{"ls", "--dsn", "postgres://postgres:s3cr3t@:5432/test"},
		{"ls", "--dsn", dsn + "&pool_max_conns=x"},
	} {
		code, stdout, stderr := cli(t, args...)
		if code == 0 {
			t.Errorf("%v: exit 0", args)
		}
		if strings.Contains(stdout+stderr, "s3cr3t") {
			t.Errorf("%v: the password is shown:\n%s%s", args, stdout, stderr)
		}
	}
}

// Read-only commands on a catalog that does not exist exit 1 saying so and
// create nothing: no directory, no file, no schema.
func TestReadCommandsNeverCreateACatalog(t *testing.T) {
	commands := [][]string{{"ls"}, {"ls", "--all", "-o", "json"}, {"leases"}, {"deregister", "some-id"}, {"reap"}}
	t.Run("sqlite", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "typo", "path", "x.db")
		for _, args := range append(commands, []string{"backup", filepath.Join(dir, "copy.db")}) {
			code, stdout, stderr := cli(t, append(args, "--dsn", "sqlite://"+path)...)
			want := "switchboard: no catalog at " + path + " (nothing has registered there yet)\n"
			if code != 1 || stderr != want || stdout != "" {
				t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 1 and %q", args, code, stdout, stderr, want)
			}
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Fatalf("files created: %v", entries)
		}
	})
	t.Run("postgres", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		dsn, drop, err := pgtest.NewDatabase(ctx)
		if err != nil {
			t.Fatalf("PostgreSQL: %v", err)
		}
		t.Cleanup(drop)
		for _, args := range commands {
			code, _, stderr := cli(t, append(args, "--dsn", dsn)...)
			if code != 1 || !strings.Contains(stderr, "no catalog in 127.0.0.1:5432/") || !strings.Contains(stderr, "(nothing has registered there yet)") {
				t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
			}
		}
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var tables int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()`).Scan(&tables); err != nil || tables != 0 {
			t.Fatalf("tables created: %d, %v", tables, err)
		}
	})
}

// Read commands against an unreachable PostgreSQL say they cannot reach
// the catalog, not that a migration failed.
func TestReadCommandsUnreachablePostgres(t *testing.T) {
	dsn := "postgres://postgres@127.0.0.1:1/test?connect_timeout=2"
	for _, args := range [][]string{{"ls"}, {"leases"}, {"deregister", "x"}, {"reap"}} {
		code, _, stderr := cli(t, append(args, "--dsn", dsn)...)
		if code != 1 || !strings.Contains(stderr, "cannot reach the catalog at 127.0.0.1:1/test") || strings.Contains(stderr, "migrate") {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
	}
}

// Input over the limits exits 2 and stores nothing.
func TestCLILimitsExitTwo(t *testing.T) {
	dsn, _ := dsnIn(t)
	base := []string{"register", "--dsn", dsn, "--name", "svc", "--type", "writer", "--address", "127.0.0.1:1"}
	caps := []string{}
	for i := range switchboard.MaxCapabilities + 1 {
		caps = append(caps, "--capability", fmt.Sprintf("c%d", i))
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{append(append([]string{}, base...), "--ttl", "2h"), "max_ttl"},
		{append(append([]string{}, base...), caps...), "capabilities: 65 given; at most 64"},
	} {
		code, _, stderr := cli(t, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("exit %d, stderr %q; want exit 2 naming %q", code, stderr, tc.want)
		}
	}
	code, stdout, _ := cli(t, "ls", "--dsn", dsn, "-o", "json")
	if code == 0 && strings.TrimSpace(stdout) != "[]" {
		t.Fatalf("rejected registrations were stored: %s", stdout)
	}
}

// watchSet follows a `switchboard watch -o json` process: the set of ids
// its events leave it believing in.
type watchSet struct {
	mu  sync.Mutex
	ids map[string]bool
}

func followWatch(t *testing.T, p *proc) *watchSet {
	w := &watchSet{ids: map[string]bool{}}
	go func() {
		for l := range p.lines {
			var ev struct {
				Event    string `json:"event"`
				Instance struct {
					ID string `json:"id"`
				} `json:"instance"`
			}
			if json.Unmarshal([]byte(l), &ev) != nil {
				continue
			}
			w.mu.Lock()
			switch ev.Event {
			case "added", "updated":
				w.ids[ev.Instance.ID] = true
			case "removed":
				delete(w.ids, ev.Instance.ID)
			}
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *watchSet) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for id := range w.ids {
		out = append(out, id)
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// liveIDs lists the catalog's active ids with a CLI run ("" when there is
// no catalog at the path right now).
func liveIDs(t *testing.T, dsn string) string {
	code, stdout, stderr := cli(t, "ls", "--dsn", dsn, "-o", "json")
	if code != 0 {
		if strings.Contains(stderr, "no catalog at") {
			return ""
		}
		t.Fatalf("ls: exit %d: %s", code, stderr)
	}
	var ins []struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(stdout), &ins); err != nil {
		t.Fatalf("ls -o json: %v: %s", err, stdout)
	}
	var out []string
	for _, in := range ins {
		out = append(out, in.ID)
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// The catalog file deleted under a running register and a running watch,
// then replaced by a backup taken earlier: each time the registration is
// back and the watcher ends with exactly the live set.
func TestCatalogFileDeletedAndRestoredUnderRunningProcesses(t *testing.T) {
	dsn, path := dsnIn(t)
	reg := start(t, "register", "--dsn", dsn, "--id", "svc-1", "--name", "svc", "--type", "writer",
		"--address", "127.0.0.1:4317", "--ttl", "2s", "--heartbeat", "500ms")
	reg.line(t) // registered: the stored instance as JSON
	watch := start(t, "watch", "--dsn", dsn, "-o", "json")
	set := followWatch(t, watch)
	testkit.WaitUntil(t, "the watcher to see the registration", func() bool { return set.String() == "svc-1" })

	// A row nobody heartbeats, so that deleting the file visibly drops it.
	cat := openCatalog(t, dsn)
	if _, err := cat.Register(context.Background(), switchboard.Instance{ID: "plain", Name: "plain", Type: "writer",
		Address: "127.0.0.1:1", TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "the watcher to see the plain row", func() bool { return set.String() == "plain svc-1" })
	backup := filepath.Join(t.TempDir(), "backup.db")
	if code, _, stderr := cli(t, "backup", "--dsn", dsn, backup); code != 0 {
		t.Fatalf("backup: exit %d: %s", code, stderr)
	}
	cat.Close()

	matches, _ := filepath.Glob(path + "*")
	for _, m := range matches {
		os.Remove(m)
	}
	waitLive(t, "the registration back in a new file, the watcher exactly on it", dsn, set, "svc-1", reg, watch)
	// Logged before the registration came back; stderr is read by a
	// goroutine of the test's own.
	testkit.WaitUntil(t, "register's warning", func() bool {
		return strings.Contains(reg.stderr.String(), "while open; opening the path again")
	})

	// Restore the backup (it holds plain and svc-1) as docs/operations.md says.
	testkit.RestoreSQLite(t, backup, path)
	waitLive(t, "the watcher exactly on the restored catalog", dsn, set, "plain svc-1", reg, watch)

	// Both processes still work on the file at the path.
	reg.cmd.Process.Signal(os.Interrupt)
	if err := reg.wait(t); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Logf("register exit: %v", err)
	}
	waitLive(t, "the deregistration to reach the watcher", dsn, set, "plain", reg, watch)
}

// waitLive waits until the catalog lists exactly want and the watcher
// believes in exactly the same.
func waitLive(t *testing.T, what, dsn string, set *watchSet, want string, procs ...*proc) {
	t.Helper()
	var live, seen string
	defer func() {
		if t.Failed() {
			t.Logf("catalog %q, watcher %q, want %q", live, seen, want)
			for _, p := range procs {
				t.Logf("%v stderr:\n%s", p.cmd.Args[1], p.stderr)
			}
		}
	}()
	testkit.WaitUntil(t, what, func() bool {
		live, seen = liveIDs(t, dsn), set.String()
		return live == want && seen == want
	})
}

func TestBackupCommand(t *testing.T) {
	dsn, _ := dsnIn(t)
	cat := openCatalog(t, dsn)
	if _, err := cat.Register(context.Background(), switchboard.Instance{ID: "kept", Name: "svc", Type: "writer",
		Address: "127.0.0.1:1", TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(t.TempDir(), "copy.db")
	code, stdout, stderr := cli(t, "backup", "--dsn", dsn, copyPath)
	if code != 0 || !strings.HasPrefix(stdout, "backed up ") {
		t.Fatalf("backup: exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	if got := liveIDs(t, "sqlite://"+copyPath); got != "kept" {
		t.Fatalf("the copy lists %q", got)
	}
	if code, _, stderr := cli(t, "backup", "--dsn", dsn, copyPath); code != 1 || !strings.Contains(stderr, "already exists") {
		t.Fatalf("backup onto an existing file: exit %d stderr %q", code, stderr)
	}
	if code, _, stderr := cli(t, "backup", "--dsn", dsn); code != 2 || !strings.Contains(stderr, "missing argument") {
		t.Fatalf("backup without FILE: exit %d stderr %q", code, stderr)
	}
	pg := withPassword(t)
	openCatalog(t, pg)
	if code, _, stderr := cli(t, "backup", "--dsn", pg, filepath.Join(t.TempDir(), "x.db")); code != 2 ||
		!strings.Contains(stderr, "pg_dump") || strings.Contains(stderr, "s3cr3t") {
		t.Fatalf("backup of PostgreSQL: exit %d stderr %q", code, stderr)
	}
}
