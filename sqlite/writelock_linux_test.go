//go:build linux

package sqlite

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// starving reports whether a writer of the lock file at path is marked
// starving, as a writer of another process would see it.
func starving(t *testing.T, path string) bool {
	t.Helper()
	f, err := os.OpenFile(path+"-wlock", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lk := rangeLock(unix.F_RDLCK)
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_GETLK, &lk); err != nil {
		t.Fatal(err)
	}
	return lk.Type != unix.F_UNLCK
}

// markAsAnotherProcess marks a writer of the lock file at path starving,
// as a writer of another process would (a descriptor of its own, closed
// when t ends), and returns that descriptor and the mark's lock.
func markAsAnotherProcess(t *testing.T, path string) (*os.File, unix.Flock_t) {
	t.Helper()
	f, err := os.OpenFile(path+"-wlock", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	mark := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart, Start: starveBase + 7, Len: 1}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &mark); err != nil {
		t.Fatal(err)
	}
	return f, mark
}

// While a writer of another process is marked starving, a writer that
// comes to the lock gives way, even with the flock free (until it first
// looks at the flock, giveWayProbe), and goes on once the mark is gone; one
// that gives up meanwhile leaves its wait pending on its way's descriptor,
// which holds back no later writer of its process.
func TestWriteLockGivesWayToStarvingWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	l := openWriteLock(t, path)
	other, mark := markAsAnotherProcess(t, path)
	ctx, cancel := context.WithTimeout(context.Background(), giveWayProbe/2)
	defer cancel()
	if unlock, err := l.lock(ctx); !errors.Is(err, context.DeadlineExceeded) {
		if err == nil {
			unlock()
		}
		t.Fatalf("a writer took the lock while another was marked starving: got %v, want it to wait", err)
	}
	mark.Type = unix.F_UNLCK
	if err := unix.FcntlFlock(other.Fd(), unix.F_OFD_SETLK, &mark); err != nil {
		t.Fatal(err)
	}
	unlock, err := l.lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	unlock()
}

// A mark whose writer takes nothing (its process stopped, say) holds a
// writer back only until that writer finds the flock free.
func TestWriteLockGoesAheadOfAMarkThatTakesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	l := openWriteLock(t, path)
	other, _ := markAsAnotherProcess(t, path) // a stopped writer's mark
	unlock, err := l.lock(context.Background())
	if err != nil {
		t.Fatalf("a writer held back by a mark that takes nothing: %v", err)
	}
	// The flock is this writer's: another descriptor cannot take it.
	if unix.Flock(int(other.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil {
		t.Fatal("the writer returned without the flock")
	}
	unlock()
	if !starving(t, path) {
		t.Fatal("the mark is gone: the test did not hold it")
	}
	// It gave way first (and went ahead only from its look at the flock):
	// its wait for the mark to go is still pending. The next writer joins
	// that wait instead of starting one of its own: one pending wait while
	// the mark stays, not one a write.
	pending := l.way.cur
	if pending == nil {
		t.Fatal("the writer went ahead without giving way: no wait pending while the mark stays")
	}
	unlock, err = l.lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	unlock()
	if l.way.cur != pending {
		t.Fatal("a second writer started a wait of its own while the first was pending")
	}
}

// A writer that waits starveAfter for the flock marks itself starving, and
// drops the mark once it has the lock.
func TestWriteLockStarvingWriterMarksItself(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	holder, waiter := openWriteLock(t, path), openWriteLock(t, path)
	unlockHolder, err := holder.lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := lockInBackground(t, waiter)
	for !starving(t, path) {
		select {
		case unlock := <-got:
			if unlock != nil {
				t.Fatal("the waiting writer got the lock while another held it")
			}
			t.Fatal("the waiting writer gave up without marking itself starving")
		case <-time.After(time.Millisecond):
		}
	}
	unlockHolder()
	unlock := <-got
	if unlock == nil {
		return
	}
	if starving(t, path) {
		t.Error("the writer that got the lock is still marked starving")
	}
	unlock()
}

// A writer that gives up while marked starving drops its mark as it
// returns, so that later writers do not wait for a writer that left.
func TestWriteLockGivingUpDropsStarvingMark(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	holder, quitter, later := openWriteLock(t, path), openWriteLock(t, path), openWriteLock(t, path)
	unlockHolder, err := holder.lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan error, 1)
	go func() {
		_, err := quitter.lock(ctx)
		got <- err
	}()
	for !starving(t, path) {
		select {
		case err := <-got:
			t.Fatalf("the waiting writer returned before marking itself starving: %v", err)
		case <-time.After(time.Millisecond):
		}
	}
	cancel()
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Fatalf("the waiting writer: want context canceled, got %v", err)
	}
	if starving(t, path) {
		t.Fatal("the writer that gave up is still marked starving")
	}
	unlockHolder()
	unlockLater, err := later.lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	unlockLater()
}
