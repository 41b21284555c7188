package switchboard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// BootstrapOptions tune Bootstrap. Zero values take the defaults.
type BootstrapOptions struct {
	// HeartbeatInterval is how often LastSeen is renewed. It must be at
	// least MinHeartbeatInterval (10ms) and at most half the TTL
	// (ValidateHeartbeat). Zero derives it from the TTL as the CLI does
	// (HeartbeatFor): min(3 s, TTL/3), at least 10ms, where the TTL is the
	// instance's or, for an instance without one, the catalog's default as
	// stored; so a 2 s TTL alone heartbeats every 666ms.
	HeartbeatInterval time.Duration
	// DisableReaper turns off this process's reaper (reaping is idempotent
	// and safe in every process; it is on by default).
	DisableReaper bool
	// Logger receives the lifecycle logs (default slog.Default()).
	Logger *slog.Logger
	// DrainWait is how long Close keeps a drained instance registered
	// before it deregisters it, on a catalog that can drain (Drainer):
	// time for every watcher to take it out of rotation and for calls in
	// flight to finish. Zero is DefaultDrainWait (2 s); negative skips the
	// drain (Close deregisters at once).
	DrainWait time.Duration
}

// DefaultDrainWait is how long Close waits between draining and
// deregistering when BootstrapOptions.DrainWait is zero.
const DefaultDrainWait = 2 * time.Second

// RegistrationStats counts what a registration's heartbeat loop did.
type RegistrationStats struct {
	Heartbeats      int64 // successful renewals
	Failures        int64 // renewals that failed (catalog unreachable)
	Reregistrations int64 // times the row was found gone and written again
	// Server is the server the heartbeats go to now, for a catalog that
	// is a client of several (`switchboard serve` over an http:// DSN);
	// "" for others.
	Server string
}

// HeartbeatFor is the heartbeat interval Bootstrap (and the CLI) derives
// for a TTL when none is given: DefaultHeartbeatInterval (3 s), or a third
// of a TTL under 9 s, so that an instance survives two lost heartbeats,
// but never under MinHeartbeatInterval (10ms). Every TTL some interval
// fits (at least 20ms) then validates, and a shorter one is reported by
// ValidateHeartbeat as the TTL's error. A TTL of zero or less (the
// catalog's default, not known) gives DefaultHeartbeatInterval.
func HeartbeatFor(ttl time.Duration) time.Duration {
	if ttl <= 0 {
		return DefaultHeartbeatInterval
	}
	return max(MinHeartbeatInterval, min(DefaultHeartbeatInterval, ttl/3))
}

// Registration is a live entry in the catalog, kept alive by heartbeats.
// Close deregisters it.
type Registration struct {
	cat    Catalog
	b      *beater
	log    *slog.Logger
	reap   bool // this registration wants the process's reaper to run
	mu     sync.Mutex
	inst   Instance
	closed chan struct{}
	once   sync.Once
	err    error
	// draining is what the registration last asked Drain for: the
	// heartbeat loop drains a row it has to write again.
	draining  bool
	drainWait time.Duration
	// stopping is the DrainAndWait under way or done (nil before the
	// first and after an Undrain): Close and a server stopping on the same
	// signal share one drain and one wait instead of racing two.
	stopping *drainCall
	// claim is this registration's entry in claims (zero when it holds
	// none: a claim's catalog is never nil).
	claim claimKey
	// rereg is held while the heartbeat loop writes this registration
	// again, so Close can wait for that write (and only that) before it
	// deletes the row.
	rereg sync.Mutex

	heartbeats, failures, reregs atomic.Int64
}

// Bootstrap registers in, then keeps it alive until ctx ends or Close is
// called, when the row is deleted. It is the one call a service makes at
// start: registration, heartbeat and reaper.
//
// Every registration of a process on the same catalog and interval shares
// one heartbeat loop that renews them all in one round trip (a catalog
// value that is not comparable, and so cannot be told equal to another,
// gives each registration its own loop). A heartbeat
// that finds its row gone registers it again at once. Heartbeat failures
// log at WARN, and at ERROR once they have lasted longer than the TTL. The
// reaper deletes rows stale for twice their TTL, but each row only once the
// catalog has been reachable (since this process started or since its last
// failed heartbeat) for that row's own TTL, so that after an outage
// instances get the chance to heartbeat before anyone removes them.
//
// One id has at most one live Registration per catalog in a process: a
// Bootstrap with the id of a Registration on the same catalog whose Close
// has not returned is refused (an ErrInvalid "id" FieldError) before
// anything is stored. Two would overwrite each other's row, and closing
// either would delete the row the other still keeps alive. (A catalog that
// is not comparable cannot be told equal to another: it is not checked.)
func Bootstrap(ctx context.Context, cat Catalog, in Instance, opts BootstrapOptions) (*Registration, error) {
	if cat == nil {
		return nil, fmt.Errorf("bootstrap: %w: nil catalog", ErrInvalid)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	// The interval is checked against the TTL before anything is stored
	// (after the instance, whose errors come first): the instance's own, or
	// the catalog's default when it says which (TTLDefaulter); otherwise
	// against the TTL the catalog stored. What it must be whatever the TTL
	// (positive, at least MinHeartbeatInterval) is checked first. An
	// interval not given is derived from the same TTL.
	if _, err := Normalize(in); err != nil {
		return nil, err
	}
	derive := opts.HeartbeatInterval == 0
	if !derive {
		if err := checkInterval("HeartbeatInterval", opts.HeartbeatInterval); err != nil {
			return nil, err
		}
	}
	// fit derives the interval from ttl when none was given, and checks it.
	fit := func(ttl time.Duration) error {
		if derive {
			opts.HeartbeatInterval = HeartbeatFor(ttl)
		}
		return ValidateHeartbeat("HeartbeatInterval", opts.HeartbeatInterval, ttl)
	}
	ttl := in.TTL
	told := false // ttl is the default the catalog told
	if d, ok := cat.(TTLDefaulter); ok && ttl == 0 {
		ttl = d.DefaultTTL()
		told = ttl != 0
	}
	if ttl != 0 {
		if err := fit(ttl); err != nil {
			return nil, err
		}
	}
	r := &Registration{cat: cat, closed: make(chan struct{}), log: opts.Logger, reap: !opts.DisableReaper, drainWait: opts.DrainWait}
	if r.drainWait == 0 {
		r.drainWait = DefaultDrainWait
	}
	if in.ID != "" {
		if !r.takeClaim(in.ID) {
			return nil, invalid(ErrInvalid, "id", in.ID, "is kept alive by another Registration of this process on this catalog: "+
				"Close that one first (two would overwrite each other's row, and closing either would delete it)")
		}
	}
	// With a default TTL the catalog does not tell, the check comes after
	// the write: keep what the id held before, to put it back if the check
	// fails. So does it when the write got another default than the one
	// told (a remote catalog's servers behind one address, each with its
	// own default, or one restarted with another in between).
	var prev *Instance
	if (ttl == 0 || told) && in.ID != "" {
		if p, err := cat.Get(ctx, in.ID); err == nil {
			prev = &p
		}
	}
	stored, err := cat.Register(ctx, in)
	if err != nil {
		r.dropClaim()
		return nil, err
	}
	if ttl == 0 || told && stored.TTL != ttl {
		if err := fit(stored.TTL); err != nil {
			// Undone: a refused Bootstrap must not cost what was stored.
			if prev != nil {
				_, _ = cat.Register(ctx, *prev)
			} else {
				_ = cat.Deregister(ctx, stored.ID)
			}
			r.dropClaim()
			return nil, err
		}
	}
	if in.ID == "" {
		// The catalog chose the id: claim it now, so that a Bootstrap
		// given this id while r lives is refused too.
		// (It cannot be held: a live Registration's id is in the catalog,
		// which does not hand it out again.)
		r.takeClaim(stored.ID)
	}
	r.inst = stored
	r.b = joinBeater(cat, opts, r)
	opts.Logger.Info("registered", "id", stored.ID, "name", stored.Name, "type", stored.Type,
		"address", stored.Address, "ttl", stored.TTL, "heartbeat", opts.HeartbeatInterval)
	go func() {
		select {
		case <-ctx.Done():
			r.Close()
		case <-r.closed:
		}
	}()
	return r, nil
}

// Instance returns the instance as last stored.
func (r *Registration) Instance() Instance {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.inst.Clone()
}

// ID returns the instance id.
func (r *Registration) ID() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.inst.ID
}

// Stats returns the heartbeat counters.
func (r *Registration) Stats() RegistrationStats {
	st := RegistrationStats{Heartbeats: r.heartbeats.Load(), Failures: r.failures.Load(), Reregistrations: r.reregs.Load()}
	if s, ok := r.cat.(interface{ Server() string }); ok {
		st.Server = s.Server()
	}
	return st
}

// Drain takes the instance out of rotation (Drainer.Drain): it stays
// registered and heartbeating, and lookups, picks, the resolver, the pool
// and DNS stop sending it new traffic once they see the change. A row
// written again by the heartbeat loop (after it was reaped) is drained
// again. ErrUnsupported when the catalog cannot drain.
func (r *Registration) Drain(ctx context.Context) error { return r.setDraining(ctx, true) }

// Undrain puts a drained instance back into rotation.
func (r *Registration) Undrain(ctx context.Context) error { return r.setDraining(ctx, false) }

func (r *Registration) setDraining(ctx context.Context, draining bool) error {
	d, ok := r.cat.(Drainer)
	if !ok {
		return fmt.Errorf("drain %q: %w: the catalog cannot drain instances", r.ID(), errors.ErrUnsupported)
	}
	r.mu.Lock()
	r.draining = draining
	if !draining {
		r.stopping = nil // undrained: a later DrainAndWait drains again
	}
	r.mu.Unlock()
	stored, err := d.Drain(ctx, r.ID(), draining)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.inst = stored
	r.mu.Unlock()
	return nil
}

// Close stops sending the instance traffic, then deletes its row: on a
// catalog that can drain, it drains the instance first (unless Drain was
// called already) and waits BootstrapOptions.DrainWait (2 s by default) so that callers move away
// and calls in flight finish — the way to stop a service without failed
// calls. It is idempotent; a row already gone is not an error. It does not
// wait for a heartbeat in flight on a slow or unreachable catalog (the
// last registration of a loop cancels it), only for a re-registration of
// this row, which it cancels too; the drain and the deletion each give up
// after 10 s.
func (r *Registration) Close() error {
	r.once.Do(func() {
		r.drainBeforeClose()
		close(r.closed)
		r.b.leave(r)
		// The id is free for another Bootstrap once its row is deleted
		// (or the deletion failed), not before: that one's row must not
		// be deleted by this Close.
		defer r.dropClaim()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := r.cat.Deregister(ctx, r.ID()); err != nil && !errors.Is(err, ErrNotFound) {
			r.err = err
			r.log.Warn("deregistering failed: the row stays until it expires", "id", r.ID(), "name", r.inst.Name, "err", err)
			return
		}
		r.log.Info("deregistered", "id", r.ID(), "name", r.inst.Name)
	})
	return r.err
}

// DrainAndWait drains the instance and keeps it registered for the drain
// wait (BootstrapOptions.DrainWait), heartbeats going on, so that callers
// move away and calls in flight finish; then Close deregisters it at once.
// A server that must keep answering while its instance drains calls it
// before it stops serving. It does nothing when the drain wait is
// negative or the instance was drained already, and returns Drain's error
// (errors.ErrUnsupported on a catalog that cannot drain) without waiting.
// Callers at the same time (Close on the end of Bootstrap's context and a
// server stopping on the same signal) share one drain and one wait: the
// later ones wait for it and return its error.
func (r *Registration) DrainAndWait() error {
	r.mu.Lock()
	if c := r.stopping; c != nil {
		r.mu.Unlock()
		<-c.done // a second caller waits for the same drain to end
		return c.err
	}
	if r.drainWait < 0 || r.draining {
		r.mu.Unlock()
		return nil // no drain wanted, or drained before by the owner, who chose how long to wait
	}
	c := &drainCall{done: make(chan struct{})}
	r.stopping = c
	r.mu.Unlock()
	defer close(c.done)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if c.err = r.Drain(ctx); c.err != nil {
		return c.err
	}
	r.log.Info("drained; deregistering after the drain wait", "id", r.ID(), "drain_wait", r.drainWait)
	time.Sleep(r.drainWait)
	return nil
}

// drainCall is one DrainAndWait: done closes when it has returned err.
type drainCall struct {
	done chan struct{}
	err  error
}

// drainBeforeClose is Close's DrainAndWait: a catalog that cannot drain,
// or a drain that fails, goes straight to the deletion.
func (r *Registration) drainBeforeClose() {
	if err := r.DrainAndWait(); err != nil && !errors.Is(err, errors.ErrUnsupported) {
		r.log.Warn("draining before deregistering failed; deregistering now", "id", r.ID(), "err", err)
	}
}
