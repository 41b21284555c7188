package postgres

import (
	"fmt"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/testkit"
	"github.com/switchboard-io/switchboard/postgres/pgtest"
)

// A catalog whose contents are replaced by another catalog's (a restore in
// place) is another history even where its sequence passes a watcher's
// cursor: the watcher must end with exactly the new rows, not apply the new
// log's tail on top of the old rows.
func TestEpochRestoredCatalog(t *testing.T) {
	a, conn, _ := newCatalog(t)
	for range 5 {
		in := inst("svc", "127.0.0.1:1", "c")
		in.TTL = time.Hour // nothing expires during the test
		if _, err := a.Register(ctxT(t), in); err != nil {
			t.Fatal(err)
		}
	}
	w, err := a.Watch(ctxT(t), switchboard.Query{})
	if err != nil {
		t.Fatal(err)
	}
	set := testkit.NewWatchSet(w)
	set.WaitForSet(t, "the first snapshot", func() string {
		ins, err := a.List(ctxT(t), switchboard.Query{})
		if err != nil {
			t.Fatal(err)
		}
		return testkit.JoinIDs(ins)
	})

	// A fresh catalog in another schema, whose log runs past the cursor.
	b, bconn, _ := newCatalog(t)
	for i := range 8 {
		in := inst("svc", "127.0.0.1:2", "c")
		in.ID, in.TTL = fmt.Sprintf("new-%d", i), time.Hour
		if _, err := b.Register(ctxT(t), in); err != nil {
			t.Fatal(err)
		}
	}
	var src string
	if err := bconn.QueryRow(ctxT(t), `SELECT current_schema()`).Scan(&src); err != nil {
		t.Fatal(err)
	}
	// Its contents replace the watched catalog's in one transaction
	// (again if PostgreSQL ends it as a deadlock's victim: the catalog's
	// heartbeats lock the same tables in another order).
	pgtest.RetryDeadlock(t, "restore the catalog", func() error {
		tx, err := conn.Begin(ctxT(t))
		if err != nil {
			return err
		}
		defer tx.Rollback(ctxT(t))
		for _, stmt := range []string{
			`TRUNCATE instances, changes, change_log, leases`,
			`INSERT INTO instances SELECT * FROM ` + src + `.instances`,
			`INSERT INTO changes SELECT * FROM ` + src + `.changes`,
			`INSERT INTO change_log SELECT * FROM ` + src + `.change_log`,
			`SELECT setval('changes_seq_seq', (SELECT last_value FROM ` + src + `.changes_seq_seq))`,
			`SELECT pg_notify('` + Channel + `', '')`,
		} {
			if _, err := tx.Exec(ctxT(t), stmt); err != nil {
				return fmt.Errorf("%s: %w", stmt, err)
			}
		}
		return tx.Commit(ctxT(t))
	})
	start := time.Now()
	set.WaitForSet(t, "the restored catalog's rows", func() string {
		ins, err := a.List(ctxT(t), switchboard.Query{})
		if err != nil {
			t.Fatal(err)
		}
		if got := testkit.JoinIDs(ins); got != "new-0 new-1 new-2 new-3 new-4 new-5 new-6 new-7" {
			t.Fatalf("restored catalog lists %q", got)
		}
		return testkit.JoinIDs(ins)
	})
	t.Logf("watcher exact after %v", time.Since(start))
}
