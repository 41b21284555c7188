//go:build !linux

package sqlite

import "context"

// Without open-file-description locks (or, off unix, without the flock),
// writers take the lock as it comes: nothing gives way, nothing is marked
// (see writelock_linux.go for what Linux adds).

type way struct{}

func openWay(string) *way { return nil }

func (*way) giveWay(context.Context, int) bool { return false }

func (*way) close() {}

func markStarving(int) bool { return true }

func unmark(int) {}
