package upgradetest

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/switchboard-io/switchboard/postgres/pgtest"
)

// token is the serve tests' API token, sent by every client
// (SWITCHBOARD_HTTP_TOKEN); adminToken is the new server's admin token,
// with which an old client (which has no --secret) deletes another
// client's row; secret is the instance secret a new client chooses
// (register --secret) and deregisters with, on either server.
const (
	token      = "upgradetest-token-0123456789abcdef"
	adminToken = "upgradetest-admin-0123456789abcdef"
	secret     = "upgradetest-secret-0123456789abcd"
)

// registerArgs are the arguments of a `register` of id with a short TTL
// and a fast heartbeat, so that a missed renewal would show within seconds.
func registerArgs(dsn, id string) []string {
	return []string{"--dsn", dsn, "register", "--name", "upg", "--type", "writer", "--address", "127.0.0.1:7001",
		"--id", id, "--ttl", "6s", "--heartbeat", "300ms", "--capability", "storage", "--meta", "k=v"}
}

func has(t *testing.T, bin, dsn string, env []string, id string) bool {
	t.Helper()
	m, err := ls(t, bin, dsn, env)
	if err != nil {
		t.Log(err)
		return false
	}
	_, ok := m[id]
	return ok
}

// clientEnv is the environment of every client of the tests' servers.
var clientEnv = []string{"SWITCHBOARD_HTTP_TOKEN=" + token}

// startServe runs bin's serve on the catalog dsn and returns its URL once
// bin's ls answers through it. The old release takes the client token by
// --token; the new one reads it, and the admin token, from files.
func startServe(t *testing.T, name, bin, dsn string) string {
	t.Helper()
	addr := freeAddr(t)
	if bin == oldBin {
		start(t, name, bin, clientEnv, "--dsn", dsn, "serve", "--listen", addr, "--token", token)
	} else {
		dir := t.TempDir()
		tf, af := filepath.Join(dir, "token"), filepath.Join(dir, "admin")
		if err := os.WriteFile(tf, []byte(token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(af, []byte(adminToken+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		start(t, name, bin, nil, "--dsn", dsn, "serve", "--listen", addr, "--token-file", tf, "--admin-token-file", af)
	}
	url := "http://" + addr
	waitFor(t, name+" to answer ls", func() bool {
		_, err := ls(t, bin, url, clientEnv)
		return err == nil
	})
	return url
}

// onBackends runs f with the old and new binaries on each of backends, in
// parallel subtests.
func onBackends(t *testing.T, f func(t *testing.T, old, cur, dsn string)) {
	old, cur := binaries(t)
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			f(t, old, cur, b.dsn(t))
		})
	}
}

// backends are the catalogs a test runs on: a SQLite file, and a schema
// of its own in the PostgreSQL test database (pgtest.EnvDSN to choose
// another), dropped at the end.
var backends = []struct {
	name string
	dsn  func(t *testing.T) string
}{
	{"sqlite", func(t *testing.T) string { return "sqlite://" + filepath.Join(t.TempDir(), "c.db") }},
	{"postgres", func(t *testing.T) string { return pgtest.Schema(t, pgtest.AdminDSN()) }},
}

// Old server with new clients, and new server with old clients, over
// HTTP, with the server on SQLite and on PostgreSQL: register, ls, watch
// and deregister work both ways.
func TestServeMixedReleases(t *testing.T) {
	old, cur := binaries(t)
	for _, b := range backends {
		for _, c := range []struct {
			name, server, client string
		}{
			{"old serve, new clients", old, cur},
			{"new serve, old clients", cur, old},
		} {
			t.Run(b.name+"/"+c.name, func(t *testing.T) {
				serveMixed(t, c.server, c.client, b.dsn(t))
			})
		}
	}
}

func serveMixed(t *testing.T, server, client, db string) {
	oldServer := server == oldBin
	dsn := startServe(t, "serve", server, db)
	var regB, dereg []string
	deregEnv := clientEnv
	if oldServer {
		regB = []string{"--secret", secret}
		dereg = []string{"--secret", secret}
	} else {
		// The old client has no --secret: the admin token deletes
		// another client's row.
		deregEnv = []string{"SWITCHBOARD_HTTP_TOKEN=" + adminToken}
	}
	watch := start(t, "watch", client, clientEnv, "--dsn", dsn, "watch", "--json")

	reg := start(t, "register up-a", client, clientEnv, registerArgs(dsn, "up-a")...)
	waitFor(t, "ls to show up-a", func() bool { return has(t, client, dsn, clientEnv, "up-a") })
	waitFor(t, "the watch to see up-a added", func() bool { return watch.saw(t, "added", "up-a") })

	// A row whose process is gone, deregistered by another client.
	procB := start(t, "register up-b", client, clientEnv, append(registerArgs(dsn, "up-b"), regB...)...)
	waitFor(t, "ls to show up-b", func() bool { return has(t, client, dsn, clientEnv, "up-b") })
	procB.stop(t, syscall.SIGKILL)
	if _, stderr, err := run(t, client, deregEnv, append([]string{"--dsn", dsn, "deregister", "up-b"}, dereg...)...); err != nil {
		t.Fatalf("deregister up-b: %v: %s", err, stderr)
	}
	if has(t, client, dsn, clientEnv, "up-b") {
		t.Fatal("up-b listed after its deregistration")
	}
	waitFor(t, "the watch to see up-b removed", func() bool { return watch.saw(t, "removed", "up-b") })

	// A clean stop deregisters.
	reg.stop(t, syscall.SIGTERM)
	waitFor(t, "the watch to see up-a removed", func() bool { return watch.saw(t, "removed", "up-a") })
	if has(t, client, dsn, clientEnv, "up-a") {
		t.Fatal("up-a listed after its process stopped")
	}
	watch.stop(t, syscall.SIGTERM)
}

// oldRefusesMigratedCatalog pins what the old release does with a catalog
// this tree migrated: 76effdb predates compat versions and refuses
// any schema newer than it knows, so a process of it started after the
// migration exits 1. When oldRelease moves to a release that reads compat
// versions, this becomes: it opens the file.
func oldRefusesMigratedCatalog(t *testing.T, old, dsn string) {
	t.Helper()
	_, stderr, err := run(t, old, nil, "--dsn", dsn, "ls")
	if err == nil || !strings.Contains(stderr, "newer than this program knows") {
		t.Fatalf("old ls on a migrated catalog: %v: %s; want the refusal of a newer schema", err, stderr)
	}
}

// Old processes already running (a registration and a watch) keep working
// on a SQLite file and on a PostgreSQL schema while the new binary
// migrates it, registers and lists; each release's watcher hears the
// other's changes.
func TestOldRunningWhileNewMigrates(t *testing.T) {
	onBackends(t, oldRunningWhileNewMigrates)
}

func oldRunningWhileNewMigrates(t *testing.T, old, cur, dsn string) {
	oldReg := start(t, "old register", old, nil, registerArgs(dsn, "old-a")...)
	waitFor(t, "old ls to show old-a", func() bool { return has(t, old, dsn, nil, "old-a") })
	oldWatch := start(t, "old watch", old, nil, "--dsn", dsn, "watch", "--json")
	waitFor(t, "the old watch to see old-a", func() bool { return oldWatch.saw(t, "added", "old-a") })

	// The new binary's ls migrates the file.
	m, err := ls(t, cur, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m["old-a"]; !ok {
		t.Fatalf("new ls after migrating: %v, want old-a", m)
	}
	oldRefusesMigratedCatalog(t, old, dsn)

	newReg := start(t, "new register", cur, nil, registerArgs(dsn, "new-b")...)
	waitFor(t, "new ls to show new-b", func() bool { return has(t, cur, dsn, nil, "new-b") })
	waitFor(t, "the old watch to see new-b", func() bool { return oldWatch.saw(t, "added", "new-b") })

	// The old registration keeps renewing its row on the migrated file.
	waitRenewed(t, cur, dsn, nil, "old-a", "after the migration")
	if oldReg.exited() || oldWatch.exited() {
		t.Fatal("an old process exited after the migration")
	}

	// Deregistrations of either release reach the old watcher.
	newReg.stop(t, syscall.SIGTERM)
	waitFor(t, "the old watch to see new-b removed", func() bool { return oldWatch.saw(t, "removed", "new-b") })
	oldReg.stop(t, syscall.SIGTERM)
	waitFor(t, "the old watch to see old-a removed", func() bool { return oldWatch.saw(t, "removed", "old-a") })
	if has(t, cur, dsn, nil, "old-a") {
		t.Fatal("old-a listed after the old process deregistered it")
	}
	oldWatch.stop(t, syscall.SIGTERM)
}

// waitRenewed waits until bin's `ls` of dsn has shown id renewed three
// times (three last_seen); it fails t if id is gone or stale meanwhile.
func waitRenewed(t *testing.T, bin, dsn string, env []string, id, how string) {
	t.Helper()
	seen := map[string]bool{}
	waitFor(t, "three renewals of "+id+" "+how, func() bool {
		m, err := ls(t, bin, dsn, env)
		if err != nil {
			t.Fatal(err)
		}
		in, ok := m[id]
		if !ok || in.Stale {
			t.Fatalf("%s gone or stale %s: %+v", id, how, m)
		}
		seen[in.LastSeen] = true
		return len(seen) >= 3
	})
}

// An instance restarted on the new binary (the old process killed, as a
// rollout replaces it, and the new one registering the same id within the
// TTL) keeps its id, and no watcher, old or new, sees it removed, on
// SQLite and on PostgreSQL.
func TestRestartOnNewBinaryKeepsID(t *testing.T) {
	onBackends(t, restartOnNewBinary)
}

func restartOnNewBinary(t *testing.T, old, cur, dsn string) {
	oldReg := start(t, "old register", old, nil, registerArgs(dsn, "keep-1")...)
	waitFor(t, "old ls to show keep-1", func() bool { return has(t, old, dsn, nil, "keep-1") })
	oldWatch := start(t, "old watch", old, nil, "--dsn", dsn, "watch", "--json")
	waitFor(t, "the old watch to see keep-1", func() bool { return oldWatch.saw(t, "added", "keep-1") })
	newWatch := start(t, "new watch", cur, nil, "--dsn", dsn, "watch", "--json")
	waitFor(t, "the new watch to see keep-1", func() bool { return newWatch.saw(t, "added", "keep-1") })

	oldReg.stop(t, syscall.SIGKILL)
	newReg := start(t, "new register", cur, nil, registerArgs(dsn, "keep-1")...)
	waitFor(t, "the new register to print its row", func() bool { return len(newReg.lines()) > 0 })
	seen := map[string]bool{}
	waitFor(t, "three renewals of keep-1 by the new process", func() bool {
		m, err := ls(t, cur, dsn, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(m) != 1 || m["keep-1"].ID != "keep-1" {
			t.Fatalf("after the restart: %+v, want keep-1 alone", m)
		}
		seen[m["keep-1"].LastSeen] = true
		return len(seen) >= 3
	})
	for _, w := range []*proc{oldWatch, newWatch} {
		if w.saw(t, "removed", "keep-1") {
			t.Fatalf("%s saw keep-1 removed across the restart: %v", w.name, w.events(t))
		}
		if w.exited() {
			t.Fatalf("%s exited", w.name)
		}
	}
	newReg.stop(t, syscall.SIGTERM)
	for _, w := range []*proc{oldWatch, newWatch} {
		waitFor(t, w.name+" to see keep-1 removed at the end", func() bool { return w.saw(t, "removed", "keep-1") })
		w.stop(t, syscall.SIGTERM)
	}
}

// An old serve and a new serve share one catalog, as while the servers
// are upgraded one at a time: the old one opens it first, the new one
// migrates it under it. Clients of either release, through either server,
// register, list and watch the same rows, and the old server's clients
// keep renewing theirs on the migrated catalog.
func TestServersMixed(t *testing.T) {
	onBackends(t, serversMixed)
}

func serversMixed(t *testing.T, old, cur, db string) {
	oldURL := startServe(t, "old serve", old, db)
	newURL := startServe(t, "new serve", cur, db)
	// Each release's watch through the other's server.
	oldWatch := start(t, "old watch", old, clientEnv, "--dsn", newURL, "watch", "--json")
	newWatch := start(t, "new watch", cur, clientEnv, "--dsn", oldURL, "watch", "--json")
	// Each release's registration through its own server; the old one's
	// TTL outlives the test, for the restart below.
	oldReg := start(t, "old register", old, clientEnv, append(registerArgs(oldURL, "srv-old"), "--ttl", "10m")...)
	newReg := start(t, "new register", cur, clientEnv, registerArgs(newURL, "srv-new")...)
	for _, id := range []string{"srv-old", "srv-new"} {
		for _, w := range []*proc{oldWatch, newWatch} {
			waitFor(t, w.name+" to see "+id, func() bool { return w.saw(t, "added", id) })
		}
		for _, bin := range []string{old, cur} {
			for _, url := range []string{oldURL, newURL} {
				if !has(t, bin, url, clientEnv, id) {
					t.Fatalf("%s ls through %s does not list %s", bin, url, id)
				}
			}
		}
	}
	// The old server's client keeps renewing its row on the migrated
	// catalog, as the new server sees it.
	waitRenewed(t, cur, newURL, clientEnv, "srv-old", "through the old server")

	// Through a server, an id's row belongs to the secret its
	// registration got, which the old release chose by the server and
	// cannot pass on: the same id registered again on the new binary, by
	// either server, is refused while the old row lives.
	oldReg.stop(t, syscall.SIGKILL)
	for _, url := range []string{oldURL, newURL} {
		_, stderr, err := run(t, cur, clientEnv, registerArgs(url, "srv-old")...)
		if err == nil || !strings.Contains(stderr, "belongs to the client that registered it") {
			t.Fatalf("new register of the live srv-old through %s: %v: %s; want the refusal of another client's id", url, err, stderr)
		}
	}

	// A clean stop, and the admin's deregistration of the old row, reach
	// both watchers; the id is then free for the new binary.
	newReg.stop(t, syscall.SIGTERM)
	adminEnv := []string{"SWITCHBOARD_HTTP_TOKEN=" + adminToken}
	if _, stderr, err := run(t, cur, adminEnv, "--dsn", newURL, "deregister", "srv-old"); err != nil {
		t.Fatalf("admin deregister of srv-old: %v: %s", err, stderr)
	}
	for _, id := range []string{"srv-old", "srv-new"} {
		for _, w := range []*proc{oldWatch, newWatch} {
			waitFor(t, w.name+" to see "+id+" removed", func() bool { return w.saw(t, "removed", id) })
		}
	}
	moved := start(t, "new register of srv-old", cur, clientEnv, registerArgs(newURL, "srv-old")...)
	for _, w := range []*proc{oldWatch, newWatch} {
		waitFor(t, w.name+" to see srv-old added again", func() bool {
			n := 0
			for _, ev := range w.events(t) {
				if ev.Event == "added" && ev.Instance.ID == "srv-old" {
					n++
				}
			}
			return n == 2
		})
	}
	moved.stop(t, syscall.SIGTERM)
	for _, w := range []*proc{oldWatch, newWatch} {
		w.stop(t, syscall.SIGTERM)
	}
}
