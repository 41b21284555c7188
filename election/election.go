// Package election elects one leader among the processes contending for a
// named lease of a switchboard.Leaser (both SQL catalogs), for singleton
// roles such as the module status publisher or a compactor.
//
// Safety does not rest on clocks agreeing: the lease expires by the
// catalog's clock, and a leader steps down by its own monotonic clock, a
// margin before the lease could expire counted from the moment it sent its
// last successful acquire or renew. A stalled process, a slow catalog or a
// wall-clock jump can cost leadership, never give two leaders.
//
// A lease given back on the way out is given back within ReleaseTimeout
// (at most 5 s, and no more than half the TTL): a catalog that hangs then
// costs the other contenders one TTL, as if the process had been killed,
// and never holds up the return of Run. An acquire cut short by the end of
// Run's ctx may have taken the lease at the catalog all the same, with the
// reply lost; Run then looks the lease up (Leaser.Leases) and gives it back
// if it is held under this identity.
package election

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-io/switchboard"
)

// Defaults of Config, as for Kubernetes leader election.
const (
	DefaultTTL        = 15 * time.Second
	DefaultRetryEvery = 2 * time.Second
)

// MaxReleaseTimeout bounds the release of a lease on the way out; see
// Elector.ReleaseTimeout.
const MaxReleaseTimeout = 5 * time.Second

// Config tunes an Elector. Zero values take the defaults.
type Config struct {
	// TTL is the lease duration (default 15 s).
	TTL time.Duration
	// RenewEvery is the leader's renewal period (default TTL/3).
	RenewEvery time.Duration
	// RetryEvery is how often a follower tries to acquire (default 2 s or
	// TTL/3, whichever is shorter). A leader retries a failed renewal after
	// the shorter of RetryEvery and RenewEvery.
	RetryEvery time.Duration
	// Margin is how long before the lease could expire a leader whose
	// renewal is unconfirmed steps down (default TTL/5): it covers the
	// scheduling delay of the step-down and clock-rate drift.
	Margin time.Duration
	// OnElected is called in its own goroutine when this contender becomes
	// leader. ctx is cancelled when leadership ends (stop, lost lease, or
	// an unconfirmed renewal); the callback must then return promptly. A
	// lease whose acquire succeeds after Run's ctx has ended does not make
	// this contender leader: it is released, and OnElected is not called.
	OnElected func(ctx context.Context, l switchboard.Lease)
	// OnLost is called when leadership ends, after OnElected has returned
	// and before the lease is released or contended for again.
	OnLost func()
	// Logger receives the elector's logs (default slog.Default()).
	Logger *slog.Logger
}

func (c Config) withDefaults() (Config, error) {
	if c.TTL < 0 || c.RenewEvery < 0 || c.RetryEvery < 0 || c.Margin < 0 {
		return c, fmt.Errorf("election: %w: durations must not be negative", switchboard.ErrInvalid)
	}
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.RenewEvery == 0 {
		c.RenewEvery = c.TTL / 3
	}
	if c.RetryEvery == 0 {
		c.RetryEvery = min(DefaultRetryEvery, c.TTL/3)
	}
	if c.Margin == 0 {
		c.Margin = c.TTL / 5
	}
	if c.TTL < time.Millisecond {
		// A Leaser refuses such a lease (ErrInvalid): Run would retry it
		// forever, as often as TTL/3 allows.
		return c, fmt.Errorf("election: %w: TTL (%s) must be at least 1ms", switchboard.ErrInvalid, c.TTL)
	}
	if c.RenewEvery+c.Margin >= c.TTL {
		return c, fmt.Errorf("election: %w: RenewEvery (%s) plus Margin (%s) must be shorter than TTL (%s)",
			switchboard.ErrInvalid, c.RenewEvery, c.Margin, c.TTL)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

// Elector contends for one lease under one identity.
type Elector struct {
	leaser   switchboard.Leaser
	name     string
	identity string
	cfg      Config
	log      *slog.Logger

	running atomic.Bool // a Run is contending

	mu      sync.Mutex
	lease   switchboard.Lease
	leading bool
	until   time.Time // local (monotonic): when the term ends unless a renewal is confirmed
}

// New returns an elector for the lease name. identity is stored whole
// (never truncated): it must be unique per process, e.g. the full pod name.
// name and identity are checked as every Leaser checks them
// (switchboard.ValidateLease: 1–253 and 1–1,024 bytes of UTF-8 without
// NUL), and the TTL must be at least a millisecond.
func New(leaser switchboard.Leaser, name, identity string, cfg Config) (*Elector, error) {
	if leaser == nil {
		return nil, fmt.Errorf("election: %w: nil Leaser", switchboard.ErrInvalid)
	}
	if err := switchboard.ValidateLease(name, identity); err != nil {
		return nil, fmt.Errorf("election: %w", err)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Elector{leaser: leaser, name: name, identity: identity, cfg: cfg,
		log: cfg.Logger.With("lease", name, "identity", identity)}, nil
}

// Run contends with New's arguments until ctx ends; see Elector.Run.
func Run(ctx context.Context, leaser switchboard.Leaser, name, identity string, cfg Config) error {
	e, err := New(leaser, name, identity, cfg)
	if err != nil {
		return err
	}
	return e.Run(ctx)
}

// Leader reports whether this elector leads now, and its lease. It says
// false from the step-down deadline on, even before Run has got round to
// stepping down.
func (e *Elector) Leader() (switchboard.Lease, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.lease, e.leading && time.Now().Before(e.until)
}

// Run contends for the lease until ctx ends, leading whenever it holds it.
// When ctx ends while leading, it steps down and releases the lease so
// another contender takes over at once. When ctx ends while an acquire is
// under way and the acquire succeeds all the same, Run does not lead
// (OnElected and OnLost are not called) and releases that lease at once;
// so too with a lease acquired too late to lead safely (held, not led,
// until the next try) when ctx ends before that try, and with a lease an
// acquire took at the catalog although it failed or was cut short by the
// end of ctx (the reply lost): Run then lists the leases and releases this
// one if the catalog says this identity holds it. Each of these releases
// is bounded by ReleaseTimeout, after which Run logs that it gave up (the
// lease then expires a TTL later) and returns.
// It returns nil when ctx ends. It returns an error when an acquire fails
// in a way no retry can mend (the Leaser refuses the lease as invalid,
// switchboard.ErrInvalid, or its catalog was closed, switchboard.ErrClosed),
// and at once when another Run of e is still running: two Runs under one
// identity would both be granted the lease, two leaders.
func (e *Elector) Run(ctx context.Context) error {
	if !e.running.CompareAndSwap(false, true) {
		return fmt.Errorf("election: lease %q: Run called while another Run of this Elector is running", e.name)
	}
	defer e.running.Store(false)
	for ctx.Err() == nil {
		var late *switchboard.Lease // acquired too late to lead: held, not led
		unsure := false             // the acquire failed, but may have taken the lease all the same
		start := time.Now()
		actx, cancel := context.WithTimeout(ctx, e.cfg.TTL-e.cfg.Margin)
		l, err := e.leaser.Acquire(actx, e.name, e.identity, e.cfg.TTL)
		cancel()
		switch {
		case err == nil && ctx.Err() != nil:
			// Stopped while the acquire was under way: a caller that has
			// cancelled is not to be elected, and the lease goes back at
			// once instead of keeping the others waiting a TTL.
			e.release(ctx, l)
			return nil
		case err == nil && time.Since(start) < e.cfg.TTL-e.cfg.Margin:
			e.lead(ctx, l, start)
			continue
		case err == nil:
			e.log.Warn("election: lease acquired too late to lead safely; retrying", "took", time.Since(start))
			late = &l
		case errors.Is(err, switchboard.ErrLeaseHeld):
		case ctx.Err() != nil:
			// Stopped during the acquire: it may have committed at the
			// catalog with the reply lost.
			unsure = !errors.Is(err, switchboard.ErrInvalid) && !errors.Is(err, switchboard.ErrClosed)
		case errors.Is(err, switchboard.ErrInvalid), errors.Is(err, switchboard.ErrClosed):
			// Retrying cannot help: say what is wrong instead of warning
			// forever.
			return fmt.Errorf("election: acquire lease %q: %w", e.name, err)
		default:
			// A timeout or a lost connection may hide a lease taken: the
			// next acquire takes it over (same holder), unless ctx ends
			// first.
			unsure = true
			e.log.Warn("election: acquire failed", "err", err)
		}
		select {
		case <-ctx.Done():
			switch {
			case late != nil:
				// Stopped before the retry that would have led with it:
				// give it back rather than keep the others waiting a TTL.
				e.release(ctx, *late)
			case unsure:
				e.releaseHeld(ctx)
			}
		case <-time.After(e.cfg.RetryEvery):
		}
	}
	return nil
}

type renewal struct {
	lease switchboard.Lease
	start time.Time
	err   error
}

// lead runs one leadership term of the lease l, acquired by a request sent
// at start, until it ends.
func (e *Elector) lead(ctx context.Context, l switchboard.Lease, start time.Time) {
	deadline := start.Add(e.cfg.TTL - e.cfg.Margin)
	e.mu.Lock()
	e.lease, e.leading, e.until = l, true, deadline
	e.mu.Unlock()
	e.log.Info("election: elected", "token", l.Token)

	lctx, cancel := context.WithCancel(ctx)
	// The term's own timer ends the leader's context at the deadline by
	// itself, even when the loop below is held up (a logger blocked on a
	// full pipe, a starved goroutine): only a renewal the loop confirms in
	// time moves it.
	watchdog := time.AfterFunc(time.Until(deadline), cancel)
	defer watchdog.Stop()
	done := make(chan struct{})
	go func(l switchboard.Lease) {
		defer close(done)
		if e.cfg.OnElected != nil {
			e.cfg.OnElected(lctx, l)
		}
	}(l)

	next := time.NewTimer(e.cfg.RenewEvery)
	defer next.Stop()
	results := make(chan renewal, 1)
	inflight := false
	release := true
	reason := ""
loop:
	for {
		select {
		case <-ctx.Done():
			reason = "stopped"
			break loop
		case <-lctx.Done():
			reason = "renewal not confirmed before the lease could expire"
			if ctx.Err() != nil {
				reason = "stopped"
			}
			break loop
		case <-next.C:
			if inflight {
				continue
			}
			inflight = true
			// The renewal runs beside this loop, so a catalog that never
			// answers cannot hold the step-down back.
			go func(l switchboard.Lease, deadline time.Time) {
				rctx, cancel := context.WithDeadline(ctx, deadline)
				defer cancel()
				start := time.Now()
				nl, err := e.leaser.Renew(rctx, l)
				results <- renewal{nl, start, err}
			}(l, deadline)
		case r := <-results:
			inflight = false
			switch {
			case r.err == nil:
				if !watchdog.Stop() {
					// The deadline passed first: the term is over.
					reason = "renewal not confirmed before the lease could expire"
					break loop
				}
				l = r.lease
				deadline = r.start.Add(e.cfg.TTL - e.cfg.Margin)
				watchdog.Reset(time.Until(deadline))
				next.Reset(e.cfg.RenewEvery)
				e.mu.Lock()
				e.lease, e.until = l, deadline
				e.mu.Unlock()
			case errors.Is(r.err, switchboard.ErrLeaseLost):
				reason, release = "lease lost", false
				break loop
			default:
				e.log.Warn("election: renew failed; retrying until the lease could expire", "err", r.err)
				next.Reset(min(e.cfg.RetryEvery, e.cfg.RenewEvery))
			}
		}
	}
	cancel()
	e.mu.Lock()
	e.leading = false
	e.mu.Unlock()
	<-done
	if e.cfg.OnLost != nil {
		e.cfg.OnLost()
	}
	e.log.Info("election: stepped down", "reason", reason, "token", l.Token)
	if release {
		e.release(ctx, l)
	}
}

// ReleaseTimeout is how long a release on the way out may take: half the
// TTL, at most MaxReleaseTimeout. It is the deadline of the Leaser calls
// (Release, and Leases when an acquire's outcome is unknown), which every
// catalog of this module honours. The call is not abandoned to run on
// past it: a Release landing late could free a later term of this same
// identity (an acquire by the holder keeps the token), two leaders.
func (e *Elector) ReleaseTimeout() time.Duration {
	return min(e.cfg.TTL/2, MaxReleaseTimeout)
}

// releaseContext bounds a release by ReleaseTimeout, whether or not ctx
// has ended.
func (e *Elector) releaseContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), e.ReleaseTimeout())
}

// release gives l back, best effort, so that another contender takes it
// at once instead of at expiry.
func (e *Elector) release(ctx context.Context, l switchboard.Lease) {
	rctx, cancel := e.releaseContext(ctx)
	defer cancel()
	e.releaseWithin(rctx, l)
}

func (e *Elector) releaseWithin(rctx context.Context, l switchboard.Lease) {
	if err := e.leaser.Release(rctx, l); err != nil {
		e.log.Warn("election: release "+failed(rctx)+"; the lease will expire", "timeout", e.ReleaseTimeout(), "token", l.Token, "err", err)
	}
}

// failed is the word a log uses for a release step under rctx that
// failed: "gave up" when rctx ended (ReleaseTimeout), "failed" otherwise.
func failed(rctx context.Context) string {
	if rctx.Err() != nil {
		return "gave up"
	}
	return "failed"
}

// releaseHeld releases the lease if the catalog says this identity holds
// it: after an acquire that failed or was cut short, which may have taken
// it with the reply lost. The token read with it makes the release exact:
// a term begun since (another holder's) is left alone (ErrLeaseLost).
func (e *Elector) releaseHeld(ctx context.Context) {
	rctx, cancel := e.releaseContext(ctx)
	defer cancel()
	leases, err := e.leaser.Leases(rctx)
	if err != nil {
		e.log.Warn("election: looking up the lease after an interrupted acquire "+failed(rctx)+"; if that acquire took it, it will expire",
			"timeout", e.ReleaseTimeout(), "err", err)
		return
	}
	for _, l := range leases {
		if l.Name == e.name && l.Holder == e.identity {
			e.log.Info("election: the catalog lists the lease under this identity after an interrupted acquire; releasing it", "token", l.Token)
			e.releaseWithin(rctx, l)
			return
		}
	}
}
