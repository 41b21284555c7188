package catalogtest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

// clocked is what RunLeases needs of a leaser besides switchboard.Leaser:
// the catalog's clock, by which expiry is judged (every switchboard.Catalog
// has it).
type clocked interface {
	switchboard.Leaser
	Now(ctx context.Context) (time.Time, error)
}

// RunLeases runs the lease conformance suite (the semantics documented on
// switchboard.Leaser), each case on a fresh, empty leaser from open, which
// must also offer the catalog's Now. open registers its own cleanup.
func RunLeases(t *testing.T, open func(t *testing.T) switchboard.Leaser) {
	cases := []struct {
		name string
		fn   func(t *testing.T, l clocked)
	}{
		{"AcquireRenewHeld", testLeaseAcquireRenew},
		{"Invalid", testLeaseInvalid},
		{"TTLRoundedUpToMilliseconds", testLeaseRounding},
		{"HugeTTL", testLeaseHugeTTL},
		{"RenewZeroTTLKeepsStoredTTL", testLeaseRenewZeroTTL},
		{"Release", testLeaseRelease},
		{"ReleaseExpired", testLeaseReleaseExpired},
		{"TokenGrows", testLeaseTokenGrows},
		{"ExpiryByCatalogClock", testLeaseExpiry},
		{"NoTwoHolders", testLeaseNoTwoHolders},
		{"List", testLeaseList},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, ok := open(t).(clocked)
			if !ok {
				t.Fatal("the leaser has no Now(ctx): expiry cannot be checked against the catalog's clock")
			}
			tc.fn(t, l)
		})
	}
}

func mustAcquire(t *testing.T, l clocked, name, holder string, ttl time.Duration) switchboard.Lease {
	t.Helper()
	got, err := l.Acquire(ctx(t), name, holder, ttl)
	if err != nil {
		t.Fatalf("acquire %s as %s: %v", name, holder, err)
	}
	if got.Name != name || got.Holder != holder || got.Token <= 0 {
		t.Fatalf("acquire %s as %s: %+v", name, holder, got)
	}
	return got
}

func catalogNow(t *testing.T, l clocked) time.Time {
	t.Helper()
	now, err := l.Now(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	return now
}

// waitExpired waits until the catalog's clock has reached le's expiry.
func waitExpired(t *testing.T, l clocked, le switchboard.Lease) {
	t.Helper()
	testkit.WaitUntil(t, "lease to expire by the catalog's clock", func() bool {
		return !catalogNow(t, l).Before(le.ExpiresAt)
	})
}

// onlyLease returns the one lease row, named name.
func onlyLease(t *testing.T, l clocked, name string) switchboard.Lease {
	t.Helper()
	ls, err := l.Leases(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 1 || ls[0].Name != name {
		t.Fatalf("leases: %+v, want just %q", ls, name)
	}
	return ls[0]
}

// sameLease compares every field, times by instant.
func sameLease(a, b switchboard.Lease) bool {
	return a.Name == b.Name && a.Holder == b.Holder && a.Token == b.Token && a.TTL == b.TTL &&
		a.ExpiresAt.Equal(b.ExpiresAt)
}

func testLeaseAcquireRenew(t *testing.T, l clocked) {
	before := catalogNow(t, l)
	a := mustAcquire(t, l, "lock", "a", time.Minute)
	after := catalogNow(t, l)
	if a.Token != 1 || a.TTL != time.Minute {
		t.Fatalf("first acquire: %+v", a)
	}
	// ExpiresAt is the catalog's now at acquisition plus the TTL.
	if a.ExpiresAt.Before(before.Add(time.Minute)) || a.ExpiresAt.After(after.Add(time.Minute)) {
		t.Fatalf("expires at %v, not within [%v, %v] + ttl", a.ExpiresAt, before, after)
	}
	if _, err := l.Acquire(ctx(t), "lock", "b", time.Minute); !errors.Is(err, switchboard.ErrLeaseHeld) {
		t.Fatalf("acquire of a held lease: %v, want ErrLeaseHeld", err)
	}
	// The holder acquiring again renews without a new token.
	again := mustAcquire(t, l, "lock", "a", 2*time.Minute)
	if again.Token != a.Token || again.TTL != 2*time.Minute || again.ExpiresAt.Before(a.ExpiresAt) {
		t.Fatalf("re-acquire by the holder: %+v after %+v", again, a)
	}
	r, err := l.Renew(ctx(t), a)
	if err != nil {
		t.Fatalf("renew: %v", err)
	}
	if r.Token != a.Token || r.Holder != "a" || r.TTL != time.Minute || r.ExpiresAt.Before(a.ExpiresAt) {
		t.Fatalf("renew: %+v after %+v", r, a)
	}
	if got := onlyLease(t, l, "lock"); !sameLease(got, r) {
		t.Fatalf("stored %+v, renew returned %+v", got, r)
	}
	// A renewal with a wrong token or holder is not the holder's.
	for _, bad := range []switchboard.Lease{
		{Name: "lock", Holder: "a", Token: r.Token + 1, TTL: time.Minute},
		{Name: "lock", Holder: "b", Token: r.Token, TTL: time.Minute},
		{Name: "nope", Holder: "a", Token: r.Token, TTL: time.Minute},
	} {
		if _, err := l.Renew(ctx(t), bad); !errors.Is(err, switchboard.ErrLeaseLost) {
			t.Errorf("renew %+v: %v, want ErrLeaseLost", bad, err)
		}
	}
}

func testLeaseInvalid(t *testing.T, l clocked) {
	for _, bad := range []struct {
		name, holder string
		ttl          time.Duration
	}{
		{"", "h", time.Second}, {"n", "", time.Second},
		{"n", "h", 0}, {"n", "h", -time.Second}, {"n", "h", time.Millisecond - time.Nanosecond}, {"n", "h", time.Microsecond},
	} {
		if _, err := l.Acquire(ctx(t), bad.name, bad.holder, bad.ttl); !errors.Is(err, switchboard.ErrInvalid) {
			t.Errorf("Acquire(%q, %q, %v) = %v, want ErrInvalid", bad.name, bad.holder, bad.ttl, err)
		}
	}
	if ls, err := l.Leases(ctx(t)); err != nil || len(ls) != 0 {
		t.Fatalf("invalid acquisitions stored something: %+v %v", ls, err)
	}
	a := mustAcquire(t, l, "n", "h", time.Minute)
	for _, ttl := range []time.Duration{-time.Second, time.Microsecond, time.Millisecond - time.Nanosecond} {
		bad := a
		bad.TTL = ttl
		if _, err := l.Renew(ctx(t), bad); !errors.Is(err, switchboard.ErrInvalid) {
			t.Errorf("Renew with ttl %v = %v, want ErrInvalid", ttl, err)
		}
	}
	for _, bad := range []switchboard.Lease{
		{Name: "", Holder: "h", Token: a.Token, TTL: time.Minute},
		{Name: "n", Holder: "", Token: a.Token, TTL: time.Minute},
	} {
		if _, err := l.Renew(ctx(t), bad); !errors.Is(err, switchboard.ErrInvalid) {
			t.Errorf("Renew(%+v) = %v, want ErrInvalid", bad, err)
		}
		if err := l.Release(ctx(t), bad); !errors.Is(err, switchboard.ErrInvalid) {
			t.Errorf("Release(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
	if got := onlyLease(t, l, "n"); !sameLease(got, a) {
		t.Fatalf("invalid calls changed the lease: %+v, was %+v", got, a)
	}
}

func testLeaseRounding(t *testing.T, l clocked) {
	for i, tc := range []struct{ ttl, want time.Duration }{
		{time.Millisecond, time.Millisecond},
		{time.Millisecond + time.Nanosecond, 2 * time.Millisecond},
		{time.Minute + 1500*time.Microsecond, time.Minute + 2*time.Millisecond},
		{time.Minute + 999*time.Microsecond, time.Minute + time.Millisecond},
		{time.Minute, time.Minute},
	} {
		name := fmt.Sprintf("round-%d", i)
		before := catalogNow(t, l)
		a := mustAcquire(t, l, name, "h", tc.ttl)
		if a.TTL != tc.want {
			t.Errorf("Acquire ttl %v: stored %v, want %v", tc.ttl, a.TTL, tc.want)
		}
		if a.ExpiresAt.Before(before.Add(tc.want)) {
			t.Errorf("Acquire ttl %v: expires at %v, before catalog now %v + %v", tc.ttl, a.ExpiresAt, before, tc.want)
		}
	}
	a := mustAcquire(t, l, "renewed", "h", time.Minute)
	a.TTL = 2*time.Minute + time.Nanosecond
	r, err := l.Renew(ctx(t), a)
	if err != nil {
		t.Fatal(err)
	}
	if r.TTL != 2*time.Minute+time.Millisecond {
		t.Fatalf("Renew ttl %v: stored %v, want %v", a.TTL, r.TTL, 2*time.Minute+time.Millisecond)
	}
	ls, err := l.Leases(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range ls {
		if x.TTL%time.Millisecond != 0 {
			t.Errorf("listed %s with ttl %v, not whole milliseconds", x.Name, x.TTL)
		}
		if x.Name == "renewed" && !sameLease(x, r) {
			t.Errorf("listed %+v, renew returned %+v", x, r)
		}
	}
}

func testLeaseRenewZeroTTL(t *testing.T, l clocked) {
	a := mustAcquire(t, l, "lock", "h", 90*time.Second)
	// A lease known only by name, holder and token renews with its term.
	r, err := l.Renew(ctx(t), switchboard.Lease{Name: a.Name, Holder: a.Holder, Token: a.Token})
	if err != nil {
		t.Fatalf("renew with zero ttl: %v", err)
	}
	if r.TTL != 90*time.Second || r.Token != a.Token || r.ExpiresAt.Before(a.ExpiresAt) {
		t.Fatalf("renew with zero ttl: %+v after %+v", r, a)
	}
	if got := onlyLease(t, l, "lock"); !sameLease(got, r) {
		t.Fatalf("stored %+v, renew returned %+v", got, r)
	}
}

func testLeaseRelease(t *testing.T, l clocked) {
	a := mustAcquire(t, l, "lock", "a", time.Minute)
	if err := l.Release(ctx(t), a); err != nil {
		t.Fatalf("release: %v", err)
	}
	got := onlyLease(t, l, "lock")
	if got.Holder != "" || got.Token != a.Token || got.ExpiresAt.After(catalogNow(t, l)) {
		t.Fatalf("after release: %+v", got)
	}
	if err := l.Release(ctx(t), a); err != nil {
		t.Fatalf("second release with the same token: %v, want nil", err)
	}
	if _, err := l.Renew(ctx(t), a); !errors.Is(err, switchboard.ErrLeaseLost) {
		t.Fatalf("renew of a released lease: %v, want ErrLeaseLost", err)
	}
	// Released is free at once, for anyone, with a bigger token.
	b := mustAcquire(t, l, "lock", "b", time.Minute)
	if b.Token <= a.Token {
		t.Fatalf("token %d after %d", b.Token, a.Token)
	}
	if err := l.Release(ctx(t), a); !errors.Is(err, switchboard.ErrLeaseLost) {
		t.Fatalf("release by a former holder: %v, want ErrLeaseLost", err)
	}
	if got := onlyLease(t, l, "lock"); !sameLease(got, b) {
		t.Fatalf("a former holder's release changed the lease: %+v, want %+v", got, b)
	}
	forged := b
	forged.Holder = "a"
	if err := l.Release(ctx(t), forged); !errors.Is(err, switchboard.ErrLeaseLost) {
		t.Fatalf("release by another holder with the current token: %v, want ErrLeaseLost", err)
	}
	if err := l.Release(ctx(t), switchboard.Lease{Name: "never", Holder: "a", Token: 1}); !errors.Is(err, switchboard.ErrLeaseLost) {
		t.Fatalf("release of a lease that never existed: %v, want ErrLeaseLost", err)
	}
	if got := onlyLease(t, l, "lock"); !sameLease(got, b) {
		t.Fatalf("lease changed: %+v, want %+v", got, b)
	}
}

func testLeaseReleaseExpired(t *testing.T, l clocked) {
	a := mustAcquire(t, l, "lock", "a", 50*time.Millisecond)
	waitExpired(t, l, a)
	if err := l.Release(ctx(t), a); err != nil {
		t.Fatalf("release of an expired lease nobody took over: %v, want nil", err)
	}
	if err := l.Release(ctx(t), a); err != nil {
		t.Fatalf("second release: %v, want nil", err)
	}
	if got := onlyLease(t, l, "lock"); got.Holder != "" || got.Token != a.Token {
		t.Fatalf("after release: %+v", got)
	}
	b := mustAcquire(t, l, "lock", "b", time.Minute)
	if b.Token <= a.Token {
		t.Fatalf("token %d after %d", b.Token, a.Token)
	}
}

func testLeaseTokenGrows(t *testing.T, l clocked) {
	var last int64
	next := func(what string, got switchboard.Lease) {
		t.Helper()
		if got.Token <= last {
			t.Fatalf("%s: token %d after %d", what, got.Token, last)
		}
		last = got.Token
	}
	a := mustAcquire(t, l, "lock", "a", 50*time.Millisecond)
	next("first holder", a)
	waitExpired(t, l, a)
	// The same holder after its lease expired starts a new term.
	a2 := mustAcquire(t, l, "lock", "a", 50*time.Millisecond)
	next("same holder after expiry", a2)
	if _, err := l.Renew(ctx(t), a); !errors.Is(err, switchboard.ErrLeaseLost) {
		t.Fatalf("renew of the first term: %v, want ErrLeaseLost", err)
	}
	waitExpired(t, l, a2)
	b := mustAcquire(t, l, "lock", "b", time.Minute)
	next("new holder after expiry", b)
	if err := l.Release(ctx(t), b); err != nil {
		t.Fatal(err)
	}
	b2 := mustAcquire(t, l, "lock", "b", time.Minute)
	next("same holder after release", b2)
	if err := l.Release(ctx(t), b2); err != nil {
		t.Fatal(err)
	}
	c := mustAcquire(t, l, "lock", "c", time.Minute)
	next("new holder after release", c)
	// Tokens are per lease name.
	if o := mustAcquire(t, l, "other", "a", time.Minute); o.Token != 1 {
		t.Fatalf("first token of another lease: %d", o.Token)
	}
}

func testLeaseExpiry(t *testing.T, l clocked) {
	a := mustAcquire(t, l, "lock", "a", 200*time.Millisecond)
	var b switchboard.Lease
	testkit.WaitUntil(t, "another holder to acquire the expired lease", func() bool {
		before := catalogNow(t, l)
		got, err := l.Acquire(ctx(t), "lock", "b", time.Minute)
		switch {
		case errors.Is(err, switchboard.ErrLeaseHeld):
			// Refused: the catalog's clock had not reached the expiry.
			if !before.Before(a.ExpiresAt) {
				t.Fatalf("refused at catalog time %v, after the expiry %v", before, a.ExpiresAt)
			}
			return false
		case err != nil:
			t.Fatal(err)
		}
		b = got
		return true
	})
	if now := catalogNow(t, l); now.Before(a.ExpiresAt) {
		t.Fatalf("taken over at catalog time %v, before the expiry %v", now, a.ExpiresAt)
	}
	if b.Holder != "b" || b.Token <= a.Token || !b.ExpiresAt.After(a.ExpiresAt) {
		t.Fatalf("after expiry: %+v, was %+v", b, a)
	}
	if _, err := l.Renew(ctx(t), a); !errors.Is(err, switchboard.ErrLeaseLost) {
		t.Fatalf("renew by the former holder: %v, want ErrLeaseLost", err)
	}
	if got := onlyLease(t, l, "lock"); !sameLease(got, b) {
		t.Fatalf("stored %+v, want %+v", got, b)
	}
}

func testLeaseNoTwoHolders(t *testing.T, l clocked) {
	const holders, rounds = 20, 10
	var last int64
	for round := range rounds {
		var (
			mu      sync.Mutex
			winners []switchboard.Lease
			wg      sync.WaitGroup
		)
		start := make(chan struct{})
		for h := range holders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				got, err := l.Acquire(ctx(t), "singleton", fmt.Sprintf("holder-%d", h), time.Minute)
				switch {
				case err == nil:
					mu.Lock()
					winners = append(winners, got)
					mu.Unlock()
				case !errors.Is(err, switchboard.ErrLeaseHeld):
					t.Error(err)
				}
			}()
		}
		close(start)
		wg.Wait()
		if len(winners) != 1 {
			t.Fatalf("round %d: %d holders won: %+v", round, len(winners), winners)
		}
		w := winners[0]
		if w.Token <= last {
			t.Fatalf("round %d: token %d after %d", round, w.Token, last)
		}
		last = w.Token
		if got := onlyLease(t, l, "singleton"); !sameLease(got, w) {
			t.Fatalf("round %d: stored %+v, winner %+v", round, got, w)
		}
		if err := l.Release(ctx(t), w); err != nil {
			t.Fatal(err)
		}
	}
}

func testLeaseList(t *testing.T, l clocked) {
	if ls, err := l.Leases(ctx(t)); err != nil || len(ls) != 0 {
		t.Fatalf("empty catalog: %+v %v", ls, err)
	}
	z := mustAcquire(t, l, "zeta", "z", time.Minute)
	a := mustAcquire(t, l, "alpha", "a", 2*time.Minute)
	m := mustAcquire(t, l, "mu", "m", time.Minute)
	if err := l.Release(ctx(t), m); err != nil {
		t.Fatal(err)
	}
	ls, err := l.Leases(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 3 {
		t.Fatalf("leases: %+v", ls)
	}
	if !sameLease(ls[0], a) || !sameLease(ls[2], z) {
		t.Fatalf("leases not listed by name as acquired:\n got %+v\nwant %+v, …, %+v", ls, a, z)
	}
	if r := ls[1]; r.Name != "mu" || r.Holder != "" || r.Token != m.Token || r.TTL != m.TTL || r.ExpiresAt.After(m.ExpiresAt) {
		t.Fatalf("released lease listed as %+v (was %+v)", r, m)
	}
	for _, x := range ls {
		if x.ExpiresAt.Location() != time.UTC {
			t.Errorf("%s: expiry %v not in UTC", x.Name, x.ExpiresAt)
		}
	}
}

// testLeaseHugeTTL: a TTL near the largest Duration ("forever") gives a
// lease that is held, not one whose rounding overflowed into the past (so
// that another holder took it at once) nor a database error.
func testLeaseHugeTTL(t *testing.T, l clocked) {
	for _, ttl := range []time.Duration{math.MaxInt64, math.MaxInt64 - 1, math.MaxInt64 / 2} {
		name := "forever-" + ttl.String()
		got := mustAcquire(t, l, name, "a", ttl)
		now, err := l.Now(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if got.TTL <= 0 || !got.ExpiresAt.After(now) {
			t.Fatalf("acquire with ttl %v: %+v (now %v): not held", ttl, got, now)
		}
		if _, err := l.Acquire(ctx(t), name, "b", time.Second); !errors.Is(err, switchboard.ErrLeaseHeld) {
			t.Fatalf("second holder of a lease with ttl %v: %v, want ErrLeaseHeld", ttl, err)
		}
		r, err := l.Renew(ctx(t), switchboard.Lease{Name: name, Holder: "a", Token: got.Token, TTL: ttl})
		if err != nil || r.TTL <= 0 || !r.ExpiresAt.After(now) {
			t.Fatalf("renew with ttl %v: %+v %v", ttl, r, err)
		}
		if _, err := l.Acquire(ctx(t), name, "b", time.Second); !errors.Is(err, switchboard.ErrLeaseHeld) {
			t.Fatalf("second holder after renewal with ttl %v: %v, want ErrLeaseHeld", ttl, err)
		}
	}
}
