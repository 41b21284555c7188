package sqlite

import (
	"testing"
	"time"
)

// Lease rows released or expired long ago are dropped by a reap, and a
// lease taken again under the same name starts above every token it had:
// fencing tokens never go back.
func TestOldLeasesDropped(t *testing.T) {
	c, _ := newFile(t)
	c.keepLeases = 0 // "long ago" is now
	ctx := tctx(t)
	a, err := c.Acquire(ctx, "lock", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Acquire(ctx, "lock", "a", time.Minute) // a renewal: same token
	if err != nil || b.Token != a.Token {
		t.Fatalf("renewal: %+v, %v", b, err)
	}
	if err := c.Release(ctx, b); err != nil {
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
