//go:build unix && !linux

package sqlite

import "context"

// Without open-file-description locks, writers take the flock as it comes
// (see writelock_linux.go for what Linux adds).

type way struct{}

func openWay(string) *way { return nil }

func (*way) giveWay(context.Context, int) bool { return false }

func (*way) close() {}

func markStarving(int) bool { return true }

func unmark(int) {}
