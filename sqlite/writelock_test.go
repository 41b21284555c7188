//go:build unix

package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// A writer whose context ends while it waits for the file lock must not,
// once that lock arrives, drop the lock of a later writer of its process.
func TestWriteLockCancelledWaiter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	other := openWriteLock(t, path) // another process, in effect: its own descriptor
	mine := openWriteLock(t, path)

	unlockOther, err := other.lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := mine.lock(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting writer: want deadline exceeded, got %v", err)
	}
	// The abandoned flock is still pending: this process's next writer
	// waits for it instead of sharing the descriptor's lock.
	got := lockInBackground(t, mine)
	select {
	case <-got:
		t.Fatal("a second writer got the lock while the other process held it")
	case <-time.After(100 * time.Millisecond):
	}
	unlockOther()
	var unlockMine func()
	select {
	case unlockMine = <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("the waiting writer did not get the lock within 20 s of its release")
	}
	// The other process must now wait for us: our lock was not dropped by
	// the abandoned waiter.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel2()
	if _, err := other.lock(ctx2); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("other writer got the file lock while we hold it: %v", err)
	}
	unlockMine()
	unlockOther, err = other.lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	unlockOther()
}

// openWriteLock opens a write lock on the database at path, closed when t
// ends: its own descriptor, so to the file lock another process.
func openWriteLock(t *testing.T, path string) *writeLock {
	t.Helper()
	l, err := newWriteLock(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.close() })
	return l
}

// lockInBackground takes l on another goroutine and hands over its unlock
// (nil if it failed, which fails t).
func lockInBackground(t *testing.T, l *writeLock) <-chan func() {
	got := make(chan func(), 1)
	go func() {
		unlock, err := l.lock(context.Background())
		if err != nil {
			t.Error(err)
		}
		got <- unlock
	}()
	return got
}
