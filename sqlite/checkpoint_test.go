package sqlite

import (
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

// checkpointRound registers 1,500 instances (ids prefix-0, prefix-1, …),
// one commit each, waits for c's checkpointer to cover every commit, and
// returns the length of the WAL file of path then.
func checkpointRound(t *testing.T, c *Catalog, path, prefix string) int64 {
	t.Helper()
	for i := range 1500 {
		in := switchboard.Instance{ID: fmt.Sprintf("%s-%d", prefix, i), Name: "ck", Type: "svc",
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
	return st.Size()
}

// With SQLite's automatic checkpoint off, the checkpointer alone copies the
// WAL back: after each round of writes it catches up, the next writer
// starts the WAL over, and the WAL file stays the size of one round instead
// of growing with every round (without the checkpointer it grows
// threefold here, and the wait for it never ends).
func TestCheckpointerKeepsTheWALSmall(t *testing.T) {
	c, path := newFile(t)
	var first int64
	for round := range 3 {
		size := checkpointRound(t, c, path, fmt.Sprintf("ck-%d", round))
		if round == 0 {
			first = size
			continue
		}
		if size > first*3/2 {
			t.Fatalf("round %d: WAL %d bytes, %d after the first round: not started over", round, size, first)
		}
	}
}

// Under steady writes a writer seldom finds the WAL all copied back and
// unread, the only time SQLite starts it over; under readers that never all
// leave at once (each new read transaction starts before the last one ends,
// as across a busy fleet) hardly ever. With PASSIVE checkpoints alone the
// WAL grew to 59 MB in one round here and to 120 MB in two, without starting
// over once. Once it is walRestartFrames long, the checkpointer's RESTART
// checkpoint waits for the readers there are to leave, new ones read from
// the database file, and the next writer starts the WAL over: several times
// a round.
func TestCheckpointerRestartsTheWALUnderConstantReaders(t *testing.T) {
	defer func(n int64) { walRestartFrames = n }(walRestartFrames)
	walRestartFrames = 256
	// The WAL header's checkpoint sequence number counts its restarts.
	restarts := func(path string) uint32 {
		var h [16]byte
		f, err := os.Open(path + "-wal")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := io.ReadFull(f, h[:]); err != nil {
			t.Fatal(err)
		}
		return binary.BigEndian.Uint32(h[12:])
	}
	c, path := newFile(t)
	d, done := c.use()
	dsn := d.dsn
	done()
	ctx, cancel := context.WithCancel(tctx(t))
	var readers sync.WaitGroup
	readers.Add(1)
	go func() {
		defer readers.Done()
		var dbs [2]*sql.DB
		var open [2]*sql.Tx
		for i := range dbs {
			db, err := sql.Open("sqlite", dsn)
			if err != nil {
				t.Error(err)
				return
			}
			db.SetMaxOpenConns(1)
			defer db.Close()
			dbs[i] = db
		}
		for k := 0; ctx.Err() == nil; k++ {
			i := k % 2
			tx, err := dbs[i].BeginTx(ctx, nil)
			var n int
			if err == nil {
				err = tx.QueryRowContext(ctx, `SELECT count(*) FROM instances`).Scan(&n)
			}
			if err != nil {
				if ctx.Err() == nil {
					t.Error(err)
				}
				break
			}
			if open[1-i] != nil { // the other reader leaves only now
				open[1-i].Rollback()
			}
			open[i] = tx
			time.Sleep(time.Millisecond)
		}
		for _, tx := range open {
			if tx != nil {
				tx.Rollback()
			}
		}
	}()
	defer func() { cancel(); readers.Wait() }()
	for round := range 2 {
		before := restarts(path)
		size := checkpointRound(t, c, path, fmt.Sprintf("rs-%d", round))
		n := restarts(path) - before
		t.Logf("round %d: the WAL started over %d times; %d bytes", round, n, size)
		if n < 2 {
			t.Fatalf("round %d: the WAL started over %d times in 1,500 commits under constant readers (%d bytes)", round, n, size)
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
	if m, pending := a.checkpoint(tctx(t), 0, false); m != 0 || !pending {
		t.Fatalf("a checkpoint ran %d commits in, before it was due (pending %v)", m, pending)
	}
	// Idle since the mark last moved: a checkpoints, and b sees its mark.
	if m, pending := a.checkpoint(tctx(t), 0, true); m != ca || pending {
		t.Fatalf("idle checkpoint: mark %d, want %d (pending %v)", m, ca, pending)
	}
	if _, mb := counts(b); mb != ca {
		t.Fatalf("b sees mark %d after a's checkpoint, want %d", mb, ca)
	}
	// b's checkpointer, timed from an older mark, does not run again.
	if m, _ := b.checkpoint(tctx(t), 0, true); m != ca || b.checkpointed.Load() != 0 {
		t.Fatalf("b checkpointed again (mark %d, its own %d)", m, b.checkpointed.Load())
	}
	// The byte watchers wake on is still written.
	raw, err := os.ReadFile(path + "-wlock")
	if err != nil || len(raw) < sidecarSize || raw[0] != '!' {
		t.Fatalf("sidecar %q, %v", raw, err)
	}
}
