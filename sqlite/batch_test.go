package sqlite

import (
	"fmt"
	"testing"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/hub"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

// A hub far behind reads the log in batches of changesBatch, not the whole
// backlog in one read transaction, and still catches up to the exact
// state.
func TestChangesSinceBatches(t *testing.T) {
	c, _ := newFile(t)
	w, err := c.Watch(tctx(t), switchboard.Query{})
	if err != nil {
		t.Fatal(err)
	}
	set := testkit.NewWatchSet(w)
	testkit.WaitUntil(t, "the first snapshot", set.Synced)
	const n = 2*changesBatch + 7
	err = c.write(tctx(t), func(tx *txn) error {
		if _, err := tx.ExecContext(tctx(t), `WITH RECURSIVE x(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM x WHERE i < ?)
			INSERT INTO instances (id, name, type, address, ttl_ms, registered_at, last_seen)
			SELECT printf('i%05d', i), 'svc', 'writer', '127.0.0.1:1', 3600000, `+nowSQL+`, `+nowSQL+` FROM x`, n); err != nil {
			return err
		}
		_, err := tx.ExecContext(tctx(t), `INSERT INTO changes (id, op, reason, at) SELECT id, 'upsert', '', last_seen FROM instances ORDER BY id`)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := source{c}.ChangesSince(tctx(t), hub.Cursor{})
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Changes) != changesBatch || b.Seq != b.Changes[len(b.Changes)-1].Seq {
		t.Fatalf("one read returned %d changes up to %d, want a batch of %d", len(b.Changes), b.Seq, changesBatch)
	}
	want := make([]switchboard.Instance, n)
	for i := range want {
		want[i].ID = fmt.Sprintf("i%05d", i+1)
	}
	set.WaitForSet(t, "every inserted instance", func() string { return testkit.JoinIDs(want) })
}
