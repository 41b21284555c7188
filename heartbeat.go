package switchboard

// The heartbeat loop behind Bootstrap: one per (catalog, interval) in a
// process, renewing its registrations together and running the reaper.

import (
	"context"
	"log/slog"
	"reflect"
	"slices"
	"sync"
	"time"
)

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
	drain := r.draining
	r.mu.Unlock()
	if drain {
		if err := r.setDraining(ctx, true); err != nil {
			r.log.Warn("registered again, but draining it again failed", "id", in.ID, "err", err)
		}
	}
	r.reregs.Add(1)
	r.log.Warn("registration missing from catalog; registered again", "id", in.ID, "name", in.Name)
}
