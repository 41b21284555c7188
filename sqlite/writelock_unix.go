//go:build unix

package sqlite

import (
	"context"
	"errors"
	"os"
	"syscall"
	"time"
)

// starveAfter is how long a writer waits for the flock before it marks
// itself starving and later writers give way to it (see way).
const starveAfter = 200 * time.Millisecond

// lockFile takes an exclusive flock on f, blocking in the kernel until it is
// free or ctx ends, after giving way on w to writers of other processes
// that have starved (see way). On failure it calls release, at once or, for
// a flock still pending when ctx ended, once that flock has been taken and
// dropped.
func lockFile(ctx context.Context, f *os.File, w *way, release func()) error {
	fd := int(f.Fd())
	if w.giveWay(ctx, fd) {
		return nil
	}
	if err := ctx.Err(); err != nil {
		release()
		return err
	}
	err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB)
	if err == nil {
		return nil
	}
	if !errors.Is(err, syscall.EWOULDBLOCK) {
		release()
		return err
	}
	done := make(chan error, 1)
	go func() { done <- flockRetry(fd) }()
	starve := time.NewTimer(starveAfter)
	defer starve.Stop()
	marked := false
	for {
		select {
		case err := <-done:
			if marked {
				unmark(fd)
			}
			if err != nil {
				release()
			}
			return err
		case <-starve.C:
			if marked = markStarving(fd); !marked {
				starve.Reset(time.Millisecond)
			}
		case <-ctx.Done():
			if marked {
				unmark(fd)
			}
			go func() {
				if <-done == nil {
					syscall.Flock(fd, syscall.LOCK_UN)
				}
				release()
			}()
			return ctx.Err()
		}
	}
}

func flockRetry(fd int) error {
	return retryEINTR(func() error { return syscall.Flock(fd, syscall.LOCK_EX) })
}

// retryEINTR calls f again while a signal interrupts it.
func retryEINTR(f func() error) error {
	for {
		if err := f(); !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

func unlockFile(f *os.File) { syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }
