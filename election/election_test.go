package election

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

// fakeLeaser is an in-memory Leaser judged by this process's monotonic
// clock. Partitioned holders' calls block until their context ends, like a
// process cut off from the catalog.
type fakeLeaser struct {
	mu          sync.Mutex
	holder      string
	token       int64
	expires     time.Time
	partitioned map[string]bool
	renews      int
	holders     []string
	// skew is how far the catalog's clock is ahead of this process's: the
	// ExpiresAt the fake hands out are on the catalog's clock.
	skew time.Duration
}

func newFake() *fakeLeaser { return &fakeLeaser{partitioned: map[string]bool{}} }

func (f *fakeLeaser) cut(holder string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.partitioned[holder]
}

func (f *fakeLeaser) partition(holder string, on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.partitioned[holder] = on
}

func (f *fakeLeaser) Acquire(ctx context.Context, name, holder string, ttl time.Duration) (switchboard.Lease, error) {
	if f.cut(holder) {
		<-ctx.Done()
		return switchboard.Lease{}, ctx.Err()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now().Add(f.skew)
	live := now.Before(f.expires)
	switch {
	case holder == f.holder && live:
	case f.holder == "" || !live:
		f.token++
	default:
		return switchboard.Lease{}, switchboard.ErrLeaseHeld
	}
	f.holder, f.expires = holder, now.Add(ttl)
	f.holders = append(f.holders, holder)
	return switchboard.Lease{Name: name, Holder: holder, Token: f.token, TTL: ttl, ExpiresAt: f.expires}, nil
}

func (f *fakeLeaser) Renew(ctx context.Context, l switchboard.Lease) (switchboard.Lease, error) {
	if f.cut(l.Holder) {
		<-ctx.Done()
		return switchboard.Lease{}, ctx.Err()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now().Add(f.skew)
	if l.Holder != f.holder || l.Token != f.token || !now.Before(f.expires) {
		return switchboard.Lease{}, switchboard.ErrLeaseLost
	}
	f.expires = now.Add(l.TTL)
	f.renews++
	l.ExpiresAt = f.expires
	return l, nil
}

func (f *fakeLeaser) Release(ctx context.Context, l switchboard.Lease) error {
	if f.cut(l.Holder) {
		<-ctx.Done()
		return ctx.Err()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if l.Holder == f.holder && l.Token == f.token {
		f.holder, f.expires = "", time.Now().Add(f.skew)
	}
	return nil
}

func (f *fakeLeaser) Leases(context.Context) ([]switchboard.Lease, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return []switchboard.Lease{{Name: "x", Holder: f.holder, Token: f.token, ExpiresAt: f.expires}}, nil
}

func (f *fakeLeaser) state() (holder string, token int64, expires time.Time, renews int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.holder, f.token, f.expires, f.renews
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

type events struct {
	elected chan switchboard.Lease
	lost    chan time.Time
}

func callbacks(cfg *Config) *events {
	ev := &events{elected: make(chan switchboard.Lease, 16), lost: make(chan time.Time, 16)}
	cfg.OnElected = func(ctx context.Context, l switchboard.Lease) {
		ev.elected <- l
		<-ctx.Done()
	}
	cfg.OnLost = func() { ev.lost <- time.Now() }
	cfg.Logger = quiet
	return ev
}

func recv[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		var zero T
		return zero
	}
}

func TestLeadRenewRelease(t *testing.T) {
	f := newFake()
	cfg := Config{TTL: 300 * time.Millisecond}
	ev := callbacks(&cfg)
	identity := "pod/" + strings.Repeat("very-long-identity-", 20) + "end"
	e, err := New(f, "lock", identity, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- e.Run(ctx) }()
	l := recv(t, "election", ev.elected)
	if l.Holder != identity || l.Token != 1 {
		t.Fatalf("elected with %+v", l)
	}
	if got, ok := e.Leader(); !ok || got.Token != 1 {
		t.Fatalf("Leader() = %+v, %v", got, ok)
	}
	testkit.WaitUntil(t, "three renewals", func() bool { _, _, _, n := f.state(); return n >= 3 })
	cancel()
	recv(t, "OnLost", ev.lost)
	if err := recv(t, "Run to return", ran); err != nil {
		t.Fatal(err)
	}
	holder, token, _, _ := f.state()
	if holder != "" || token != 1 {
		t.Fatalf("after stop: holder %q token %d, want released with token kept", holder, token)
	}
	if _, ok := e.Leader(); ok {
		t.Fatal("still leader after Run returned")
	}
	for _, h := range f.holders {
		if h != identity {
			t.Fatalf("identity changed on the way: %q", h)
		}
	}
	select {
	case l := <-ev.elected:
		t.Fatalf("elected again: %+v", l)
	default:
	}
}

// TestStallStepsDownBeforeExpiry cuts the leader off the catalog: its
// renewals hang, and it must step down before the lease could expire (so
// before anyone else could take it), then lead again with a new token once
// the catalog is back.
func TestStallStepsDownBeforeExpiry(t *testing.T) {
	f := newFake()
	// A 2 s lease gives a 400 ms margin: the step-down is a safety
	// property measured against the lease's expiry, and a loaded machine
	// must not be able to delay it past that by scheduling alone.
	cfg := Config{TTL: 2 * time.Second, RetryEvery: 100 * time.Millisecond}
	ev := callbacks(&cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, f, "lock", "a", cfg) }()
	defer func() {
		cancel()
		waitDone(t, done)
	}()
	recv(t, "election", ev.elected)
	f.partition("a", true)
	lostAt := recv(t, "step-down", ev.lost)
	_, _, expires, _ := f.state()
	if !lostAt.Before(expires) {
		t.Fatalf("stepped down at %v, after the lease expired at %v", lostAt, expires)
	}
	f.partition("a", false)
	l := recv(t, "re-election", ev.elected)
	if l.Token != 2 {
		t.Fatalf("re-elected with token %d, want 2 (a new term)", l.Token)
	}
}

func TestLostLeaseEndsLeadership(t *testing.T) {
	f := newFake()
	cfg := Config{TTL: 300 * time.Millisecond, RetryEvery: time.Hour}
	ev := callbacks(&cfg)
	var leaderCtxDone atomic.Bool
	inner := cfg.OnElected
	cfg.OnElected = func(ctx context.Context, l switchboard.Lease) {
		inner(ctx, l)
		leaderCtxDone.Store(true)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go Run(ctx, f, "lock", "a", cfg)
	recv(t, "election", ev.elected)
	f.mu.Lock()
	f.holder, f.token = "b", f.token+1
	f.mu.Unlock()
	recv(t, "OnLost", ev.lost)
	if !leaderCtxDone.Load() {
		t.Fatal("OnLost called before OnElected returned")
	}
}

func TestConfig(t *testing.T) {
	f := newFake()
	cases := []struct {
		name, id string
		cfg      Config
		ok       bool
	}{
		{"lock", "a", Config{}, true},
		{"lock", "a", Config{TTL: time.Second}, true},
		{"", "a", Config{}, false},
		{"lock", "", Config{}, false},
		{"lock", "a", Config{TTL: -1}, false},
		{"lock", "a", Config{TTL: time.Second, RenewEvery: time.Second}, false},
		{"lock", "a", Config{TTL: time.Second, Margin: 900 * time.Millisecond}, false},
	}
	for _, tc := range cases {
		_, err := New(f, tc.name, tc.id, tc.cfg)
		if (err == nil) != tc.ok {
			t.Errorf("New(%q, %q, %+v) = %v", tc.name, tc.id, tc.cfg, err)
		}
		if err != nil && !errors.Is(err, switchboard.ErrInvalid) {
			t.Errorf("error %v is not ErrInvalid", err)
		}
	}
	if _, err := New(nil, "lock", "a", Config{}); !errors.Is(err, switchboard.ErrInvalid) {
		t.Errorf("nil leaser: %v", err)
	}
	e, _ := New(f, "lock", "a", Config{})
	if e.cfg.TTL != DefaultTTL || e.cfg.RenewEvery != DefaultTTL/3 || e.cfg.RetryEvery != DefaultRetryEvery {
		t.Errorf("defaults: %+v", e.cfg)
	}
}

// TestClockSkew runs a contender whose clock is an hour behind, then an hour
// ahead of, the catalog's: leadership neither flaps nor outlives the lease,
// because the elector never compares the catalog's ExpiresAt with its own
// wall clock.
func TestClockSkew(t *testing.T) {
	for _, skew := range []time.Duration{time.Hour, -time.Hour} {
		t.Run(skew.String(), func(t *testing.T) {
			f := newFake()
			f.skew = skew
			cfg := Config{TTL: 2 * time.Second, RenewEvery: 50 * time.Millisecond, RetryEvery: 50 * time.Millisecond}
			ev := callbacks(&cfg)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- Run(ctx, f, "lock", "a", cfg) }()
			defer func() {
				cancel()
				waitDone(t, done)
			}()
			recv(t, "election", ev.elected)
			testkit.WaitUntil(t, "ten renewals", func() bool { _, _, _, n := f.state(); return n >= 10 })
			select {
			case <-ev.lost:
				t.Fatal("stepped down while every renewal succeeded")
			default:
			}
			f.partition("a", true)
			lostAt := recv(t, "step-down", ev.lost)
			_, _, expires, _ := f.state()
			if !lostAt.Add(skew).Before(expires) {
				t.Fatalf("stepped down at %v (catalog clock), after the lease expired at %v", lostAt.Add(skew), expires)
			}
		})
	}
}

// waitDone waits for Run to return after its context ended, failing after
// a generous bound instead of hanging the test binary.
func waitDone(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Error("Run did not return within 20 s of its context's end")
	}
}
