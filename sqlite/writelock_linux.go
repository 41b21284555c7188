//go:build linux

package sqlite

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"

	"golang.org/x/sys/unix"
)

// Linux's flock is not a fair queue: when the lock is released every
// waiter is woken to try again, and a writer that asks at that moment (the
// releasing process's next write, back to back) takes it first, so under
// sustained writes from many processes the oldest waiters can starve for
// seconds (BenchmarkWriteLockWait). Writers therefore take turns as Go's
// sync.Mutex does: the flock as it comes, until a writer has waited
// starveAfter; it then marks itself starving with an exclusive lock on a
// byte of its own in a range of the sidecar (starveSlots bytes from
// starveBase), and every writer that comes to the lock after that gives
// way — waits, asleep in the kernel, for a shared lock on the whole range,
// i.e. until no one is marked — before it asks for the flock. The writers
// already waiting for the flock are all that is left to take it, so a
// starving writer gets it after at most one turn of each of them; it then
// drops its mark, and once the last mark is gone the writers that gave way
// are woken together (shared locks do not exclude each other) and go on.
//
// The byte locks are open-file-description locks (F_OFD_SETLK): owned by
// the descriptor, like the flock, so each process's handle is its own
// owner, and the kernel drops them with a dead process's descriptors. They
// only order who asks: the flock (and SQLite's locking below it) still
// excludes. A file system that refuses them leaves the flock as it is.

// The sidecar's range whose bytes mark starving writers, one byte each
// (picked at random: two starving writers on one byte only delay the
// second's mark). It lies far past the sidecar's data, which locks do not
// touch.
const (
	starveBase  = 1 << 20
	starveSlots = 1 << 12
)

// giveWay returns once no writer of another process is marked starving, or
// when ctx ends (ctx.Err()). On that failure it owns release, as lockFile
// does: a lock on the range still pending is taken and dropped before this
// process's turn is released.
func giveWay(ctx context.Context, fd int, release func()) error {
	lk := rangeLock(unix.F_RDLCK)
	err := unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, &lk)
	if err == nil {
		unmark(fd)
		return nil
	}
	if !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EACCES) {
		return nil // no byte locks here: the flock alone orders writers
	}
	done := make(chan error, 1)
	go func() {
		lk := rangeLock(unix.F_RDLCK)
		done <- retryEINTR(func() error { return unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLKW, &lk) })
	}()
	select {
	case err := <-done:
		if err == nil {
			unmark(fd)
		}
		return nil
	case <-ctx.Done():
		go func() {
			if <-done == nil {
				unmark(fd)
			}
			release()
		}()
		return ctx.Err()
	}
}

// markStarving marks this descriptor's writer as starving. It returns
// false when it cannot yet (a writer giving way holds the byte for a
// moment: try again shortly), true once marked or when byte locks are not
// to be had here at all.
func markStarving(fd int) bool {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart, Start: starveBase + rand.Int64N(starveSlots), Len: 1}
	err := unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, &lk)
	return !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EACCES)
}

// unmark drops this descriptor's locks in the range, whichever it holds.
func unmark(fd int) {
	lk := rangeLock(unix.F_UNLCK)
	unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, &lk)
}

func rangeLock(typ int16) unix.Flock_t {
	return unix.Flock_t{Type: typ, Whence: io.SeekStart, Start: starveBase, Len: starveSlots}
}

func retryEINTR(f func() error) error {
	for {
		if err := f(); !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}
