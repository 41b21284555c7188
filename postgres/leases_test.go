package postgres

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
)

func TestLeaseLifecycle(t *testing.T) {
	c, conn, _ := newCatalog(t)
	ctx := ctxT(t)
	const name = "compactor-lock"
	long := "pod/writer-7f9c6d7b8-x2x9q.a-very-long-namespace-name.cluster-local-identity-that-must-not-be-truncated-at-63"
	a, err := c.Acquire(ctx, name, long, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if a.Token != 1 || a.Holder != long || a.TTL != time.Minute {
		t.Fatalf("first acquire: %+v", a)
	}
	now, _ := c.Now(ctx)
	if d := a.ExpiresAt.Sub(now); d <= 0 || d > time.Minute {
		t.Fatalf("expires_at %v is not now()+ttl (now %v)", a.ExpiresAt, now)
	}
	again, err := c.Acquire(ctx, name, long, time.Minute)
	if err != nil || again.Token != 1 {
		t.Fatalf("re-acquire by holder: %+v %v", again, err)
	}
	if _, err := c.Acquire(ctx, name, "other", time.Minute); !errors.Is(err, switchboard.ErrLeaseHeld) {
		t.Fatalf("acquire of a held lease: %v, want ErrLeaseHeld", err)
	}
	r, err := c.Renew(ctx, a)
	if err != nil || r.Token != 1 || r.ExpiresAt.Before(a.ExpiresAt) {
		t.Fatalf("renew: %+v %v", r, err)
	}

	// Expiry is the database's: make it expire there.
	exec(t, conn, `UPDATE leases SET expires_at = now() - interval '1 millisecond' WHERE name = $1`, name)
	if _, err := c.Renew(ctx, a); !errors.Is(err, switchboard.ErrLeaseLost) {
		t.Fatalf("renew after expiry: %v, want ErrLeaseLost", err)
	}
	b, err := c.Acquire(ctx, name, "other", time.Minute)
	if err != nil || b.Token != 2 || b.Holder != "other" {
		t.Fatalf("acquire after expiry: %+v %v", b, err)
	}
	if _, err := c.Renew(ctx, a); !errors.Is(err, switchboard.ErrLeaseLost) {
		t.Fatalf("old holder renew: %v, want ErrLeaseLost", err)
	}
	if err := c.Release(ctx, a); !errors.Is(err, switchboard.ErrLeaseLost) {
		t.Fatalf("release by a former holder: %v, want ErrLeaseLost", err)
	}
	if l, _ := c.Leases(ctx); len(l) != 1 || l[0].Holder != "other" {
		t.Fatalf("a former holder's release took the lease: %+v", l)
	}
	if err := c.Release(ctx, b); err != nil {
		t.Fatal(err)
	}
	ls, err := c.Leases(ctx)
	if err != nil || len(ls) != 1 || ls[0].Holder != "" || ls[0].Token != 2 {
		t.Fatalf("after release: %+v %v", ls, err)
	}
	// A released lease is free at once; the token keeps growing.
	d, err := c.Acquire(ctx, name, "other", time.Minute)
	if err != nil || d.Token != 3 {
		t.Fatalf("acquire after release: %+v %v", d, err)
	}
	// The same holder after its own lease expired starts a new term.
	exec(t, conn, `UPDATE leases SET expires_at = now() - interval '1 millisecond' WHERE name = $1`, name)
	e, err := c.Acquire(ctx, name, "other", time.Minute)
	if err != nil || e.Token != 4 {
		t.Fatalf("same holder after expiry: %+v %v", e, err)
	}
	for _, bad := range []struct {
		name, holder string
		ttl          time.Duration
	}{{"", "h", time.Second}, {"n", "", time.Second}, {"n", "h", 0}} {
		if _, err := c.Acquire(ctx, bad.name, bad.holder, bad.ttl); !errors.Is(err, switchboard.ErrInvalid) {
			t.Errorf("Acquire(%q, %q, %v) = %v, want ErrInvalid", bad.name, bad.holder, bad.ttl, err)
		}
	}
}

// TestLeaseNoTwoHolders races 20 holders for a lease, round after round,
// and checks that exactly one wins each round with a token higher than the
// last.
func TestLeaseNoTwoHolders(t *testing.T) {
	c, conn, _ := newCatalog(t)
	ctx := ctxT(t)
	const holders, rounds = 20, 30
	var last int64
	for round := range rounds {
		exec(t, conn, `UPDATE leases SET expires_at = now() - interval '1 millisecond'`)
		var wins atomic.Int32
		var winner switchboard.Lease
		var mu sync.Mutex
		start := make(chan struct{})
		var wg sync.WaitGroup
		for h := range holders {
			wg.Go(func() {
				<-start
				l, err := c.Acquire(ctx, "singleton", fmt.Sprintf("holder-%d", h), time.Minute)
				switch {
				case err == nil:
					wins.Add(1)
					mu.Lock()
					winner = l
					mu.Unlock()
				case !errors.Is(err, switchboard.ErrLeaseHeld):
					t.Error(err)
				}
			})
		}
		close(start)
		wg.Wait()
		if n := wins.Load(); n != 1 {
			t.Fatalf("round %d: %d holders won", round, n)
		}
		if winner.Token <= last {
			t.Fatalf("round %d: token %d after %d", round, winner.Token, last)
		}
		last = winner.Token
	}
}
