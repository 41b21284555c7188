package postgres

import (
	"testing"
	"time"
)

// Lease rows released or expired long ago are dropped by a reap (after the
// floor of new tokens covers them), and a lease taken again under the
// same name starts above every token it had: fencing tokens never go back.
func TestOldLeasesDropped(t *testing.T) {
	c, _, _ := newCatalog(t)
	// "Long ago" is two minutes from now: the released lease is past it and
	// past the minute deletion waits beyond it; the held one is not.
	c.keepLeases = -2 * time.Minute
	ctx := ctxT(t)
	a, err := c.Acquire(ctx, "lock", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Release(ctx, a); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Acquire(ctx, "held", "h", time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Reap(ctx, 0); err != nil {
		t.Fatal(err)
	}
	ls, err := c.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 1 || ls[0].Name != "held" {
		t.Fatalf("after the reap: %+v, want only the held lease", ls)
	}
	again, err := c.Acquire(ctx, "lock", "z", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if again.Token <= a.Token {
		t.Fatalf("the lease taken again has token %d, not above its old %d", again.Token, a.Token)
	}
}
