package sqlite

import (
	"context"
	"encoding/binary"
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

// The sidecar file's layout. Byte 0 is the announcement: any write to the
// file wakes the processes watching it. Bytes 8–15 count the commits every
// Switchboard writer of the database has announced, bytes 16–23 the count
// the last checkpoint covered, whichever process ran it (little-endian;
// see checkpoint.go): the checkpointers of many processes share one
// schedule instead of each checkpointing after its own commits. A short
// file (an older build writes byte 0 only) counts from zero.
const (
	sidecarCommits = 8
	sidecarMark    = 16
	sidecarSize    = 24
)

// announce tells watching processes that a commit just became visible and
// counts it in the sidecar. It runs while this writer holds the file's
// lock, so no other Switchboard writer's count is lost. It returns the
// counts after it, as counts does.
func (l *writeLock) announce() (commits, mark uint64) {
	if l.file == nil {
		return 0, 0
	}
	var b [sidecarSize]byte
	commits, mark = l.load(&b)
	commits++
	b[0] = '!'
	binary.LittleEndian.PutUint64(b[sidecarCommits:], commits)
	l.file.WriteAt(b[:sidecarMark], 0)
	return commits, mark
}

// counts returns the commits announced to the database and the count the
// last checkpoint covered (none for an in-memory catalog, which has no
// sidecar and no checkpointer).
func (l *writeLock) counts() (commits, mark uint64) {
	if l.file == nil {
		return 0, 0
	}
	var b [sidecarSize]byte
	return l.load(&b)
}

// load reads the sidecar into b and returns its counts: zero for what a
// short file lacks (b is cleared when even the commit count is missing).
func (l *writeLock) load(b *[sidecarSize]byte) (commits, mark uint64) {
	n, _ := l.file.ReadAt(b[:], 0)
	if n < sidecarMark {
		clear(b[:])
		return 0, 0
	}
	commits = binary.LittleEndian.Uint64(b[sidecarCommits:])
	if n >= sidecarSize {
		mark = binary.LittleEndian.Uint64(b[sidecarMark:])
	}
	return commits, mark
}

// checkpointed records that a checkpoint covered the first n commits. It
// does not take the lock: the mark is a schedule, not a guarantee, and a
// lost or stale one only makes a checkpoint run early or late. Being a
// write to the sidecar, it also wakes the watching processes, whose read
// of the log then finds nothing new (at most once a checkpoint).
func (l *writeLock) checkpointed(n uint64) {
	if l.file == nil {
		return
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], n)
	l.file.WriteAt(b[:], sidecarMark)
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
