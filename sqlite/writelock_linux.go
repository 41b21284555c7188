//go:build linux

package sqlite

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"time"

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
// i.e. until no one is marked (or it finds the flock free: giveWayProbe) —
// before it asks for the flock. The writers already waiting for the flock
// are all that is left to take it, so a starving writer gets it after at
// most one turn of each of them; it then drops its mark, and once the last
// mark is gone the writers that gave way are woken together (shared locks
// do not exclude each other) and go on.
//
// The byte locks are open-file-description locks (F_OFD_SETLK): owned by
// the descriptor, like the flock, so each process's handle is its own
// owner (two descriptors: the flock's, which marks, and the way's, which
// gives way), and the kernel drops them with a dead process's descriptors.
// They only order who asks: the flock (and SQLite's locking below it)
// still excludes. A file system that refuses them leaves the flock as it
// is.

// The sidecar's range whose bytes mark starving writers, one byte each
// (picked at random: two starving writers on one byte only delay the
// second's mark). It lies far past the sidecar's data, which locks do not
// touch.
const (
	starveBase  = 1 << 20
	starveSlots = 1 << 12
)

// giveWayProbe is how often a writer that gives way tries the flock
// itself: a marked writer whose process is stopped (SIGSTOP, a debugger)
// keeps its mark but takes nothing, and must not hold back every other
// writer until they give up. A flock found free while someone is marked
// means the marked writers are not taking it (a woken one takes it within
// microseconds of its release), so the writer that found it free keeps it.
const giveWayProbe = 100 * time.Millisecond

// way is a descriptor of the sidecar of its own on which a writer gives
// way: a lock owner apart from the writer's flock and mark, so that a wait
// left pending (ctx ended, or the flock found free) takes its shared lock
// and drops it whenever it comes, without touching a later writer's mark.
type way struct {
	f       *os.File
	pending sync.WaitGroup // the wait left pending, which close waits for
	// cur is closed when the wait under way on f ends; nil when none is.
	// Only the writer holding its process's turn reads or sets it, and a
	// later writer joins a wait still pending instead of starting another:
	// while a stopped process keeps its mark, one wait stays pending, not
	// one per write.
	cur chan struct{}
}

// openWay opens the writers' way on the sidecar at path (nil when byte
// locks are not to be had: the flock alone orders writers).
func openWay(path string) *way {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil
	}
	return &way{f: f}
}

// giveWay returns once no writer of another process is marked starving,
// or when ctx ends; or it finds the flock on flockFD free meanwhile (see
// giveWayProbe), takes it and returns true.
func (w *way) giveWay(ctx context.Context, flockFD int) (locked bool) {
	if w == nil {
		return false
	}
	if w.cur != nil {
		select {
		case <-w.cur:
			w.cur = nil // the last writer's wait has ended
		default:
		}
	}
	if w.cur == nil {
		// One look, not a lock taken and dropped: every write passes here.
		lk := rangeLock(unix.F_RDLCK)
		if err := unix.FcntlFlock(w.f.Fd(), unix.F_OFD_GETLK, &lk); err != nil {
			return false // no byte locks here: the flock alone orders writers
		}
		if lk.Type == unix.F_UNLCK {
			return false // no one is marked
		}
		w.cur = w.wait()
	}
	probe := time.NewTicker(giveWayProbe)
	defer probe.Stop()
	for {
		select {
		case <-w.cur:
			w.cur = nil
			return false
		case <-ctx.Done():
			return false
		case <-probe.C:
			if ctx.Err() != nil {
				return false
			}
			if unix.Flock(flockFD, unix.LOCK_EX|unix.LOCK_NB) == nil {
				return true
			}
		}
	}
}

// wait starts waiting for a shared lock on the range, to drop it as soon
// as it is had; the channel it returns is closed then.
func (w *way) wait() chan struct{} {
	done := make(chan struct{})
	w.pending.Add(1)
	go func() {
		defer w.pending.Done()
		defer close(done)
		lk := rangeLock(unix.F_RDLCK)
		if retryEINTR(func() error { return unix.FcntlFlock(w.f.Fd(), unix.F_OFD_SETLKW, &lk) }) == nil {
			w.drop()
		}
	}()
	return done
}

// drop drops the way's shared lock.
func (w *way) drop() {
	lk := rangeLock(unix.F_UNLCK)
	unix.FcntlFlock(w.f.Fd(), unix.F_OFD_SETLK, &lk)
}

// close closes the way's descriptor once no wait on it is pending (a
// pending one ends when the last mark is dropped, or with the marking
// process).
func (w *way) close() {
	if w == nil {
		return
	}
	go func() {
		w.pending.Wait()
		w.f.Close()
	}()
}

// markStarving marks the writer of descriptor fd (its flock's) as
// starving. It returns false when it cannot yet (a writer giving way holds
// the range for a moment: try again shortly), true once marked or when
// byte locks are not to be had here at all.
func markStarving(fd int) bool {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart, Start: starveBase + rand.Int64N(starveSlots), Len: 1}
	err := unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, &lk)
	return !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EACCES)
}

// unmark drops the mark of the writer of descriptor fd.
func unmark(fd int) {
	lk := rangeLock(unix.F_UNLCK)
	unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, &lk)
}

func rangeLock(typ int16) unix.Flock_t {
	return unix.Flock_t{Type: typ, Whence: io.SeekStart, Start: starveBase, Len: starveSlots}
}
