package sqlite

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

// With SQLite's automatic checkpoint off, the checkpointer alone copies the
// WAL back: after each round of writes it catches up, the next writer
// starts the WAL over, and the WAL file stays the size of one round instead
// of growing with every round (without the checkpointer it grows
// threefold here, and the wait for it never ends).
func TestCheckpointerKeepsTheWALSmall(t *testing.T) {
	c, path := newFile(t)
	var first int64
	for round := range 3 {
		for i := range 1500 {
			in := switchboard.Instance{ID: fmt.Sprintf("ck-%d-%d", round, i), Name: "ck", Type: "svc",
				Address: fmt.Sprintf("10.0.%d.%d:80", i/250, i%250), Capabilities: []string{"a", fmt.Sprintf("c%d", i%50)}}
			if _, err := c.Register(tctx(t), in); err != nil {
				t.Fatal(err)
			}
		}
		testkit.WaitUntil(t, "the checkpointer to cover every commit", func() bool {
			d, done := c.use()
			defer done()
			commits, mark := d.wlock.counts()
			return commits == mark && c.checkpointed.Load() == commits
		})
		st, err := os.Stat(path + "-wal")
		if err != nil {
			t.Fatal(err)
		}
		if round == 0 {
			first = st.Size()
			continue
		}
		if st.Size() > first*3/2 {
			t.Fatalf("round %d: WAL %d bytes, %d after the first round: not started over", round, st.Size(), first)
		}
	}
}

// The commit counts are the database's, not a process's: two handles (two
// sets of connections and sidecar descriptors, as two processes have)
// count into one sidecar, and a checkpoint either of them runs moves the
// mark both schedule from. A sidecar an older build wrote (one byte)
// counts from zero.
func TestCheckpointScheduleIsTheDatabases(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.db")
	if err := os.WriteFile(path+"-wlock", []byte{'!'}, 0o644); err != nil {
		t.Fatal(err)
	}
	a, b := openFile(t, path), openFile(t, path)
	// Their own checkpointers would run on the idle rule if this test
	// were slow: the calls below are the only ones.
	a.checkpointer.stop()
	b.checkpointer.stop()
	for i := range 10 {
		for j, c := range []*Catalog{a, b} {
			mustRegister(t, c, sample(fmt.Sprintf("s-%d-%d", j, i)))
		}
	}
	counts := func(c *Catalog) (uint64, uint64) {
		d, done := c.use()
		defer done()
		return d.wlock.counts()
	}
	ca, _ := counts(a)
	cb, _ := counts(b)
	if ca < 20 || ca != cb {
		t.Fatalf("commits counted by a: %d, by b: %d; want the same count of at least 20", ca, cb)
	}
	// Below the batch and not idle: not due.
	if m := a.checkpoint(tctx(t), 0, false); m != 0 {
		t.Fatalf("a checkpoint ran %d commits in, before it was due", m)
	}
	// Idle since the mark last moved: a checkpoints, and b sees its mark.
	if m := a.checkpoint(tctx(t), 0, true); m != ca {
		t.Fatalf("idle checkpoint: mark %d, want %d", m, ca)
	}
	if _, mb := counts(b); mb != ca {
		t.Fatalf("b sees mark %d after a's checkpoint, want %d", mb, ca)
	}
	// b's checkpointer, timed from an older mark, does not run again.
	if m := b.checkpoint(tctx(t), 0, true); m != ca || b.checkpointed.Load() != 0 {
		t.Fatalf("b checkpointed again (mark %d, its own %d)", m, b.checkpointed.Load())
	}
	// The byte watchers wake on is still written.
	raw, err := os.ReadFile(path + "-wlock")
	if err != nil || len(raw) < sidecarSize || raw[0] != '!' {
		t.Fatalf("sidecar %q, %v", raw, err)
	}
}
