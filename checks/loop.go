package checks

import (
	"container/heap"
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/switchboard-io/switchboard"
)

// tick is the grid probes start on: a check due at t is probed at the
// first tick at or after t, so that the probes due within one tick start
// together. A server probing a thousand checks a second then wakes a
// hundred times a second instead of a thousand, each wake costing the Go
// runtime's scheduler and system monitor more than the probes it starts;
// ten probes every 10 ms are still no herd.
const tick = 10 * time.Millisecond

// onTick is t rounded up to the runner's tick grid, as a time since
// the grid's origin.
func (r *Runner) onTick(t time.Time) time.Duration {
	d := t.Sub(r.epoch)
	if rem := d % tick; rem != 0 {
		d += tick - rem
	}
	return d
}

// schedule starts the probes of the checks as they come due until ctx
// ends: one goroutine and one timer for all the checks, rather than a
// goroutine and a timer for each, which a server of ten thousand checks
// would wake a thousand times a second and whose stacks the garbage
// collector would shrink between probes for every probe to grow again.
// The probes run on workers (start).
func (r *Runner) schedule(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var due []*loop
	for {
		r.mu.Lock()
		now := time.Now()
		for len(r.queue.e) > 0 && r.queue.e[0].at <= now.Sub(r.epoch) {
			l := r.queue.e[0].l
			// Probes keep to their own schedule (interval after interval
			// from a random phase) rather than to the end of the last
			// probe, so they do not drift into step with one another; a
			// check whose last probe is still running (held up by a slow
			// write of its result) skips to the next slot of its own
			// phase, so that checks held up together do not resume
			// together.
			if !l.busy {
				l.busy = true
				due = append(due, l)
			}
			every := l.in.Check.Interval
			l.next = l.next.Add(every)
			if l.next.Before(now) {
				l.next = l.next.Add(now.Sub(l.next).Truncate(every) + every)
			}
			r.queue.e[0].at = r.onTick(l.next)
			heap.Fix(&r.queue, 0)
		}
		wait := time.Hour
		if len(r.queue.e) > 0 {
			wait = r.queue.e[0].at - time.Since(r.epoch)
		}
		r.mu.Unlock()
		for i, l := range due {
			r.start(ctx, l)
			due[i] = nil
		}
		due = due[:0]
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-r.wake:
		}
	}
}

// enqueue schedules l's first probe at a random point of its first
// interval, which sets the check's phase, so that the probes of many
// checks spread over time instead of bunching at the top of each second
// (r.mu held).
func (r *Runner) enqueue(l *loop) {
	l.next = time.Now().Add(rand.N(l.in.Check.Interval))
	heap.Push(&r.queue, entry{at: r.onTick(l.next), l: l})
	if l.index == 0 {
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
}

// dequeue stops scheduling l's probes and renewals (r.mu held).
func (r *Runner) dequeue(l *loop) {
	if l.index >= 0 {
		heap.Remove(&r.queue, l.index)
	}
	if l.beat >= 0 {
		heap.Remove(&r.beats, l.beat)
	}
}

// workerIdle is how long a worker waits for another probe before it
// ends.
const workerIdle = 10 * time.Second

// start hands l's probe to a worker waiting for one, or to a new worker
// if none is. Workers live on from probe to probe, so their stacks, grown
// by a probe's dial and exchange, are there for the next; the pool grows
// to the probes running at once (a probe waiting out its timeout holds
// its worker) and shrinks as workers find nothing to do.
func (r *Runner) start(ctx context.Context, l *loop) {
	select {
	case r.work <- l:
	default:
		go r.worker(ctx, l)
	}
}

// worker runs l's probe, then the probes start hands it, until it has
// waited workerIdle for one or ctx ends.
func (r *Runner) worker(ctx context.Context, l *loop) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		r.probe(l)
		idle.Reset(workerIdle)
		select {
		case l = <-r.work:
		case <-idle.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// probe runs one probe of l's check and records its result.
func (r *Runner) probe(l *loop) {
	defer r.idle(l)
	ctx := l.ctx
	r.mu.Lock()
	ok := r.holds(l.shard)
	r.mu.Unlock()
	if !ok || ctx.Err() != nil {
		return
	}
	c, in := *l.in.Check, l.in
	kind := c.Kind()
	start := time.Now()
	res := r.opts.Prober.Probe(ctx, c)
	end := time.Now()
	if ctx.Err() != nil {
		// Stopped during the probe (the shard was given up): its result
		// is not this runner's to record.
		return
	}
	r.opts.Metrics.probed(kind, end.Sub(start), res)
	if r.opts.probed != nil {
		r.opts.probed(r.opts.Identity, in.ID, start, end)
	}
	if to := l.run.next(c, l.status, res.Status); to != "" {
		stored, err := r.setHealth(ctx, in.ID, to, res.Output)
		switch {
		case errors.Is(err, switchboard.ErrNotFound):
			r.end(l)
			return
		case err != nil:
			if ctx.Err() == nil {
				r.log.Warn("checks: recording a status change failed; retrying after the next probe", "id", in.ID, "status", to, "err", err)
			}
			return
		}
		r.opts.Metrics.changed(kind, to)
		r.log.Info("checks: status changed", "id", in.ID, "name", in.Name, "from", l.status, "to", to, "output", res.Output)
		l.status, l.since = to, stored.Health.Since
	}
	if l.status == switchboard.StatusCritical && !l.since.IsZero() && r.catalogNow().Sub(l.since) >= c.DeregisterAfter {
		if r.deregister(ctx, in, l.since) {
			r.end(l)
		}
	}
}

// end stops probing l's check, whose row is gone; the watch's removal
// forgets the loop.
func (r *Runner) end(l *loop) {
	r.mu.Lock()
	r.dequeue(l)
	r.mu.Unlock()
}

// idle marks l's probe ended; if l was stopped meanwhile, its done
// closes.
func (r *Runner) idle(l *loop) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l.busy = false
	if l.stopped {
		close(l.done)
	}
}

// queue orders loops by when they are next due (container/heap): their
// probes (r.queue), or their rows' renewals (r.beats). It holds the times
// beside the loops, so that ordering reads no loop.
type queue struct {
	e   []entry
	pos func(*loop) *int // where a loop keeps its index in this queue (-1: not in it)
}

// entry is a loop in a queue and when it is next due, as a time since
// the runner's grid origin.
type entry struct {
	at time.Duration
	l  *loop
}

func (q *queue) Len() int           { return len(q.e) }
func (q *queue) Less(i, j int) bool { return q.e[i].at < q.e[j].at }
func (q *queue) Swap(i, j int) {
	q.e[i], q.e[j] = q.e[j], q.e[i]
	*q.pos(q.e[i].l), *q.pos(q.e[j].l) = i, j
}
func (q *queue) Push(x any) {
	e := x.(entry)
	*q.pos(e.l) = len(q.e)
	q.e = append(q.e, e)
}
func (q *queue) Pop() any {
	e := q.e[len(q.e)-1]
	q.e[len(q.e)-1] = entry{}
	*q.pos(e.l) = -1
	q.e = q.e[:len(q.e)-1]
	return e
}

// streak counts a check's last probes alike: failed ones, or good ones.
type streak struct{ fails, oks int }

// next counts a probe's result res and returns the status it moves the
// check's status to ("": none): critical after c.Failures failed probes
// in a row; from critical, res after c.Successes good ones in a row;
// between passing and warning at once. No status is passing already.
func (s *streak) next(c switchboard.Check, status, res switchboard.Status) switchboard.Status {
	if res == switchboard.StatusCritical {
		s.fails, s.oks = s.fails+1, 0
		if status != switchboard.StatusCritical && s.fails >= c.Failures {
			return switchboard.StatusCritical
		}
		return ""
	}
	s.fails, s.oks = 0, s.oks+1
	switch {
	case status == switchboard.StatusCritical && s.oks < c.Successes:
		return ""
	case status == "" && res == switchboard.StatusPassing, status == res:
		return ""
	}
	return res
}

// setHealth records a status change (the catalog cuts the output to
// switchboard.MaxHealthOutput bytes).
func (r *Runner) setHealth(ctx context.Context, id string, s switchboard.Status, output string) (switchboard.Instance, error) {
	return r.hs.SetHealth(ctx, id, switchboard.Health{Status: s, Output: output})
}

// deregister deletes a row critical since since, for longer than its
// check's DeregisterAfter (watchers see the removal's reason
// check_critical on a catalog that records it, a Remover); it reports
// whether the row is gone.
func (r *Runner) deregister(ctx context.Context, in switchboard.Instance, since time.Time) bool {
	var err error
	if rm, ok := r.cat.(switchboard.Remover); ok {
		err = rm.Remove(ctx, in.ID, switchboard.ReasonCheckCritical)
	} else {
		err = r.cat.Deregister(ctx, in.ID)
	}
	if err != nil && !errors.Is(err, switchboard.ErrNotFound) {
		if ctx.Err() == nil {
			r.log.Warn("checks: deleting a row critical past its deregister_after failed; retrying after the next probe", "id", in.ID, "err", err)
		}
		return false
	}
	r.log.Info("checks: deleted a row critical past its deregister_after", "id", in.ID, "name", in.Name,
		"critical_since", since, "deregister_after", in.Check.DeregisterAfter)
	return true
}

// refused records that the policy refuses in's check: the instance turns
// critical (once), and its check is not probed.
func (r *Runner) refused(ctx context.Context, in switchboard.Instance, err error) {
	out := "not probed: " + err.Error()
	if in.Health.Status == switchboard.StatusCritical && in.Health.Output == out {
		return
	}
	r.log.Warn("checks: a check's target is refused by the policy; not probing it", "id", in.ID, "err", err)
	if _, err := r.setHealth(ctx, in.ID, switchboard.StatusCritical, out); err != nil && ctx.Err() == nil && !errors.Is(err, switchboard.ErrNotFound) {
		r.log.Warn("checks: recording a refused check failed", "id", in.ID, "err", err)
	}
}

// setRow sets whether the runner renews l's row, and how often, from in
// (r.mu held): a row to renew is in r.beats, due at once when it enters.
func (r *Runner) setRow(l *loop, in switchboard.Instance) {
	ttl := in.TTL
	if ttl <= 0 {
		ttl = switchboard.DefaultTTL
	}
	l.every = ttl / 3
	renew := in.Metadata[MetadataCheckOnly] == "true" && !l.refused
	switch {
	case renew && l.beat < 0:
		heap.Push(&r.beats, entry{at: time.Since(r.epoch), l: l})
	case !renew && l.beat >= 0:
		heap.Remove(&r.beats, l.beat)
	}
}

// beatEvery is how often heartbeat looks for rows due a renewal.
const beatEvery = 250 * time.Millisecond

// heartbeat renews the rows whose liveness is their check's alone
// (MetadataCheckOnly) among those this runner probes, each a third of
// its TTL apart, in one call per round. A row whose check the policy
// refuses is not renewed: it expires.
func (r *Runner) heartbeat(ctx context.Context) {
	t := time.NewTicker(beatEvery)
	defer t.Stop()
	var held []bool
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var ids []string
		r.mu.Lock()
		now := time.Since(r.epoch)
		held = held[:0]
		for i := range r.opts.Shards {
			held = append(held, r.holds(i))
		}
		for len(r.beats.e) > 0 && r.beats.e[0].at <= now {
			l := r.beats.e[0].l
			if held[l.shard] {
				ids = append(ids, l.in.ID)
				r.beats.e[0].at = now + l.every
			} else {
				// Its shard's lease is not confirmed now: look again
				// next round.
				r.beats.e[0].at = now + beatEvery
			}
			heap.Fix(&r.beats, 0)
		}
		r.mu.Unlock()
		for chunk := range slices.Chunk(ids, switchboard.MaxHeartbeatIDs) {
			if _, err := r.cat.Heartbeat(ctx, chunk...); err != nil && ctx.Err() == nil {
				r.log.Warn("checks: heartbeating check-only rows failed", "rows", len(chunk), "err", err)
				// Due again at once.
				r.mu.Lock()
				for _, id := range chunk {
					if l := r.loops[id]; l != nil && l.beat >= 0 {
						r.beats.e[l.beat].at = 0
						heap.Fix(&r.beats, l.beat)
					}
				}
				r.mu.Unlock()
			}
		}
	}
}
