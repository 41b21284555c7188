//go:build unix

package sqlite

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// canWrite reports why this process may not write path (nil: it may), as
// the kernel decides for its effective user (faccessat with AT_EACCESS):
// permission bits, a read-only mount.
func canWrite(path string) error {
	if err := unix.Faccessat(unix.AT_FDCWD, path, unix.W_OK, unix.AT_EACCESS); err != nil {
		return &os.PathError{Op: "write access", Path: path, Err: err}
	}
	return nil
}

// who names the process's effective user for messages: "uid 65534".
func who() string { return fmt.Sprintf("uid %d", os.Geteuid()) }
