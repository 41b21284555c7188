package postgres

import (
	"testing"
	"time"

	"github.com/switchboard-io/switchboard/catalogtest"
)

// Lease rows released or expired long ago are dropped by a reap (after the
// floor of new tokens covers them); tokens never go back.
func TestOldLeasesDropped(t *testing.T) {
	c, _, _ := newCatalog(t)
	// "Long ago" is two minutes from now: a lease released now is past it
	// and past the minute deletion waits beyond it; one held an hour is not.
	c.keepLeases = -2 * time.Minute
	catalogtest.LeaseRowsDropped(t, c, func() error { _, err := c.Reap(ctxT(t), 0); return err })
}
