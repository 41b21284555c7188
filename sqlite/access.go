package sqlite

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// notWritable explains why a writer cannot use the catalog file path (the
// file, or the directory SQLite creates its -wal, -shm and the -wlock
// sidecar in), before SQLite would say only "unable to open database file
// (14)"; nil when nothing stands in the way that the process can see.
func notWritable(path string) error {
	dir := filepath.Dir(path)
	_, statErr := os.Stat(path)
	exists := statErr == nil
	if exists {
		if err := canWrite(path); err != nil {
			return fmt.Errorf("sqlite: catalog %s is not writable by this process (%s): %w; commands that only read it (ls, watch) work, "+
				"one that registers needs a catalog it may write (--dsn sqlite://PATH)", path, who(), err)
		}
	}
	// SQLite creates the sidecars beside the file: the directory must be
	// writable unless they are all there (and then writable themselves).
	needDir := !exists
	for _, side := range []string{"-wal", "-shm", "-wlock"} {
		if _, err := os.Stat(path + side); err != nil {
			needDir = true
		} else if err := canWrite(path + side); err != nil {
			return fmt.Errorf("sqlite: %s%s beside the catalog is not writable by this process (%s): %w", path, side, who(), err)
		}
	}
	if needDir {
		if err := canWrite(dir); err != nil {
			what := "create the catalog " + path
			if exists {
				what = "write the catalog " + path + " (SQLite creates its -wal and -shm files beside it)"
			}
			return fmt.Errorf("sqlite: cannot %s: directory %s is not writable by this process (%s): %w; choose a writable path with --dsn sqlite://PATH",
				what, dir, who(), err)
		}
	}
	return nil
}

// cannotWrite reports whether err is the system refusing a write: no
// permission, or a read-only file system.
func cannotWrite(err error) bool {
	return errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS)
}

// readOnlySnapshot reports whether a handle that only reads the catalog
// file path must read it immutable: SQLite reads a WAL database through
// its -shm file, which is there while a writer has the database open (and
// removed when the last one closes it); when it is not there and this
// process may not create it, SQLite could not open the file at all.
func readOnlySnapshot(path string) bool {
	if _, err := os.Stat(path + "-shm"); err == nil {
		return false
	}
	return canWrite(filepath.Dir(path)) != nil
}

// readOnlyLock is the write lock of a handle that only reads (MustExist)
// a catalog whose sidecar it may not write (another user's catalog, a
// read-only copy): it has no file, and the handle never takes it.
func readOnlyLock(dbPath string) *writeLock {
	return &writeLock{sem: make(chan struct{}, 1), path: dbPath + "-wlock", wait: lockWait, closeWait: time.Second}
}
