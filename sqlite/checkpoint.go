package sqlite

import (
	"context"
	"time"
)

// checkpointEvery is how often each process's checkpointer looks at the
// database's commit counts (in the "<db>-wlock" sidecar, counted by every
// Switchboard writer of the file: see writeLock). A checkpoint runs once
// checkpointBatch commits have been announced since the last checkpoint
// any process ran, or when there are some and none has run for
// checkpointIdle. The schedule is the database's, not each process's: 200
// processes that each commit a heartbeat a second checkpoint about once a
// second between them, where a per-process schedule had each of them
// checkpoint every few seconds, 40 checkpoints a second in all. Each
// checkpoint syncs the database file (and, while connections mapped the
// file, the kernel walked every process's mapping of each page it wrote
// back: with 200 processes, a fifth of the fleet's CPU; see pragmas).
const (
	checkpointEvery = 200 * time.Millisecond
	checkpointBatch = 256
	checkpointIdle  = time.Second
)

// checkpoints starts the catalog's checkpointer. SQLite's automatic
// checkpoint (every 1,000 WAL pages) runs inside the commit that crosses the
// mark, holding the write lock that every writer of the file queues for;
// registering 100,000 instances spent 15 % of its CPU there. Connections
// therefore run with wal_autocheckpoint(0), and this goroutine runs a
// PASSIVE checkpoint on a read connection when the schedule above says so:
// it copies pages beside the writers, never waits for a lock, and the next
// writer after a complete one starts the WAL over from its beginning, so
// the WAL stays small. A program without it (an older build, the sqlite3
// shell) still checkpoints on its own commits.
func (c *Catalog) checkpoints() *detector {
	var last uint64 // the mark as this process last saw it
	moved := time.Now()
	return every(checkpointEvery, func(ctx context.Context) {
		if mark := c.checkpoint(ctx, last, time.Since(moved) >= checkpointIdle); mark != last {
			last, moved = mark, time.Now()
		}
	})
}

// checkpoint runs a PASSIVE checkpoint when checkpointBatch commits have
// been announced since the last checkpoint's mark, or any when idle is
// true (and the mark is still last, the one idle was timed from), and
// returns the mark after it. A failure is left to the next round.
func (c *Catalog) checkpoint(ctx context.Context, last uint64, idle bool) uint64 {
	d, done := c.use()
	defer done()
	commits, mark := d.wlock.counts()
	switch {
	case commits == mark:
		return mark
	case commits > mark && commits-mark < checkpointBatch && !(idle && mark == last):
		// Not due yet. (A count below the mark is a sidecar created over
		// again: due at once.)
		return mark
	}
	if _, err := d.rdb.ExecContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`); err != nil {
		return mark
	}
	d.wlock.checkpointed(commits)
	c.checkpointed.Store(commits)
	return commits
}
