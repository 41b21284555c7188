//go:build unix

package sqlite

import (
	"context"
	"errors"
	"os"
	"syscall"
)

// lockFile takes an exclusive flock on f, blocking in the kernel until it is
// free or ctx ends. On failure it calls release, at once or, for a flock
// still pending when ctx ended, once that flock has been taken and dropped.
func lockFile(ctx context.Context, f *os.File, release func()) error {
	if err := ctx.Err(); err != nil {
		release()
		return err
	}
	fd := int(f.Fd())
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
	select {
	case err := <-done:
		if err != nil {
			release()
		}
		return err
	case <-ctx.Done():
		go func() {
			if <-done == nil {
				syscall.Flock(fd, syscall.LOCK_UN)
			}
			release()
		}()
		return ctx.Err()
	}
}

func flockRetry(fd int) error {
	for {
		if err := syscall.Flock(fd, syscall.LOCK_EX); !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

func unlockFile(f *os.File) { syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }
