package sqlite

import (
	"context"
	"database/sql/driver"
	"fmt"
	"time"
)

// A checkpoint runs once checkpointBatch commits have been announced to the
// database (in the "<db>-wlock" sidecar, counted by every Switchboard writer
// of the file: see writeLock) since the last checkpoint any process ran, or
// when there are some and none has run for checkpointIdle. The schedule is
// the database's, not each process's: 200 processes that each commit a
// heartbeat a second checkpoint about once a second between them, where a
// per-process schedule had each of them checkpoint every few seconds, 40
// checkpoints a second in all. Each checkpoint syncs the database file
// (and, while connections mapped the file, the kernel walked every
// process's mapping of each page it wrote back: with 200 processes, a fifth
// of the fleet's CPU; see pragmas).
//
// The checkpointer wakes only when this process's own commit finds the
// schedule due, and checkpointIdle after a commit that did not: it does not
// poll. Polling the sidecar five times a second woke each of those 200
// processes five times a second more than its heartbeat, and on a loaded
// virtual machine every wake-up of a process costs it scheduling and Go
// runtime work (the runtime's monitor thread spins up after each).
const (
	checkpointBatch = 256
	checkpointIdle  = time.Second
)

// checkpoints starts the catalog's checkpointer. SQLite's automatic
// checkpoint (every 1,000 WAL pages) runs inside the commit that crosses the
// mark, holding the write lock that every writer of the file queues for;
// registering 100,000 instances spent 15 % of its CPU there. Connections
// therefore run with wal_autocheckpoint(0), and this goroutine runs a
// PASSIVE checkpoint on a read connection when the schedule above says so:
// it copies pages beside the writers and never waits for a lock (but see
// walRestartFrames). A program without it (an older build, the sqlite3
// shell) still checkpoints on its own commits.
func (c *Catalog) checkpoints() *detector {
	c.ckDue = make(chan struct{}, 1)
	return background(func(ctx context.Context) {
		var last uint64 // the mark as this process last saw it
		moved := time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case <-c.ckDue:
			}
			mark, pending := c.checkpoint(ctx, last, time.Since(moved) >= checkpointIdle)
			if mark != last {
				last, moved = mark, time.Now()
			}
			if pending {
				// Not due yet, or another process's checkpoint moved the
				// mark: look again once the idle time has passed.
				// (Never sooner than a fifth of it: a checkpoint that failed
				// leaves the mark where it was, and is not retried at once.)
				c.wakeIdle(max(checkpointIdle-time.Since(moved), checkpointIdle/5))
			}
		}
	})
}

// announced is called after each commit of this process with the sidecar's
// counts: it wakes the checkpointer when a checkpoint is due by count (or
// the sidecar was created over again), and otherwise makes sure it wakes
// checkpointIdle later.
func (c *Catalog) announced(commits, mark uint64) {
	if c.ckDue == nil {
		return
	}
	if commits < mark || commits-mark >= checkpointBatch {
		c.wakeCheckpointer()
		return
	}
	c.wakeIdle(checkpointIdle)
}

// wakeIdle wakes the checkpointer after d, unless a wake-up is pending.
func (c *Catalog) wakeIdle(d time.Duration) {
	if c.ckArmed.CompareAndSwap(false, true) {
		time.AfterFunc(d, func() {
			c.ckArmed.Store(false)
			c.wakeCheckpointer()
		})
	}
}

func (c *Catalog) wakeCheckpointer() {
	select {
	case c.ckDue <- struct{}{}:
	default:
	}
}

// checkpoint runs a PASSIVE checkpoint when checkpointBatch commits have
// been announced since the last checkpoint's mark, or any when idle is
// true (and the mark is still last, the one idle was timed from). It
// returns the mark after it, and whether commits it did not cover remain
// (as far as it read the counts). A failure is left to the next round.
func (c *Catalog) checkpoint(ctx context.Context, last uint64, idle bool) (mark uint64, pending bool) {
	d, done := c.use()
	defer done()
	commits, mark := d.wlock.counts()
	switch {
	case commits == mark:
		return mark, false
	case commits > mark && commits-mark < checkpointBatch && !(idle && mark == last):
		// Not due yet. (A count below the mark is a sidecar created over
		// again: due at once.)
		return mark, true
	}
	var busy, frames, copied int64
	if err := d.rdb.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &copied); err != nil {
		return mark, true
	}
	if frames >= walRestartFrames {
		restartWAL(ctx, d)
	}
	d.wlock.checkpointed(commits)
	c.checkpointed.Store(commits)
	return commits, false
}

// walRestartFrames is the WAL length (in 4 KiB frames: 16 MiB) past which a
// checkpoint also makes sure the WAL starts over. A PASSIVE checkpoint
// copies what it can, and the next writer starts the WAL from its beginning
// only if no reader still reads from it. Under steady traffic from many
// processes (200 fleet processes on a loaded machine) some reader always
// does, so the WAL never started over: it grew by 48 MB a second, every
// frame a new block the kernel zeroed, until heartbeats missed their
// deadlines (checkpoint starvation, as SQLite's documentation calls it).
// A variable so that tests can lower it.
var walRestartFrames int64 = 4096

// restartWalWait bounds how long restartWAL's checkpoint waits for readers
// to leave the WAL, while Switchboard writers of every process queue behind
// it. A reader that stays longer (a large snapshot streamed to a slow
// watcher) makes it give up until the next round instead of stalling them.
const restartWalWait = 100 * time.Millisecond

// restartWAL runs a RESTART checkpoint while holding the write lock, so
// that Switchboard writers wait their turn in the kernel instead of in
// SQLite's busy handler: it copies every frame back, waits (at most
// restartWalWait) until every reader reads from the database file alone,
// and so lets the next writer start the WAL over. The WAL file keeps its
// length up to journalSizeLimit (see pragmas), so its blocks are written
// again rather than allocated again. A failure is left to the next round.
func restartWAL(ctx context.Context, d *dbs) {
	unlock, err := d.wlock.lock(ctx)
	if err != nil {
		return
	}
	defer unlock()
	conn, err := d.rdb.Conn(ctx)
	if err != nil {
		return
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", restartWalWait.Milliseconds())); err != nil {
		return
	}
	_, _ = conn.ExecContext(ctx, `PRAGMA wal_checkpoint(RESTART)`)
	// The connection goes back to the pool: with SQLite's own busy timeout.
	if _, err := conn.ExecContext(context.WithoutCancel(ctx), fmt.Sprintf("PRAGMA busy_timeout = %d", busyTimeout)); err != nil {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	}
}
