package sqlite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/switchboard-io/switchboard"
)

// writeLock queues writers and announces their commits. SQLite's own busy
// handler makes a blocked writer sleep (up to 100 ms a time) and retry, so
// under sustained writes from several processes one writer can miss every
// window for a long while. Writers of a file therefore first queue here: in
// this process on a one-slot semaphore, across processes on an flock of the
// sidecar file "<db>-wlock", on which the kernel wakes a waiter the moment
// the lock is released. SQLite's locking stays the authority; this only
// orders who asks, and the busy retry is still there for writers that do
// not queue (other programs).
type writeLock struct {
	sem  chan struct{}
	file *os.File // nil for an in-memory catalog
	path string
	// wait bounds how long a writer waits for its turn: a process stopped
	// (SIGSTOP) or hung while holding the lock must not stall every writer
	// of every other process forever.
	wait time.Duration
	// closeWait bounds how long close waits for a writer to finish before
	// it leaves closing the file to that writer's release.
	closeWait time.Duration
}

// lockWait is how long a writer waits for the write lock: SQLite's own busy
// timeout, which it waits on top for the database lock.
const lockWait = busyTimeout * time.Millisecond

func newWriteLock(dbPath string) (*writeLock, error) {
	l := &writeLock{sem: make(chan struct{}, 1), path: dbPath + "-wlock", wait: lockWait, closeWait: time.Second}
	if dbPath == "" {
		return l, nil
	}
	f, err := os.OpenFile(l.path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open write lock: %w", err)
	}
	l.file = f
	return l, nil
}

// lock waits for this process's turn, then for the file's; it gives up when
// ctx ends, or with switchboard.ErrBusy once it has waited l.wait. The
// returned function releases both.
func (l *writeLock) lock(ctx context.Context) (func(), error) {
	wctx, cancel := context.WithTimeoutCause(ctx, l.wait, errLockWait)
	defer cancel()
	fail := func() error {
		if ctx.Err() == nil && errors.Is(context.Cause(wctx), errLockWait) {
			return l.busy()
		}
		return ctx.Err()
	}
	select {
	case l.sem <- struct{}{}:
	case <-wctx.Done():
		return nil, fail()
	}
	release := func() { <-l.sem }
	if l.file == nil {
		return release, nil
	}
	// lockFile owns release when it fails: a flock still pending when it
	// gives up keeps this process's turn until it has been taken and
	// dropped, so it can never drop a later writer's lock on the shared
	// descriptor.
	if err := lockFile(wctx, l.file, release); err != nil {
		if wctx.Err() != nil {
			return nil, fail()
		}
		return nil, err
	}
	return func() {
		unlockFile(l.file)
		release()
	}, nil
}

var errLockWait = errors.New("write lock wait over")

func (l *writeLock) busy() error {
	return fmt.Errorf("sqlite: gave up after waiting %s for the write lock %s: another process holds it (stopped or hung?): %w",
		l.wait, l.path, switchboard.ErrBusy)
}

// announce tells watching processes that a commit just became visible: it
// writes byte 0 of the sidecar, and any write to the file wakes the
// processes watching it. (Older builds also kept commit counts for a shared
// checkpoint schedule in bytes 8–23; they are left as they are.)
func (l *writeLock) announce() {
	if l.file != nil {
		l.file.WriteAt([]byte{'!'}, 0)
	}
}

// close closes the file once no writer of this process holds or waits for
// the lock. It waits for that at most closeWait; after that the last
// holder's release closes it, so a lock held by a writer (or by a flock
// still pending for an abandoned one) is never dropped under it.
func (l *writeLock) close() error {
	if l.file == nil {
		return nil
	}
	select {
	case l.sem <- struct{}{}:
		return l.file.Close()
	case <-time.After(l.closeWait):
	}
	go func() {
		l.sem <- struct{}{}
		l.file.Close()
	}()
	return nil
}
