package sqlite

import (
	"fmt"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

// A catalog re-created in place whose sequence passes a watcher's cursor is
// another history: the watcher must end with exactly the new catalog's
// rows, not apply the new log's tail on top of the old rows (issue 7 item 6).
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
