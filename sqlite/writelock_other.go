//go:build !unix

package sqlite

import (
	"context"
	"os"
)

// Without flock, writers of other processes are ordered by SQLite's busy
// handler alone.
func lockFile(context.Context, *os.File, func()) error { return nil }

func unlockFile(*os.File) {}
