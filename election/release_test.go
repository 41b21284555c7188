package election

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/testkit"
	"github.com/switchboard-io/switchboard/postgres"
	"github.com/switchboard-io/switchboard/postgres/pgtest"
)

// waitLong is how long a test waits for Run to return: generous for a
// loaded machine, far below the TTLs the tests use when those matter.
const waitLong = time.Minute

// hangingCatalog is a Leaser whose Release and Leases hang until their
// context ends, as a catalog that stops answering. It records how long
// each call was given; a call given more than limit fails at once (so that
// an unbounded release fails the test instead of hanging it).
type hangingCatalog struct {
	switchboard.Leaser
	limit time.Duration
	mu    sync.Mutex
	given time.Duration // of the first call
	calls chan string
}

func (h *hangingCatalog) hang(ctx context.Context, call string) error {
	dl, ok := ctx.Deadline()
	given := time.Until(dl)
	h.mu.Lock()
	if h.given == 0 {
		h.given = given
	}
	h.mu.Unlock()
	h.calls <- call
	if !ok || given > h.limit {
		return fmt.Errorf("%s given %v (deadline set: %v), more than %v", call, given, ok, h.limit)
	}
	<-ctx.Done()
	return ctx.Err()
}

func (h *hangingCatalog) Release(ctx context.Context, l switchboard.Lease) error {
	return h.hang(ctx, "Release")
}

func (h *hangingCatalog) Leases(ctx context.Context) ([]switchboard.Lease, error) {
	return nil, h.hang(ctx, "Leases")
}

// cutAcquire is a Leaser whose first Acquire ends Run's ctx and then fails
// with the context's error: with commit, after it took the lease at the
// catalog (the reply is lost); without, before reaching it.
type cutAcquire struct {
	switchboard.Leaser
	cancel   context.CancelFunc
	commit   bool
	once     sync.Once
	acquired chan switchboard.Lease
}

func (c *cutAcquire) Acquire(ctx context.Context, name, holder string, ttl time.Duration) (l switchboard.Lease, err error) {
	cut := false
	c.once.Do(func() { cut = true })
	if !cut {
		return c.Leaser.Acquire(ctx, name, holder, ttl)
	}
	if c.commit {
		l, err := c.Leaser.Acquire(ctx, name, holder, ttl)
		if err != nil {
			return l, err
		}
		c.acquired <- l
	}
	c.cancel()
	return switchboard.Lease{}, fmt.Errorf("reply lost: %w", ctx.Err())
}

func runUntilDone(t *testing.T, e *Elector, ctx context.Context) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	return done
}

func awaitReturn(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v, want nil (its ctx ended)", err)
		}
	case <-time.After(waitLong):
		t.Fatalf("Run did not return within %v of its context's end", waitLong)
	}
}

// TestReleaseOnTheWayOutIsBounded: when Run's ctx ends and the catalog
// hangs as the lease is given back, Run returns within ReleaseTimeout
// (half the TTL, at most 5 s), saying it gave up, instead of waiting a
// whole TTL (before: the release had the TTL as its timeout). So too for
// the lookup after an interrupted acquire.
func TestReleaseOnTheWayOutIsBounded(t *testing.T) {
	for _, tc := range []struct {
		ttl, want time.Duration
	}{
		{time.Hour, MaxReleaseTimeout},
		{2 * time.Second, time.Second},
	} {
		t.Run(tc.ttl.String()+"/leading", func(t *testing.T) {
			cfg := Config{TTL: tc.ttl}
			ev := callbacks(&cfg)
			log := &testkit.SyncBuffer{}
			cfg.Logger = slog.New(slog.NewTextHandler(log, nil))
			cat := &hangingCatalog{Leaser: newFake(), limit: tc.want, calls: make(chan string, 4)}
			e, err := New(cat, "lock", "a", cfg)
			if err != nil {
				t.Fatal(err)
			}
			if got := e.ReleaseTimeout(); got != tc.want {
				t.Fatalf("ReleaseTimeout() = %v, want %v", got, tc.want)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := runUntilDone(t, e, ctx)
			recv(t, "election", ev.elected)
			cancel()
			if call := recv(t, "the release", cat.calls); call != "Release" {
				t.Fatalf("catalog call %q, want Release", call)
			}
			awaitReturn(t, done)
			cat.mu.Lock()
			given := cat.given
			cat.mu.Unlock()
			if given > tc.want {
				t.Fatalf("the release was given %v, want at most %v", given, tc.want)
			}
			if !strings.Contains(log.String(), "release gave up") {
				t.Fatalf("no log saying the release gave up:\n%s", log)
			}
		})
		t.Run(tc.ttl.String()+"/interrupted acquire", func(t *testing.T) {
			cfg := Config{TTL: tc.ttl}
			ev := callbacks(&cfg)
			log := &testkit.SyncBuffer{}
			cfg.Logger = slog.New(slog.NewTextHandler(log, nil))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			cat := &hangingCatalog{Leaser: &cutAcquire{Leaser: newFake(), cancel: cancel}, limit: tc.want, calls: make(chan string, 4)}
			e, err := New(cat, "lock", "a", cfg)
			if err != nil {
				t.Fatal(err)
			}
			done := runUntilDone(t, e, ctx)
			if call := recv(t, "the lookup", cat.calls); call != "Leases" {
				t.Fatalf("catalog call %q, want Leases", call)
			}
			awaitReturn(t, done)
			if !strings.Contains(log.String(), "gave up") {
				t.Fatalf("no log saying the lookup gave up:\n%s", log)
			}
			select {
			case l := <-ev.elected:
				t.Fatalf("elected with %+v", l)
			default:
			}
		})
	}
}

// leaserBackend is a Leaser the election tests run on.
type leaserBackend struct {
	name string
	open func(t *testing.T) switchboard.Leaser
}

func leaserBackends() []leaserBackend {
	return []leaserBackend{
		{"fake", func(*testing.T) switchboard.Leaser { return newFake() }},
		{"sqlite", func(t *testing.T) switchboard.Leaser { return testkit.OpenSQLite(t).(switchboard.Leaser) }},
		{"postgres", func(t *testing.T) switchboard.Leaser {
			d, err := switchboard.ParseDSN(pgtest.Schema(t, testDSN))
			if err != nil {
				t.Fatal(err)
			}
			cat, err := postgres.Open(context.Background(), d, switchboard.Options{Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cat.Close() })
			return cat
		}},
	}
}

// TestInterruptedAcquireThatTookTheLeaseIsReleased: an acquire that takes
// the lease at the catalog but fails for the caller (Run's ctx ended, the
// reply was lost) leaves no token to release with. Run looks the lease up
// by its identity and releases it, so another contender takes it at once
// in a new term instead of a TTL (an hour here) later.
func TestInterruptedAcquireThatTookTheLeaseIsReleased(t *testing.T) {
	for _, b := range leaserBackends() {
		t.Run(b.name, func(t *testing.T) {
			leaser := b.open(t)
			cfg := Config{TTL: time.Hour}
			ev := callbacks(&cfg)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			cut := &cutAcquire{Leaser: leaser, cancel: cancel, commit: true, acquired: make(chan switchboard.Lease, 1)}
			e, err := New(cut, "lock", "a", cfg)
			if err != nil {
				t.Fatal(err)
			}
			awaitReturn(t, runUntilDone(t, e, ctx))
			first := recv(t, "the acquire that took the lease", cut.acquired)
			select {
			case l := <-ev.elected:
				t.Fatalf("elected with %+v", l)
			default:
			}
			expectReleased(t, leaser, first)
		})
	}
}

// TestInterruptedAcquireLeavesAnotherHolderAlone: the lookup after an
// interrupted acquire releases only a lease held under this identity; one
// held by another contender is left as it is.
func TestInterruptedAcquireLeavesAnotherHolderAlone(t *testing.T) {
	for _, b := range leaserBackends() {
		t.Run(b.name, func(t *testing.T) {
			leaser := b.open(t)
			held, err := leaser.Acquire(context.Background(), "lock", "b", time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			cfg := Config{TTL: time.Hour}
			callbacks(&cfg)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			e, err := New(&cutAcquire{Leaser: leaser, cancel: cancel}, "lock", "a", cfg)
			if err != nil {
				t.Fatal(err)
			}
			awaitReturn(t, runUntilDone(t, e, ctx))
			if _, err := leaser.Renew(context.Background(), held); err != nil {
				t.Fatalf("the other holder's lease after the interrupted acquire: %v, want it still held", err)
			}
			if _, err := leaser.Acquire(context.Background(), "lock", "c", time.Hour); !errors.Is(err, switchboard.ErrLeaseHeld) {
				t.Fatalf("a third contender's acquire: %v, want ErrLeaseHeld", err)
			}
		})
	}
}

// expectReleased checks that the lease "lock" was released: another
// contender ("b") takes it at once, not when it expires, in a term after
// first's.
func expectReleased(t *testing.T, leaser switchboard.Leaser, first switchboard.Lease) {
	t.Helper()
	l, err := leaser.Acquire(context.Background(), "lock", "b", time.Minute)
	if err != nil {
		t.Fatalf("another contender's acquire: %v, want the lease released", err)
	}
	if l.Token <= first.Token {
		t.Fatalf("next holder got token %d, want more than %d (a new term)", l.Token, first.Token)
	}
}
