package sqlite

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/hub"
)

// maxGroup bounds the operations one group commit runs in its transaction.
const maxGroup = 128

// groupOp is one Register, Heartbeat or Deregister waiting for, or taking
// part in, a group commit.
type groupOp struct {
	ctx context.Context
	run opFunc
	// Set under writeQueue.mu.
	state opState
	// err is the op's result, written by the leader before it sets the
	// state to opDone.
	err error
	// wake is signalled (capacity 1) when the op is done or made leader.
	wake chan struct{}
	// Used by the leader only.
	changes []hub.Change
}

// opFunc does one operation's statements in the group's transaction. now is
// the transaction's catalog clock (µs); ctx is the group's context, which
// no single caller can cancel (an interrupted statement would roll back the
// whole transaction). It returns the change-log entries it wrote and that
// watchers should be handed, in order.
type opFunc func(ctx context.Context, tx *txn, now int64) ([]hub.Change, error)

type opState uint8

const (
	opQueued  opState = iota // waiting in writeQueue.pending
	opLeading                // told to lead the next group (still pending)
	opClaimed                // taken into a running group
	opDone                   // err is final
)

// writeQueue coalesces the concurrent writes of one catalog handle into
// group commits. Each write is queued; the first writer that finds no group
// in progress leads: it takes the process's write lock, claims every queued
// op (at most maxGroup), runs them in one BEGIN IMMEDIATE … COMMIT, each
// inside its own SAVEPOINT so a failing op is rolled back alone, hands each
// its result, and passes the lead to the first op queued meanwhile. A
// commit is the dominant cost of a small write (the WAL frames of every
// page it touched, the lock and the announcement), and a group pays it
// once.
type writeQueue struct {
	mu      sync.Mutex
	pending []*groupOp
	leading bool // an op leads (or has been told to)
	closed  bool
	// lastGroup is the size of the last group: above 1, writers of this
	// handle run concurrently, and the next leader lets them queue first.
	lastGroup atomic.Int32
}

// group runs fn as one op of a group commit and returns its result. A
// queued op whose ctx ends before its group starts is dropped, with
// ctx's error; once claimed, it waits for its group's outcome.
func (c *Catalog) group(ctx context.Context, fn opFunc) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	op := &groupOp{ctx: ctx, run: fn, wake: make(chan struct{}, 1)}
	q := &c.wq
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return switchboard.ErrClosed
	}
	q.pending = append(q.pending, op)
	if !q.leading {
		q.leading, op.state = true, opLeading
	}
	state := op.state
	q.mu.Unlock()
	done := ctx.Done()
	for {
		if state == opLeading {
			c.lead(op)
			return op.err
		}
		select {
		case <-op.wake:
		case <-done:
			done = nil
			q.mu.Lock()
			if op.state == opQueued {
				q.remove(op)
				op.state = opDone
				op.err = ctx.Err()
			}
			q.mu.Unlock()
		}
		q.mu.Lock()
		state = op.state
		q.mu.Unlock()
		if state == opDone {
			return op.err
		}
	}
}

// gather lets the goroutines that are runnable (writers just handed their
// results) queue their next op before the leader claims the queue: yielding
// while the queue grows, a few times at most. It runs before the write lock
// is taken: a yield while holding it would stall the writers of every other
// handle and process.
func gather(q *writeQueue) {
	q.mu.Lock()
	n := len(q.pending)
	q.mu.Unlock()
	for range 4 {
		runtime.Gosched()
		q.mu.Lock()
		m := len(q.pending)
		q.mu.Unlock()
		if m == n || m >= maxGroup {
			return
		}
		n = m
	}
}

// remove takes op out of pending; q.mu held.
func (q *writeQueue) remove(op *groupOp) {
	for i, p := range q.pending {
		if p == op {
			q.pending = append(q.pending[:i], q.pending[i+1:]...)
			return
		}
	}
}

// failPending takes every pending op out of the queue, finished with err,
// and returns them; q.mu held.
func (q *writeQueue) failPending(err error) []*groupOp {
	ops := q.pending
	q.pending = nil
	finish(ops, err)
	return ops
}

// finish sets the result of ops that left pending; q.mu held.
func finish(ops []*groupOp, err error) {
	for _, op := range ops {
		if op.state != opDone {
			op.state, op.err = opDone, err
		}
	}
}

// handOff passes the lead to the first pending op, or ends it; q.mu held.
func (q *writeQueue) handOff() {
	if len(q.pending) == 0 {
		q.leading = false
		return
	}
	next := q.pending[0]
	next.state = opLeading
	select {
	case next.wake <- struct{}{}:
	default: // a signal is pending already; next reads its state
	}
}

// wakeAll signals every op but self; its state must already be final.
func wakeAll(ops []*groupOp, self *groupOp) {
	for _, op := range ops {
		if op != self {
			select {
			case op.wake <- struct{}{}:
			default:
			}
		}
	}
}

// close makes every later write fail with ErrClosed and fails the ops
// still queued; a group already running completes (Close then waits for
// it), and an op already told to lead leads nothing but the failure.
func (q *writeQueue) close(err error) {
	q.mu.Lock()
	q.closed = true
	var failed []*groupOp
	keep := q.pending[:0]
	for _, op := range q.pending {
		if op.state == opLeading {
			keep = append(keep, op)
			continue
		}
		failed = append(failed, op)
	}
	q.pending = keep
	finish(failed, err)
	q.mu.Unlock()
	wakeAll(failed, nil)
}

// lead runs one group for self (which is pending in state opLeading): it
// takes the write lock, claims the pending ops, runs them, hands out their
// results and passes the lead on. self's result is in self.err on return.
func (c *Catalog) lead(self *groupOp) {
	q := &c.wq
	var claimed []*groupOp
	defer func() {
		q.mu.Lock()
		q.handOff()
		q.mu.Unlock()
		wakeAll(claimed, self)
	}()
	q.mu.Lock()
	if q.closed {
		claimed = q.failPending(switchboard.ErrClosed)
		q.mu.Unlock()
		return
	}
	q.mu.Unlock()

	if q.lastGroup.Load() > 1 {
		gather(q)
	}
	d, done := c.opening(self.ctx)
	defer done()
	unlock, err := d.wlock.lock(self.ctx)
	if err != nil {
		q.mu.Lock()
		if self.ctx.Err() != nil {
			// Only the leader gave up waiting: the next op leads.
			q.remove(self)
			claimed = []*groupOp{self}
			finish(claimed, err)
		} else {
			// The lock is unobtainable (another process holds it too
			// long): every op waiting now would wait as long.
			claimed = q.failPending(err)
		}
		q.mu.Unlock()
		return
	}
	q.mu.Lock()
	if q.closed {
		// Close came while this leader waited: nothing queued starts.
		claimed = q.failPending(switchboard.ErrClosed)
		q.mu.Unlock()
		unlock()
		return
	}
	n := 0
	for _, op := range q.pending {
		if n == maxGroup {
			break
		}
		n++
		if err := op.ctx.Err(); err != nil {
			op.state, op.err = opDone, err
			claimed = append(claimed, op)
			continue
		}
		op.state = opClaimed
		claimed = append(claimed, op)
	}
	q.pending = append(q.pending[:0], q.pending[n:]...)
	q.mu.Unlock()

	run := make([]*groupOp, 0, len(claimed))
	for _, op := range claimed {
		if op.state == opClaimed {
			run = append(run, op)
		}
	}
	q.lastGroup.Store(int32(len(run)))
	var (
		b        *hub.Batch
		wrote    bool
		groupErr error
	)
	if len(run) > 0 {
		b, wrote, groupErr = c.runGroup(d, run)
		if wrote {
			d.wlock.announce()
		}
	}
	unlock()
	d.wstmts.prepareWanted(context.Background())
	switch {
	case b != nil:
		c.publish(*b)
	case wrote:
		c.notify()
	}
	q.mu.Lock()
	for _, op := range run {
		if groupErr != nil && op.err == nil {
			op.err = groupErr
		}
		op.state = opDone
	}
	q.mu.Unlock()
}

// runGroup runs ops in one write transaction, retried as a whole on
// SQLITE_BUSY / SQLITE_LOCKED. An op that fails is rolled back to its
// savepoint and gets its error; the others commit. It returns the changes
// to hand to the hub (nil when none can be, or the handle has no hub),
// whether anything committed, and the error of the transaction itself
// (every op that has no error of its own gets it).
func (c *Catalog) runGroup(d *dbs, ops []*groupOp) (b *hub.Batch, wrote bool, err error) {
	ctx := context.Background()
	multi := len(ops) > 1
	err = c.retry(ctx, func() error {
		b, wrote = nil, false
		for _, op := range ops {
			op.err, op.changes = nil, nil
		}
		sqlTx, err := d.wdb.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		tx := &txn{Tx: sqlTx, sc: d.wstmts}
		now, err := c.runOps(ctx, tx, ops, multi)
		if err != nil {
			tx.Rollback()
			return err
		}
		var changes []hub.Change
		ok := 0
		for _, op := range ops {
			if op.err == nil {
				ok++
				changes = append(changes, op.changes...)
			}
		}
		if ok == 0 {
			return tx.Rollback()
		}
		var batch *hub.Batch
		// Only a handle someone watches has a hub to hand the batch to
		// (one that starts meanwhile reads the log: see notify).
		if len(changes) > 0 && c.watched() {
			batch = &hub.Batch{Changes: contiguous(changes), Now: time.UnixMicro(now).UTC()}
			batch.Seq = batch.Changes[len(batch.Changes)-1].Seq
			// The epoch of the file this transaction wrote, read in it: the
			// hub applies the batch only within its cursor's history.
			if err := tx.QueryRowContext(ctx, epochSQL).Scan(&batch.Epoch); err != nil {
				tx.Rollback()
				return err
			}
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		b, wrote = batch, true
		return nil
	})
	return b, wrote, err
}

// runOps reads the clock, runs each op of a group (in a savepoint when
// there are several) and trims the log when due. An error it returns fails
// the transaction; an op's own error is in op.err.
func (c *Catalog) runOps(ctx context.Context, tx *txn, ops []*groupOp, multi bool) (now int64, err error) {
	if now, err = clock(ctx, tx); err != nil {
		return 0, err
	}
	logged := false
	for _, op := range ops {
		if multi {
			if _, err := tx.ExecContext(ctx, `SAVEPOINT op`); err != nil {
				return 0, err
			}
		}
		changes, err := op.run(ctx, tx, now)
		if err != nil {
			if !multi || retryable(err) {
				return 0, err
			}
			// Undo this op alone; if even that fails, the transaction
			// is broken and fails as a whole.
			if _, rerr := tx.ExecContext(ctx, `ROLLBACK TO op`); rerr != nil {
				return 0, fmt.Errorf("%w (rolling back to the op's savepoint: %w)", err, rerr)
			}
			if _, rerr := tx.ExecContext(ctx, `RELEASE op`); rerr != nil {
				return 0, fmt.Errorf("%w (releasing the op's savepoint: %w)", err, rerr)
			}
			op.err = err
			continue
		}
		if multi {
			if _, err := tx.ExecContext(ctx, `RELEASE op`); err != nil {
				return 0, err
			}
		}
		op.changes = changes
		logged = logged || len(changes) > 0
	}
	if logged {
		err = c.maybeTrim(ctx, tx, now)
	}
	return now, err
}

// contiguous returns the leading run of changes whose sequence numbers
// follow each other: an entry the group logged without reporting it (the
// instances_revived trigger) would be a gap the hub must read from the log,
// and a batch the hub applies may skip nothing.
func contiguous(changes []hub.Change) []hub.Change {
	for i := 1; i < len(changes); i++ {
		if changes[i].Seq != changes[i-1].Seq+1 {
			return changes[:i]
		}
	}
	return changes
}
