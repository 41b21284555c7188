package checks

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-io/switchboard"
)

// manageShards keeps this runner's membership lease and its fair share of
// the shard leases until ctx ends, then gives them back.
func (r *Runner) manageShards(ctx context.Context) {
	if r.leaser == nil {
		return
	}
	every := r.opts.LeaseTTL / 3
	for {
		wait := every - rand.N(every/10+1)
		if next := r.balance(ctx); next > 0 && next < wait {
			wait = next
		}
		select {
		case <-ctx.Done():
			r.releaseAll(ctx)
			return
		case <-time.After(wait):
		}
	}
}

// expirySlack is how long after another runner's lease could expire a
// runner looks again, so that the catalog's clock has passed it.
const expirySlack = 20 * time.Millisecond

// balance runs one round: renew the membership lease, count the live
// runners, renew the shards held, give back those past the fair share or
// take free ones up to it. It returns how soon another runner's lease
// could expire (0: none known): the next round comes then if that is
// sooner than the usual period, so that a killed runner's shards are
// taken over within a lease TTL of its last renewal.
func (r *Runner) balance(ctx context.Context) (next time.Duration) {
	ttl, id := r.opts.LeaseTTL, r.opts.Identity
	// Every call is bounded, so that a catalog that does not answer holds
	// no round up past the shards' deadlines.
	call := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, ttl-r.margin) }
	cctx, cancel := call()
	_, err := r.leaser.Acquire(cctx, memberLease(id), id, ttl)
	cancel()
	if err != nil && ctx.Err() == nil {
		r.log.Warn("checks: renewing this runner's membership lease failed", "err", err)
	}
	before := time.Now()
	cctx, cancel = call()
	now, err := r.cat.Now(cctx)
	cancel()
	if err == nil {
		r.offset.Store(int64(now.Sub(before.Add(time.Since(before) / 2))))
	}
	var leases []switchboard.Lease
	if err == nil {
		cctx, cancel = call()
		leases, err = r.leaser.Leases(cctx)
		cancel()
	}
	r.renewAll(ctx)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("checks: reading the leases failed; keeping the shards held", "err", err)
		}
		return 0
	}
	live, taken, soonest := count(leases, id, now)
	if !soonest.IsZero() {
		next = max(soonest.Sub(now)-time.Since(before)+expirySlack, expirySlack)
	}
	share := (r.opts.Shards + live - 1) / live
	held := r.Shards()
	if len(held) > share {
		// Give back the highest: the others, counting the same way, take
		// them at their next round.
		for _, i := range held[share:] {
			r.drop(ctx, i, true)
		}
		return next
	}
	var free []int
	for i := 0; i < r.opts.Shards; i++ {
		if !taken[i] && !slices.Contains(held, i) {
			free = append(free, i)
		}
	}
	rand.Shuffle(len(free), func(a, b int) { free[a], free[b] = free[b], free[a] })
	for _, i := range free {
		if len(held) >= share || ctx.Err() != nil {
			break
		}
		start := time.Now()
		cctx, cancel := call()
		l, err := r.leaser.Acquire(cctx, shardLease(i), id, ttl)
		cancel()
		switch {
		case err == nil && time.Since(start) < ttl-r.margin && ctx.Err() == nil:
			r.take(ctx, i, l, start)
			held = append(held, i)
		case err == nil:
			r.release(ctx, l)
		case !errors.Is(err, switchboard.ErrLeaseHeld) && ctx.Err() == nil:
			r.log.Warn("checks: acquiring a shard failed", "shard", i, "err", err)
		}
	}
	return next
}

// renewAll renews the shards held, several at once; a shard whose lease
// is lost is dropped at once, one whose renewal fails otherwise is kept
// until its deadline (its watchdog stops its checks then).
// count reads the runners' leases alive at now: how many runners are
// live (this one, id, included), the shards others hold, and the soonest
// any of the others' leases could expire (zero: none).
func count(leases []switchboard.Lease, id string, now time.Time) (live int, taken map[int]bool, soonest time.Time) {
	taken = map[int]bool{}
	self := false
	for _, l := range leases {
		member := strings.HasPrefix(l.Name, memberLeasePrefix)
		shard, isShard := strings.CutPrefix(l.Name, shardLeasePrefix)
		if !member && !isShard || l.Holder == "" || !l.ExpiresAt.After(now) {
			continue
		}
		if member {
			live++
			self = self || l.Holder == id
		}
		if l.Holder == id {
			continue
		}
		if soonest.IsZero() || l.ExpiresAt.Before(soonest) {
			soonest = l.ExpiresAt
		}
		if i, err := strconv.Atoi(shard); isShard && err == nil {
			taken[i] = true
		}
	}
	if !self {
		live++
	}
	return live, taken, soonest
}

func (r *Runner) renewAll(ctx context.Context) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, renewers)
	for _, i := range r.Shards() {
		r.mu.Lock()
		s := r.owned[i]
		r.mu.Unlock()
		if s == nil {
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			r.renew(ctx, i, s)
		}()
	}
	wg.Wait()
}

// renewers bounds the renewals in flight at once.
const renewers = 8

func (r *Runner) renew(ctx context.Context, i int, s *shard) {
	start := time.Now()
	rctx, cancel := context.WithDeadline(ctx, s.until)
	l, err := r.leaser.Renew(rctx, s.lease)
	cancel()
	switch {
	case err == nil:
		r.extend(ctx, i, s, l, start)
	case errors.Is(err, switchboard.ErrLeaseLost):
		r.log.Warn("checks: a shard's lease was lost; its checks stop", "shard", i)
		r.drop(ctx, i, false)
	case ctx.Err() == nil:
		r.log.Warn("checks: renewing a shard failed; retrying until its lease could expire", "shard", i, "err", err)
	}
}

// take starts the checks of shard i, whose lease l was acquired by a
// request sent at start.
func (r *Runner) take(ctx context.Context, i int, l switchboard.Lease, start time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := &shard{lease: l, until: start.Add(r.opts.LeaseTTL - r.margin)}
	s.ctx, s.cancel = context.WithCancel(ctx)
	// The shard's own timer ends its checks at the deadline, whatever the
	// manager is doing: only a renewal confirmed in time moves it.
	s.timer = time.AfterFunc(time.Until(s.until), s.cancel)
	r.owned[i] = s
	r.opts.Metrics.addShards(1)
	for id, in := range r.instances {
		if ShardOf(id, r.opts.Shards) == i {
			r.stopLoop(id) // one its watchdog ended, if any
			r.startLoop(ctx, in)
		}
	}
}

// extend moves shard i's deadline after a renewal sent at start; if the
// deadline passed first, the shard's checks have stopped and start again.
func (r *Runner) extend(ctx context.Context, i int, s *shard, l switchboard.Lease, start time.Time) {
	r.mu.Lock()
	if r.owned[i] != s {
		r.mu.Unlock()
		return
	}
	if !s.timer.Stop() || s.ctx.Err() != nil {
		delete(r.owned, i)
		r.opts.Metrics.addShards(-1)
		r.mu.Unlock()
		if time.Since(start) < r.opts.LeaseTTL-r.margin {
			r.take(ctx, i, l, start)
		}
		return
	}
	s.lease = l
	s.until = start.Add(r.opts.LeaseTTL - r.margin)
	s.timer.Reset(time.Until(s.until))
	r.mu.Unlock()
}

// drop stops the checks of shard i, waits for their probes to end, and
// then, if release, gives its lease back.
func (r *Runner) drop(ctx context.Context, i int, release bool) {
	r.mu.Lock()
	s := r.owned[i]
	if s == nil {
		r.mu.Unlock()
		return
	}
	delete(r.owned, i)
	r.opts.Metrics.addShards(-1)
	s.timer.Stop()
	s.cancel()
	var done []<-chan struct{}
	for id, l := range r.loops {
		if l.shard == i {
			done = append(done, r.stopLoop(id))
		}
	}
	r.mu.Unlock()
	for _, d := range done {
		<-d
	}
	if release {
		r.release(ctx, s.lease)
	}
}

// releaseAll gives every lease back on the way out.
func (r *Runner) releaseAll(ctx context.Context) {
	for _, i := range r.Shards() {
		r.drop(ctx, i, true)
	}
	rctx, cancel := r.releaseContext(ctx)
	defer cancel()
	for _, l := range r.memberLeases(rctx) {
		if err := r.leaser.Release(rctx, l); err != nil {
			r.log.Warn("checks: giving back the membership lease failed; it will expire", "err", err)
		}
	}
}

// memberLeases finds this runner's membership lease (with its token).
func (r *Runner) memberLeases(ctx context.Context) []switchboard.Lease {
	leases, err := r.leaser.Leases(ctx)
	if err != nil {
		r.log.Warn("checks: reading the leases on the way out failed; the membership lease will expire", "err", err)
		return nil
	}
	var out []switchboard.Lease
	for _, l := range leases {
		if l.Name == memberLease(r.opts.Identity) && l.Holder == r.opts.Identity {
			out = append(out, l)
		}
	}
	return out
}

// releaseContext bounds a release by half the lease TTL (at most 5s),
// whether or not ctx has ended.
func (r *Runner) releaseContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), min(r.opts.LeaseTTL/2, 5*time.Second))
}

func (r *Runner) release(ctx context.Context, l switchboard.Lease) {
	rctx, cancel := r.releaseContext(ctx)
	defer cancel()
	if err := r.leaser.Release(rctx, l); err != nil && !errors.Is(err, switchboard.ErrLeaseLost) {
		r.log.Warn("checks: giving a shard back failed; it will expire", "lease", l.Name, "err", err)
	}
}
