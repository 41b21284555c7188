package checks

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/switchboard-io/switchboard"
)

// probeLoop probes in's check every interval, the first time at a random
// point of the first interval, so that the probes of many checks spread
// over time instead of bunching at the top of each second.
func (r *Runner) probeLoop(ctx context.Context, l *loop, in switchboard.Instance) {
	c := *in.Check
	kind := c.Kind()
	status, since := in.Health.Status, in.Health.Since
	var run streak
	// next is the slot waited for: the first at a random point of the
	// first interval, which sets this check's phase.
	next := time.Now().Add(rand.N(c.Interval))
	timer := time.NewTimer(time.Until(next))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		// Probes keep to their own schedule (interval after interval from
		// a random phase) rather than to the end of the last probe, so
		// they do not drift into step with one another; a probe held up
		// (a slow write of its last result) skips to the next slot of its
		// own phase, so that checks held up together do not resume
		// together.
		next = next.Add(c.Interval)
		if now := time.Now(); next.Before(now) {
			next = next.Add(now.Sub(next).Truncate(c.Interval) + c.Interval)
		}
		timer.Reset(time.Until(next))
		r.mu.Lock()
		ok := r.holds(l.shard)
		r.mu.Unlock()
		if !ok {
			return
		}
		start := time.Now()
		res := r.opts.Prober.Probe(ctx, c)
		end := time.Now()
		if ctx.Err() != nil {
			// Stopped during the probe (the shard was given up): its
			// result is not this runner's to record.
			return
		}
		r.opts.Metrics.probed(kind, end.Sub(start), res)
		if r.opts.probed != nil {
			r.opts.probed(r.opts.Identity, in.ID, start, end)
		}
		if to := run.next(c, status, res.Status); to != "" {
			stored, err := r.setHealth(ctx, in.ID, to, res.Output)
			switch {
			case errors.Is(err, switchboard.ErrNotFound):
				return
			case err != nil:
				if ctx.Err() == nil {
					r.log.Warn("checks: recording a status change failed; retrying after the next probe", "id", in.ID, "status", to, "err", err)
				}
				continue
			}
			r.opts.Metrics.changed(kind, to)
			r.log.Info("checks: status changed", "id", in.ID, "name", in.Name, "from", status, "to", to, "output", res.Output)
			status, since = to, stored.Health.Since
		}
		if status == switchboard.StatusCritical && !since.IsZero() && r.catalogNow().Sub(since) >= c.DeregisterAfter {
			if r.deregister(ctx, in, since) {
				return
			}
		}
	}
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

// heartbeat renews the rows whose liveness is their check's alone
// (MetadataCheckOnly) among those this runner probes, each a third of
// its TTL apart, in one call per round. A row whose check the policy
// refuses is not renewed: it expires.
func (r *Runner) heartbeat(ctx context.Context) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		var ids []string
		r.mu.Lock()
		for id, l := range r.loops {
			if l.renew && now.Sub(l.lastBeat) >= l.every && r.holds(l.shard) {
				ids = append(ids, id)
				l.lastBeat = now
			}
		}
		r.mu.Unlock()
		if len(ids) == 0 {
			continue
		}
		for chunk := range slices.Chunk(ids, switchboard.MaxHeartbeatIDs) {
			if _, err := r.cat.Heartbeat(ctx, chunk...); err != nil && ctx.Err() == nil {
				r.log.Warn("checks: heartbeating check-only rows failed", "rows", len(chunk), "err", err)
				r.mu.Lock()
				for _, id := range chunk {
					if l := r.loops[id]; l != nil {
						l.lastBeat = time.Time{}
					}
				}
				r.mu.Unlock()
			}
		}
	}
}
