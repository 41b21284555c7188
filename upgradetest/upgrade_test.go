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

// Old server with new clients, and new server with old clients, over
// HTTP: register, ls, watch and deregister work both ways.
func TestServeMixedReleases(t *testing.T) {
	old, cur := binaries(t)
	for _, c := range []struct {
		name, server, client string
		oldServer            bool
	}{
		{"old serve, new clients", old, cur, true},
		{"new serve, old clients", cur, old, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			db := "sqlite://" + filepath.Join(dir, "c.db")
			addr := freeAddr(t)
			env := []string{"SWITCHBOARD_HTTP_TOKEN=" + token}
			var regB, dereg []string
			if c.oldServer {
				start(t, "serve", c.server, env, "--dsn", db, "serve", "--listen", addr, "--token", token)
				regB = []string{"--secret", secret}
				dereg = []string{"--secret", secret}
			} else {
				tf, af := filepath.Join(dir, "token"), filepath.Join(dir, "admin")
				if err := os.WriteFile(tf, []byte(token+"\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(af, []byte(adminToken+"\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				start(t, "serve", c.server, nil, "--dsn", db, "serve", "--listen", addr, "--token-file", tf, "--admin-token-file", af)
			}
			deregEnv := env
			if !c.oldServer {
				deregEnv = []string{"SWITCHBOARD_HTTP_TOKEN=" + adminToken}
			}
			dsn := "http://" + addr
			waitFor(t, "the server to answer ls", func() bool {
				_, err := ls(t, c.client, dsn, env)
				return err == nil
			})
			watch := start(t, "watch", c.client, env, "--dsn", dsn, "watch", "--json")

			reg := start(t, "register up-a", c.client, env, registerArgs(dsn, "up-a")...)
			waitFor(t, "ls to show up-a", func() bool { return has(t, c.client, dsn, env, "up-a") })
			waitFor(t, "the watch to see up-a added", func() bool { return watch.saw(t, "added", "up-a") })

			// A row whose process is gone, deregistered by another client.
			procB := start(t, "register up-b", c.client, env, append(registerArgs(dsn, "up-b"), regB...)...)
			waitFor(t, "ls to show up-b", func() bool { return has(t, c.client, dsn, env, "up-b") })
			procB.stop(t, syscall.SIGKILL)
			if _, stderr, err := run(t, c.client, deregEnv, append([]string{"--dsn", dsn, "deregister", "up-b"}, dereg...)...); err != nil {
				t.Fatalf("deregister up-b: %v: %s", err, stderr)
			}
			if has(t, c.client, dsn, env, "up-b") {
				t.Fatal("up-b listed after its deregistration")
			}
			waitFor(t, "the watch to see up-b removed", func() bool { return watch.saw(t, "removed", "up-b") })

			// A clean stop deregisters.
			reg.stop(t, syscall.SIGTERM)
			waitFor(t, "the watch to see up-a removed", func() bool { return watch.saw(t, "removed", "up-a") })
			if has(t, c.client, dsn, env, "up-a") {
				t.Fatal("up-a listed after its process stopped")
			}
			watch.stop(t, syscall.SIGTERM)
		})
	}
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
	old, cur := binaries(t)
	t.Run("sqlite", func(t *testing.T) {
		oldRunningWhileNewMigrates(t, old, cur, "sqlite://"+filepath.Join(t.TempDir(), "c.db"))
	})
	t.Run("postgres", func(t *testing.T) {
		// A schema of its own in the test database (pgtest.EnvDSN to
		// choose another), dropped at the end.
		oldRunningWhileNewMigrates(t, old, cur, pgtest.Schema(t, pgtest.AdminDSN()))
	})
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
	seen := map[string]bool{}
	waitFor(t, "three renewals of old-a after the migration", func() bool {
		m, err := ls(t, cur, dsn, nil)
		if err != nil {
			t.Fatal(err)
		}
		in, ok := m["old-a"]
		if !ok || in.Stale {
			t.Fatalf("old-a gone or stale after the migration: %+v", m)
		}
		seen[in.LastSeen] = true
		return len(seen) >= 3
	})
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

// An instance restarted on the new binary (the old process killed, as a
// rollout replaces it, and the new one registering the same id within the
// TTL) keeps its id, and no watcher, old or new, sees it removed.
func TestRestartOnNewBinaryKeepsID(t *testing.T) {
	old, cur := binaries(t)
	dsn := "sqlite://" + filepath.Join(t.TempDir(), "c.db")
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
