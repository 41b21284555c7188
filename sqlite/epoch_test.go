package sqlite

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

// A catalog re-created in place whose sequence passes a watcher's cursor is
// another history: the watcher must end with exactly the new catalog's
// rows, not apply the new log's tail on top of the old rows.
func TestEpochRecreatedCatalog(t *testing.T) {
	path := t.TempDir() + "/catalog.db"
	a := openPolling(t, path, time.Hour) // only the change log can bring the watcher there
	for i := range 5 {
		mustRegister(t, a, sample(fmt.Sprintf("old-%d", i)))
	}
	w, err := a.Watch(tctx(t), switchboard.Query{})
	if err != nil {
		t.Fatal(err)
	}
	set := testkit.NewWatchSet(w)
	set.WaitForSet(t, "the first snapshot", func() string { return "old-0 old-1 old-2 old-3 old-4" })

	// A fresh catalog elsewhere, whose log runs past the watcher's cursor.
	other := t.TempDir() + "/other.db"
	b := openPolling(t, other, time.Hour)
	for i := range 8 {
		mustRegister(t, b, sample(fmt.Sprintf("new-%d", i)))
	}
	b.Close()
	// Its contents replace the watched catalog's in one transaction (a
	// restore in place), so the watcher never sees a half-way state.
	raw := rawDB(t, path, "_pragma=busy_timeout(5000)")
	raw.SetMaxOpenConns(1)
	script := []string{`ATTACH DATABASE '` + other + `' AS n`, `BEGIN IMMEDIATE`}
	for _, table := range []string{"instance_capabilities", "instances", "changes", "leases", "meta", "schema_migrations"} {
		script = append(script, `DELETE FROM main.`+table, `INSERT INTO main.`+table+` SELECT * FROM n.`+table)
	}
	script = append(script, `UPDATE main.sqlite_sequence SET seq = (SELECT seq FROM n.sqlite_sequence WHERE name = 'changes') WHERE name = 'changes'`, `COMMIT`)
	for _, stmt := range script {
		if _, err := raw.Exec(stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	set.WaitForSet(t, "the re-created catalog's rows", func() string {
		ins, err := a.List(tctx(t), switchboard.Query{})
		if err != nil {
			t.Fatal(err)
		}
		return testkit.JoinIDs(ins)
	})
}

// The same backup restored twice keeps the copy's epoch, and writes after
// the second restore can carry its log past a watcher's cursor: the
// watcher must notice that the entry it read last is not in the log any
// more (another history) and end with exactly the catalog's rows, with the
// periodic resync off.
func TestSameBackupRestoredTwice(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/catalog.db"
	a := openPolling(t, path, time.Hour) // only the change log can bring the watcher there
	for i := range 3 {
		mustRegister(t, a, sample(fmt.Sprintf("base-%d", i)))
	}
	backup := dir + "/backup.db"
	if err := a.Backup(tctx(t), backup); err != nil {
		t.Fatal(err)
	}
	w, err := a.Watch(tctx(t), switchboard.Query{})
	if err != nil {
		t.Fatal(err)
	}
	set := testkit.NewWatchSet(w)
	list := func() string {
		ins, err := a.List(tctx(t), switchboard.Query{})
		if err != nil {
			t.Fatal(err)
		}
		return testkit.JoinIDs(ins)
	}
	set.WaitForSet(t, "the first snapshot", list)

	raw := rawDB(t, path, "_pragma=busy_timeout(5000)&_pragma=foreign_keys(1)")
	raw.SetMaxOpenConns(1)
	// restore copies the backup over the catalog in one transaction, then
	// registers the given ids with plain SQL in the same transaction, each
	// with its change-log entry (a writer after the restore).
	restore := func(ids ...string) {
		t.Helper()
		script := []string{`ATTACH DATABASE '` + backup + `' AS b`, `BEGIN IMMEDIATE`}
		for _, table := range []string{"instance_capabilities", "instances", "changes", "leases", "meta", "schema_migrations"} {
			script = append(script, `DELETE FROM main.`+table, `INSERT INTO main.`+table+` SELECT * FROM b.`+table)
		}
		script = append(script, `UPDATE main.sqlite_sequence SET seq = (SELECT seq FROM b.sqlite_sequence WHERE name = 'changes') WHERE name = 'changes'`)
		for _, id := range ids {
			script = append(script,
				`INSERT INTO instances (id, name, type, address, ttl_ms, registered_at, last_seen)
					VALUES ('`+id+`', '`+id+`', 'writer', '127.0.0.1:1', 3600000, `+nowSQL+`, `+nowSQL+`)`,
				`INSERT INTO changes (id, op, at) VALUES ('`+id+`', 'upsert', `+nowSQL+`)`)
		}
		script = append(script, `COMMIT`, `DETACH DATABASE b`)
		for _, stmt := range script {
			if _, err := raw.Exec(stmt); err != nil {
				t.Fatalf("%s: %v", stmt, err)
			}
		}
	}
	restore()
	set.WaitForSet(t, "the first restore", list)
	for i := range 4 {
		mustRegister(t, a, sample(fmt.Sprintf("between-%d", i)))
	}
	set.WaitForSet(t, "registrations after the first restore", list)
	// The second restore, and more writes than the first one's: the log
	// runs past the watcher's cursor under the same epoch.
	restore("after-0", "after-1", "after-2", "after-3", "after-4", "after-5")
	set.WaitForSet(t, "exactly the catalog's rows after the second restore", list)
}

// A watch position names the entry its watcher read last: resumed against
// a log that holds another entry at that seq under the same epoch (the
// file's history replaced in place, as a restore does), WatchFrom answers
// ErrPositionGone instead of replaying another history's tail as if it
// followed.
func TestWatchFromAnotherHistory(t *testing.T) {
	path := t.TempDir() + "/catalog.db"
	c := openPolling(t, path, time.Hour)
	for i := range 3 {
		mustRegister(t, c, sample(fmt.Sprintf("old-%d", i)))
	}
	ctx, cancel := context.WithTimeout(tctx(t), 20*time.Second)
	defer cancel()
	ch, err := c.Watch(ctx, switchboard.Query{})
	if err != nil {
		t.Fatal(err)
	}
	pos := ""
	for ev := range ch {
		if ev.Kind == switchboard.EventSynced {
			pos = ev.Position
			break
		}
	}
	if !strings.Contains(pos, "#") {
		t.Fatalf("position %q names no entry", pos)
	}
	if _, err := c.WatchFrom(ctx, switchboard.Query{}, pos); err != nil {
		t.Fatalf("resume on the same history: %v", err)
	}
	// The same seqs, other entries, the same epoch.
	raw := rawDB(t, path, "_pragma=busy_timeout(5000)&_pragma=foreign_keys(1)")
	raw.SetMaxOpenConns(1)
	script := []string{`BEGIN IMMEDIATE`, `DELETE FROM instances`, `DELETE FROM changes`}
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("'new-%d'", i)
		script = append(script,
			`INSERT INTO instances (id, name, type, address, ttl_ms, registered_at, last_seen)
				VALUES (`+id+`, `+id+`, 'writer', '127.0.0.1:1', 3600000, `+nowSQL+`, `+nowSQL+`)`,
			fmt.Sprintf(`INSERT INTO changes (seq, id, op, at) VALUES (%d, %s, 'upsert', %s)`, i, id, nowSQL))
	}
	script = append(script, `COMMIT`)
	for _, stmt := range script {
		if _, err := raw.Exec(stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	if _, err := c.WatchFrom(ctx, switchboard.Query{}, pos); !errors.Is(err, switchboard.ErrPositionGone) {
		t.Fatalf("resume on another history under the same epoch: %v, want ErrPositionGone", err)
	}
}
