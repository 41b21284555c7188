package switchboard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
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
}

// RegistrationStats counts what a registration's heartbeat loop did.
type RegistrationStats struct {
	Heartbeats      int64 // successful renewals
	Failures        int64 // renewals that failed (catalog unreachable)
	Reregistrations int64 // times the row was found gone and written again
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
	ttl := in.TTL
	if d, ok := cat.(TTLDefaulter); ok && ttl == 0 {
		ttl = d.DefaultTTL()
	}
	if ttl != 0 {
		if derive {
			opts.HeartbeatInterval = HeartbeatFor(ttl)
		}
		if err := ValidateHeartbeat("HeartbeatInterval", opts.HeartbeatInterval, ttl); err != nil {
			return nil, err
		}
	}
	r := &Registration{cat: cat, closed: make(chan struct{}), log: opts.Logger, reap: !opts.DisableReaper}
	if in.ID != "" {
		if !r.takeClaim(in.ID) {
			return nil, invalid(ErrInvalid, "id", in.ID, "is kept alive by another Registration of this process on this catalog: "+
				"Close that one first (two would overwrite each other's row, and closing either would delete it)")
		}
	}
	// With a default TTL the catalog does not tell, the check comes after
	// the write: keep what the id held before, to put it back if the check
	// fails.
	var prev *Instance
	if ttl == 0 && in.ID != "" {
		if p, err := cat.Get(ctx, in.ID); err == nil {
			prev = &p
		}
	}
	stored, err := cat.Register(ctx, in)
	if err != nil {
		r.dropClaim()
		return nil, err
	}
	if ttl == 0 {
		if derive {
			opts.HeartbeatInterval = HeartbeatFor(stored.TTL)
		}
		if err := ValidateHeartbeat("HeartbeatInterval", opts.HeartbeatInterval, stored.TTL); err != nil {
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
	return RegistrationStats{Heartbeats: r.heartbeats.Load(), Failures: r.failures.Load(), Reregistrations: r.reregs.Load()}
}

// Close stops the heartbeat and deletes the row. It is idempotent; a row
// already gone is not an error. It does not wait for a heartbeat in flight
// on a slow or unreachable catalog (the last registration of a loop cancels
// it), only for a re-registration of this row, which it cancels too; the
// deletion itself gives up after 10 s.
func (r *Registration) Close() error {
	r.once.Do(func() {
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

// reapEvery bounds the period of a process's reaper.
const reapEvery = 5 * time.Second

// beater renews every registration of one (catalog, interval) in a single
// Heartbeat call, and runs the process's reaper for that catalog while any
// of them wants it. Round-wide logs go to the first registration's logger,
// logs about one registration to its own.
type beater struct {
	key  beaterKey
	log  *slog.Logger
	mu   sync.Mutex
	regs map[*Registration]struct{}
	// ctx is the parent of every call the loop makes; the last
	// registration to leave cancels it, which also stops the loop, so its
	// Close does not wait for a heartbeat stuck on an unreachable catalog
	// (up to half the TTL).
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	// shared says the beater is in beaters, for every registration of its
	// key (false: it serves one registration of a catalog that cannot be
	// a map key).
	shared bool
}

type beaterKey struct {
	cat   Catalog
	every time.Duration
}

var (
	beatersMu sync.Mutex
	beaters   = map[beaterKey]*beater{}
)

func joinBeater(cat Catalog, opts BootstrapOptions, r *Registration) *beater {
	key := beaterKey{cat, opts.HeartbeatInterval}
	// A catalog whose dynamic type is not comparable (a value type holding
	// a slice, map or func, such as a decorator) cannot be a map key: its
	// registrations each get a loop of their own.
	shared := reflect.ValueOf(cat).Comparable()
	beatersMu.Lock()
	defer beatersMu.Unlock()
	var b *beater
	if shared {
		b = beaters[key]
	}
	if b == nil {
		b = &beater{key: key, log: opts.Logger, regs: map[*Registration]struct{}{},
			done: make(chan struct{}), shared: shared}
		b.ctx, b.cancel = context.WithCancel(context.Background())
		if shared {
			beaters[key] = b
		}
		go b.run()
	}
	b.mu.Lock()
	b.regs[r] = struct{}{}
	b.mu.Unlock()
	return b
}

func (b *beater) leave(r *Registration) {
	beatersMu.Lock()
	b.mu.Lock()
	delete(b.regs, r)
	last := len(b.regs) == 0
	b.mu.Unlock()
	if last && b.shared {
		delete(beaters, b.key)
	}
	beatersMu.Unlock()
	if last {
		b.cancel()
		<-b.done
		return
	}
	// The loop goes on for the others. A round in flight may be writing r
	// again: wait for that write (which r.closed cancels), so it cannot
	// land after Close deleted the row; any later round sees r.closed.
	r.rereg.Lock()
	r.rereg.Unlock() //nolint:staticcheck // waiting for the write in flight is the point
}

func (b *beater) run() {
	defer close(b.done)
	t := time.NewTicker(b.key.every)
	defer t.Stop()
	var failingSince, lastReap time.Time
	escalated := false
	healthySince := time.Now()
	grace := true // rows may still be inside their post-outage grace
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-t.C:
		}
		b.mu.Lock()
		regs := make(map[string]*Registration, len(b.regs))
		ids := make([]string, 0, len(b.regs))
		var maxTTL time.Duration
		minTTL := time.Duration(1<<63 - 1)
		reap := false
		for r := range b.regs {
			// ID and TTL only: a deep copy of every instance each round
			// would be 10,000 allocations a second in a large monolith.
			r.mu.Lock()
			id, ttl := r.inst.ID, r.inst.TTL
			r.mu.Unlock()
			regs[id] = r
			ids = append(ids, id)
			maxTTL = max(maxTTL, ttl)
			minTTL = min(minTTL, ttl)
			reap = reap || r.reap
		}
		b.mu.Unlock()

		// A renewal is worth landing until half the TTL has passed; a
		// shorter timeout turns a slow catalog into lost heartbeats. One
		// call renews at most MaxHeartbeatIDs ids, so a larger process
		// renews in several calls, each with its own deadline.
		timeout := max(b.key.every, maxTTL/2)
		var err error
		for chunk := range slices.Chunk(ids, MaxHeartbeatIDs) {
			if cerr := b.renew(timeout, chunk, regs); cerr != nil {
				err = cerr
			}
		}
		if b.ctx.Err() != nil {
			// The last registration left and cancelled the round in
			// flight: an orderly shutdown, not a failed heartbeat.
			return
		}
		switch {
		case err != nil:
			if failingSince.IsZero() {
				failingSince = time.Now()
			}
			failing := time.Since(failingSince)
			if failing > maxTTL && !escalated {
				escalated = true
				b.log.Error("heartbeat failing for longer than the TTL: peers will see these instances expire",
					"err", err, "registrations", len(ids), "failing_for", failing.Round(time.Millisecond), "ttl", maxTTL)
			} else {
				b.log.Warn("heartbeat failed", "err", err, "registrations", len(ids), "failing_for", failing.Round(time.Millisecond))
			}
		default:
			if !failingSince.IsZero() {
				b.log.Info("heartbeat recovered", "after", time.Since(failingSince).Round(time.Millisecond))
				failingSince, escalated, healthySince, grace = time.Time{}, false, time.Now(), true
			}
			// Reap about once per TTL (of the shortest registration here,
			// at most every 5 s): rows expire by their own TTL in every
			// watcher; the reaper only deletes them at 2 × TTL.
			if reap && time.Since(lastReap) >= max(min(minTTL, reapEvery), b.key.every) {
				lastReap = time.Now()
				ctx, cancel := context.WithTimeout(b.ctx, timeout)
				b.reap(ctx, time.Since(healthySince), &grace)
				cancel()
			}
		}
	}
}

// renew heartbeats one call's worth of ids (at most MaxHeartbeatIDs) and
// registers again those whose rows are gone. On failure it counts a failure
// for each of them (unless the last Close cancelled the call: that is a
// shutdown, not a failure) and returns the error.
func (b *beater) renew(timeout time.Duration, ids []string, regs map[string]*Registration) error {
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	missing, err := b.key.cat.Heartbeat(ctx, ids...)
	if err != nil {
		if b.ctx.Err() == nil {
			for _, id := range ids {
				regs[id].failures.Add(1)
			}
		}
		return err
	}
	gone := make(map[string]bool, len(missing))
	for _, id := range missing {
		gone[id] = true
	}
	for _, id := range ids {
		if r := regs[id]; gone[id] {
			b.reregister(ctx, r)
		} else {
			r.heartbeats.Add(1)
		}
	}
	return nil
}

// reap deletes the rows stale for twice their TTL, each only once the
// catalog has been reachable for that row's own TTL (ReapGrace). A
// GraceReaper does that in one call. Any other catalog is listed while rows
// may still be inside their grace (*grace); once this process has been
// reachable for the longest TTL listed, it reaps with Catalog.Reap and lists
// no more until the next outage.
func (b *beater) reap(ctx context.Context, healthyFor time.Duration, grace *bool) {
	var n int
	var err error
	if g, ok := b.key.cat.(GraceReaper); ok {
		n, err = g.ReapGrace(ctx, healthyFor)
	} else if *grace {
		var longest time.Duration
		n, longest, err = reapListed(ctx, b.key.cat, healthyFor)
		if err == nil && healthyFor >= longest {
			*grace = false
		}
	} else {
		n, err = b.key.cat.Reap(ctx, 0)
	}
	if err != nil && b.ctx.Err() == nil { // cancelled by the last Close: not a failure
		b.log.Warn("reap failed", "err", err)
	} else if n > 0 {
		b.log.Info("reaped stale registrations", "rows", n)
	}
}

// reregister writes a registration whose row is gone (reaped, restored
// catalog, restarted empty) again, keeping its id.
func (b *beater) reregister(ctx context.Context, r *Registration) {
	r.rereg.Lock()
	defer r.rereg.Unlock()
	select {
	case <-r.closed:
		return // closing: its row is supposed to be gone
	default:
	}
	// Close waits for this write: it cancels it rather than wait up to
	// half the TTL on a slow catalog.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	written := make(chan struct{})
	defer close(written)
	go func() {
		select {
		case <-r.closed:
			cancel()
		case <-written:
		}
	}()
	in := r.Instance()
	stored, err := b.key.cat.Register(ctx, in)
	if err != nil {
		select {
		case <-r.closed:
			return // cancelled by Close, which deletes the row
		default:
		}
		r.failures.Add(1)
		r.log.Warn("registration missing from catalog; registering again failed", "id", in.ID, "err", err)
		return
	}
	r.mu.Lock()
	r.inst = stored
	r.mu.Unlock()
	r.reregs.Add(1)
	r.log.Warn("registration missing from catalog; registered again", "id", in.ID, "name", in.Name)
}
