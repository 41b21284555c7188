//go:build unix

package sqlite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
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

// BenchmarkWriteLockWait measures how long writers wait for the write lock
// when many processes queue on it at once: each of n writeLocks on one
// file (its own descriptor, so to flock another process) takes the lock,
// holds it for a commit's length and takes it again, as a fleet's
// processes do while they register together. It reports the wait's p50,
// p99 and maximum over every acquisition in a 5-second window. The flock
// alone is not a fair queue (a writer that asks the moment it changes
// hands goes ahead of those already waiting), so the oldest waiters
// starved for seconds while the median was microseconds; on Linux a writer
// that has waited starveAfter now has the others give way to it, which
// bounds the maximum (writelock_linux.go). A wait that reaches
// the lock's own bound (5 s) gives up with ErrBusy, as a writer would, and
// is counted as gave-up rather than timed.
func BenchmarkWriteLockWait(b *testing.B) {
	for _, n := range []int{12, 200} {
		b.Run(fmt.Sprintf("writers=%d", n), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "x.db")
			locks := make([]*writeLock, n)
			for i := range locks {
				l, err := newWriteLock(path)
				if err != nil {
					b.Fatal(err)
				}
				defer l.close()
				locks[i] = l
			}
			const hold, window = 500 * time.Microsecond, 5 * time.Second
			var (
				mu    sync.Mutex
				waits []time.Duration
				busy  int // waits that gave up (the lock's own bound)
				wg    sync.WaitGroup
			)
			for b.Loop() {
				end := time.Now().Add(window)
				for _, l := range locks {
					wg.Go(func() {
						var mine []time.Duration
						gaveUp := 0
						for time.Now().Before(end) {
							start := time.Now()
							unlock, err := l.lock(context.Background())
							if errors.Is(err, switchboard.ErrBusy) {
								gaveUp++
								continue
							}
							if err != nil {
								b.Error(err)
								return
							}
							mine = append(mine, time.Since(start))
							for t := time.Now(); time.Since(t) < hold; {
							}
							unlock()
						}
						mu.Lock()
						waits = append(waits, mine...)
						busy += gaveUp
						mu.Unlock()
					})
				}
				wg.Wait()
			}
			if len(waits) == 0 {
				b.Fatalf("no writer got the lock (%d gave up)", busy)
			}
			slices.Sort(waits)
			at := func(q float64) float64 {
				return float64(waits[int(q*float64(len(waits)-1))].Microseconds()) / 1000
			}
			b.ReportMetric(at(0.50), "wait-p50-ms")
			b.ReportMetric(at(0.99), "wait-p99-ms")
			b.ReportMetric(at(1), "wait-max-ms")
			b.ReportMetric(float64(len(waits))/(float64(b.N)*window.Seconds()), "locks/s")
			b.ReportMetric(float64(busy), "gave-up")
		})
	}
}
