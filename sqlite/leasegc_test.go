package sqlite

import (
	"testing"
	"time"

	"github.com/switchboard-io/switchboard/catalogtest"
)

// Lease rows released or expired long ago are dropped by a reap; tokens
// never go back.
func TestOldLeasesDropped(t *testing.T) {
	c, _ := newFile(t)
	// "Long ago" is a second from now: a lease released now is past it
	// (the clock has whole milliseconds: release and reap may share one),
	// one held an hour is not.
	c.keepLeases = -time.Second
	catalogtest.LeaseRowsDropped(t, c, func() error { _, err := c.Reap(tctx(t), 0); return err })
}
