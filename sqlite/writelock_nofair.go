//go:build unix && !linux

package sqlite

import "context"

// Without open-file-description locks, writers take the flock as it comes
// (see writelock_linux.go for what Linux adds).

func giveWay(context.Context, int, func()) error { return nil }

func markStarving(int) bool { return true }

func unmark(int) {}
