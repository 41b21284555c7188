package sqlite

import (
	"context"
	"fmt"
	"os"
	"time"
)

// writeLock queues writers and announces their commits. SQLite's own busy handler makes a blocked writer
// sleep (up to 100 ms a time) and retry, so under sustained writes from
// several processes one writer can miss every window and starve for
// seconds. Writers of a file therefore first queue here: in this process on
// a one-slot semaphore, across processes on an flock of the sidecar file
// "<db>-wlock", on which the kernel wakes a waiter the moment the lock is
// released. SQLite's locking stays the authority; this only orders who
// asks, and the busy retry is still there for writers that do not queue
// (other programs, older versions).
type writeLock struct {
	sem  chan struct{}
	file *os.File // nil for an in-memory catalog
}

func newWriteLock(dbPath string) (*writeLock, error) {
	l := &writeLock{sem: make(chan struct{}, 1)}
	if dbPath == "" {
		return l, nil
	}
	f, err := os.OpenFile(dbPath+"-wlock", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open write lock: %w", err)
	}
	l.file = f
	return l, nil
}

// lock waits for this process's turn, then for the file's; it gives up when
// ctx ends. The returned function releases both.
func (l *writeLock) lock(ctx context.Context) (func(), error) {
	select {
	case l.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	release := func() { <-l.sem }
	if l.file == nil {
		return release, nil
	}
	// lockFile owns release when it fails: a flock still pending when ctx
	// ends keeps this process's turn until it has been taken and dropped,
	// so it can never drop a later writer's lock on the shared descriptor.
	if err := lockFile(ctx, l.file, release); err != nil {
		return nil, err
	}
	return func() {
		unlockFile(l.file)
		release()
	}, nil
}

// announce tells watching processes that a commit just became visible.
func (l *writeLock) announce() {
	if l.file != nil {
		l.file.WriteAt([]byte{'!'}, 0)
	}
}

// close waits (a bounded time) for a flock abandoned by a cancelled writer,
// then closes the file.
func (l *writeLock) close() error {
	if l.file == nil {
		return nil
	}
	select {
	case l.sem <- struct{}{}:
	case <-time.After(5 * time.Second):
	}
	return l.file.Close()
}
