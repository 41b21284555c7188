package election

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/testkit"
	_ "github.com/switchboard-io/switchboard/sqlite"
)

// fakeLeaser is an in-memory Leaser judged by this process's monotonic
// clock. Partitioned holders' calls block until their context ends, like a
// process cut off from the catalog.
type fakeLeaser struct {
	mu          sync.Mutex
	name        string // of the last acquire
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
	f.name, f.holder, f.expires = name, holder, now.Add(ttl)
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
	if f.name == "" {
		return []switchboard.Lease{}, nil
	}
	return []switchboard.Lease{{Name: f.name, Holder: f.holder, Token: f.token, ExpiresAt: f.expires}}, nil
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

// TestInvalidLeaseIsAnError: what every Leaser refuses (ValidateLease, a
// TTL under a millisecond) is an error from New, not a Run that warns
// forever; and a Leaser's own ErrInvalid ends Run with that error.
func TestInvalidLeaseIsAnError(t *testing.T) {
	f := newFake()
	for _, tc := range []struct {
		name, id string
		cfg      Config
	}{
		{"lock", strings.Repeat("x", switchboard.MaxLeaseHolder+1), Config{}},
		{strings.Repeat("l", switchboard.MaxLeaseName+1), "a", Config{}},
		{"lock", "a\x00b", Config{}},
		{"lock", "a", Config{TTL: 2 * time.Nanosecond}},
		{"lock", "a", Config{TTL: 999 * time.Microsecond}},
	} {
		if _, err := New(f, tc.name, tc.id, tc.cfg); !errors.Is(err, switchboard.ErrInvalid) {
			t.Errorf("New(%.20q, %.20q, TTL %s) = %v, want ErrInvalid", tc.name, tc.id, tc.cfg.TTL, err)
		}
	}
	refusing := refusingLeaser{f}
	done := make(chan error, 1)
	go func() {
		done <- Run(context.Background(), refusing, "lock", "a", Config{TTL: 300 * time.Millisecond, Logger: quiet})
	}()
	select {
	case err := <-done:
		if !errors.Is(err, switchboard.ErrInvalid) || !strings.Contains(err.Error(), "must be a DNS label") {
			t.Fatalf("Run = %v, want the Leaser's ErrInvalid", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run kept retrying a lease its Leaser refuses as invalid")
	}
}

// refusingLeaser refuses every Acquire as invalid, as a backend with
// stricter names than ValidateLease would.
type refusingLeaser struct{ *fakeLeaser }

func (refusingLeaser) Acquire(context.Context, string, string, time.Duration) (switchboard.Lease, error) {
	return switchboard.Lease{}, fmt.Errorf("%w: lease name: must be a DNS label", switchboard.ErrInvalid)
}

// TestRunTwiceIsRefused: a second Run of one Elector while the first runs
// would be granted the same lease (same holder) and lead beside it.
func TestRunTwiceIsRefused(t *testing.T) {
	f := newFake()
	cfg := Config{TTL: 300 * time.Millisecond}
	ev := callbacks(&cfg)
	e, err := New(f, "lock", "a", cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() { first <- e.Run(ctx) }()
	recv(t, "election", ev.elected)
	second := make(chan error, 1)
	go func() { second <- e.Run(ctx) }()
	select {
	case err := <-second:
		if err == nil {
			t.Fatal("second Run returned nil")
		}
	case l := <-ev.elected:
		t.Fatalf("a second Run of the same Elector was elected beside the first: %+v", l)
	case <-time.After(20 * time.Second):
		t.Fatal("second Run neither refused nor returned")
	}
	cancel()
	waitDone(t, first)
	recv(t, "OnLost", ev.lost)
	// Once the first has returned, the Elector may run again.
	ctx, cancel = context.WithCancel(context.Background())
	again := make(chan error, 1)
	go func() { again <- e.Run(ctx) }()
	recv(t, "re-election", ev.elected)
	cancel()
	waitDone(t, again)
}

// TestClosedCatalogEndsRun: once the catalog is closed no acquire can
// succeed; Run says so instead of retrying (and warning) forever. A leader
// steps down first: its renewals fail too.
func TestClosedCatalogEndsRun(t *testing.T) {
	cat := testkit.OpenSQLite(t)
	cfg := Config{TTL: 300 * time.Millisecond}
	ev := callbacks(&cfg)
	done := make(chan error, 1)
	go func() { done <- Run(context.Background(), cat.(switchboard.Leaser), "lock", "a", cfg) }()
	recv(t, "election", ev.elected)
	cat.Close()
	recv(t, "step-down", ev.lost)
	select {
	case err := <-done:
		if !errors.Is(err, switchboard.ErrClosed) {
			t.Fatalf("Run = %v, want ErrClosed", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run kept retrying on a closed catalog")
	}
}

// TestHeldUpLoopStillEndsTheTerm holds the elector's loop up (its logger
// blocks, as one writing to a full pipe does) right after a failed
// renewal: the leader's context must still end, and Leader must say false,
// before the lease could expire, although the loop cannot step down.
func TestHeldUpLoopStillEndsTheTerm(t *testing.T) {
	f := newFake()
	flaky := &failingRenew{fakeLeaser: f}
	blocked, unblock := make(chan struct{}), make(chan struct{})
	cfg := Config{TTL: 2 * time.Second, RenewEvery: 100 * time.Millisecond, RetryEvery: 100 * time.Millisecond,
		Logger: slog.New(&blockingWarn{blocked: blocked, unblock: unblock})}
	elected, ended := make(chan struct{}), make(chan time.Time, 1)
	cfg.OnElected = func(ctx context.Context, l switchboard.Lease) {
		close(elected)
		<-ctx.Done()
		ended <- time.Now()
	}
	e, err := New(flaky, "lock", "a", cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	defer func() {
		cancel()
		close(unblock)
		waitDone(t, done)
	}()
	recv(t, "election", elected)
	flaky.fail.Store(true)
	recv(t, "the loop to be held up by its logger", blocked)
	endedAt := recv(t, "the leader's context to end", ended)
	_, _, expires, _ := f.state()
	if !endedAt.Before(expires) {
		t.Fatalf("leadership ended at %v, after the lease expired at %v", endedAt, expires)
	}
	if _, ok := e.Leader(); ok {
		t.Fatal("Leader() = true after the leader's context ended")
	}
}

// failingRenew fails every renewal, once fail is set, with an error that
// is not ErrLeaseLost (a connection reset).
type failingRenew struct {
	*fakeLeaser
	fail atomic.Bool
}

func (f *failingRenew) Renew(ctx context.Context, l switchboard.Lease) (switchboard.Lease, error) {
	if f.fail.Load() {
		return switchboard.Lease{}, errors.New("connection reset by peer")
	}
	return f.fakeLeaser.Renew(ctx, l)
}

// blockingWarn is a log handler whose first WARN record blocks until
// unblock is closed.
type blockingWarn struct {
	once             sync.Once
	blocked, unblock chan struct{}
}

func (h *blockingWarn) Enabled(context.Context, slog.Level) bool { return true }
func (h *blockingWarn) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *blockingWarn) WithGroup(string) slog.Handler            { return h }
func (h *blockingWarn) Handle(_ context.Context, r slog.Record) error {
	if r.Level == slog.LevelWarn {
		h.once.Do(func() {
			close(h.blocked)
			<-h.unblock
		})
	}
	return nil
}

// cancelInAcquire is a Leaser whose Acquire succeeds at the catalog, then
// ends the caller's context before it returns: Run's ctx ends while an
// acquire is under way, and the acquire succeeds all the same.
type cancelInAcquire struct {
	switchboard.Leaser
	cancel   context.CancelFunc
	acquired chan switchboard.Lease
}

func (c *cancelInAcquire) Acquire(ctx context.Context, name, holder string, ttl time.Duration) (switchboard.Lease, error) {
	l, err := c.Leaser.Acquire(ctx, name, holder, ttl)
	c.cancel()
	if err == nil {
		c.acquired <- l
	}
	return l, err
}

// TestStoppedDuringAcquireDoesNotLead: when Run's ctx ends while an acquire
// is under way and the acquire succeeds, the caller has already stopped:
// OnElected must not run (nor OnLost), Leader must never say true, and
// the lease must be released at once, so that another contender does not
// wait a TTL (a minute here) for it.
func TestStoppedDuringAcquireDoesNotLead(t *testing.T) {
	for _, b := range leaserBackends() {
		t.Run(b.name, func(t *testing.T) {
			leaser := b.open(t)
			cfg := Config{TTL: time.Minute}
			ev := callbacks(&cfg)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			wrapped := &cancelInAcquire{Leaser: leaser, cancel: cancel, acquired: make(chan switchboard.Lease, 1)}
			e, err := New(wrapped, "lock", "a", cfg)
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- e.Run(ctx) }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("Run = %v, want nil (its ctx ended)", err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("Run did not return within 20 s of its context's end")
			}
			first := recv(t, "the acquire", wrapped.acquired)
			select {
			case l := <-ev.elected:
				t.Fatalf("OnElected ran with %+v although Run's ctx had ended during the acquire", l)
			default:
			}
			select {
			case <-ev.lost:
				t.Fatal("OnLost ran for a term that never began")
			default:
			}
			if _, ok := e.Leader(); ok {
				t.Fatal("Leader() = true after Run returned")
			}
			// Released at once: another contender takes it now, not in a
			// minute, in a new term.
			expectReleased(t, leaser, first)
		})
	}
}

// slowAcquire is a Leaser whose Acquire succeeds at the catalog and then
// takes delay more before it returns.
type slowAcquire struct {
	switchboard.Leaser
	delay    time.Duration
	acquired chan switchboard.Lease
}

func (s *slowAcquire) Acquire(ctx context.Context, name, holder string, ttl time.Duration) (switchboard.Lease, error) {
	l, err := s.Leaser.Acquire(ctx, name, holder, ttl)
	time.Sleep(s.delay)
	if err == nil {
		select {
		case s.acquired <- l:
		default:
		}
	}
	return l, err
}

// TestStoppedAfterLateAcquireReleases: a lease acquired too late to lead
// safely is held, not led, until the retry; when Run's ctx ends in the
// wait before that retry, the lease is released at once, not left to
// expire a TTL (a minute here) later.
func TestStoppedAfterLateAcquireReleases(t *testing.T) {
	leaser := testkit.OpenSQLite(t).(switchboard.Leaser)
	// The "too late" warning blocks until the test has cancelled Run's
	// ctx: Run then meets the end of ctx in its wait to retry, not during
	// the acquire.
	warn := &blockingWarn{blocked: make(chan struct{}), unblock: make(chan struct{})}
	// TTL - Margin = 1 s: an acquire that takes 1.5 s is too late to lead.
	cfg := Config{TTL: time.Minute, Margin: 59 * time.Second, RenewEvery: 500 * time.Millisecond,
		RetryEvery: time.Minute}
	ev := callbacks(&cfg)
	cfg.Logger = slog.New(warn)
	slow := &slowAcquire{Leaser: leaser, delay: 1500 * time.Millisecond, acquired: make(chan switchboard.Lease, 1)}
	e, err := New(slow, "lock", "a", cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	recv(t, "the too-late warning", warn.blocked)
	first := recv(t, "the late acquire", slow.acquired)
	cancel()
	close(warn.unblock)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v, want nil", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return within 20 s of its context's end")
	}
	select {
	case l := <-ev.elected:
		t.Fatalf("OnElected ran with %+v for a lease acquired too late", l)
	default:
	}
	expectReleased(t, leaser, first)
}
