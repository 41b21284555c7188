package catalogtest

import (
	"testing"
	"time"
)

// LeaseRowsDropped checks, on a Leaser with a clock whose "long ago" the caller has
// set to now (a backend's own knob), that a reap drops a released lease's
// row and keeps a held one, and that a lease taken again under the
// released name starts above every token it had: fencing tokens never go
// back. reap runs the backend's reap.
func LeaseRowsDropped(t *testing.T, l clocked, reap func() error) {
	t.Helper()
	a := mustAcquire(t, l, "lock", "a", time.Minute)
	if err := l.Release(ctx(t), a); err != nil {
		t.Fatal(err)
	}
	mustAcquire(t, l, "held", "h", time.Hour)
	if err := reap(); err != nil {
		t.Fatal(err)
	}
	ls, err := l.Leases(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 1 || ls[0].Name != "held" {
		t.Fatalf("after the reap: %+v, want only the held lease", ls)
	}
	if again := mustAcquire(t, l, "lock", "z", time.Minute); again.Token <= a.Token {
		t.Fatalf("the lease taken again has token %d, not above its old %d", again.Token, a.Token)
	}
}
