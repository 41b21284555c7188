//go:build unix

package embedded

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockDir takes an exclusive lock on dir for the broker's life: two
// brokers writing one JetStream store would corrupt it. The lock is a flock
// on a file in dir, so it ends with the process however it ends.
func lockDir(dir string) (release func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("embedded nats: data dir lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("embedded nats: data dir %s is in use by another broker (two brokers must not share a JetStream store)", dir)
		}
		return nil, fmt.Errorf("embedded nats: data dir lock: %w", err)
	}
	return func() { f.Close() }, nil
}
