package sqlite

import (
	"context"
	"time"
)

// checkpointEvery is how often the checkpointer looks for commits to copy
// back from the WAL into the database file. It checkpoints once this
// process has made checkpointBatch commits since its last checkpoint, or
// any commit and checkpointIdle has passed: a busy writer's WAL is copied
// back within a fraction of a second, while each of 200 processes that
// commit a heartbeat a second checkpoints every few seconds, not five
// times a second (each checkpoint syncs the database file).
const (
	checkpointEvery = 200 * time.Millisecond
	checkpointBatch = 32
	checkpointIdle  = 5 * time.Second
)

// checkpoints starts the catalog's checkpointer. SQLite's automatic
// checkpoint (every 1,000 WAL pages) runs inside the commit that crosses the
// mark, holding the write lock that every writer of the file queues for;
// registering 100,000 instances spent 15 % of its CPU there. Connections
// therefore run with wal_autocheckpoint(0), and this goroutine runs a
// PASSIVE checkpoint on a read connection after commits: it copies pages
// beside the writers, never waits for a lock, and the next writer after a
// complete one starts the WAL over from its beginning, so the WAL stays as
// small as before. A program without it (an older build, the sqlite3 shell)
// still checkpoints on its own commits.
func (c *Catalog) checkpoints() *detector {
	var seen uint64
	last := time.Now()
	return every(checkpointEvery, func(ctx context.Context) {
		if n := c.checkpoint(ctx, seen, time.Since(last) >= checkpointIdle); n != seen {
			seen, last = n, time.Now()
		}
	})
}

// checkpoint runs a PASSIVE checkpoint when this process has made
// checkpointBatch commits since seen, or any when idle is true, and returns
// the commit count it covered (seen when it did not run). A failure is
// left to the next round.
func (c *Catalog) checkpoint(ctx context.Context, seen uint64, idle bool) uint64 {
	d, done := c.use()
	defer done()
	n := d.wlock.commits.Load()
	if n == seen || n-seen < checkpointBatch && !idle {
		return seen
	}
	if _, err := d.rdb.ExecContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`); err != nil {
		return seen
	}
	c.checkpointed.Store(n)
	return n
}
