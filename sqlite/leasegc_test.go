package sqlite

import (
	"testing"

	"github.com/switchboard-io/switchboard/catalogtest"
)

// Lease rows released or expired long ago are dropped by a reap; tokens
// never go back.
func TestOldLeasesDropped(t *testing.T) {
	c, _ := newFile(t)
	c.keepLeases = 0 // "long ago" is now
	catalogtest.LeaseRowsDropped(t, c, func() error { _, err := c.Reap(tctx(t), 0); return err })
}
