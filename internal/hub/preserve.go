package hub

import (
	"container/heap"
	"time"

	"github.com/switchboard-io/switchboard"
)

// Self-preservation, as Eureka's renewal threshold: when a large part of the
// catalog stops renewing at once, the likelier cause is the network between
// those instances and the catalog (or a frozen host), not that they all died
// together, so their expirations are held rather than emptying every
// watcher's view.
//
// The hub judges renewals over a window, not the expirations of one check:
// instances registered by separate processes have deadlines spread over a
// heartbeat interval, so no single check sees many of them due. At every
// expiry check, with the renewals just read, an instance has missed its
// renewals when it has not renewed for half its TTL (a live one renews at
// least that often: heartbeat_interval ≤ ttl/2); instances this hub expired
// within their last TTL count as missed too. When more than the threshold
// fraction of those instances (live plus recently expired, at least
// SelfPreservationMin) missed, the hub engages: it logs at ERROR once, and
// holds the expiry of every instance that had already missed its renewals
// when it engaged. An instance that stops renewing later (a real crash
// during the hold) is not held and expires on time. The hold is judged
// again every preserveRecheck and released once the fraction is back under
// the threshold — the held instances renewed, or the reapers deleted their
// rows (at 2 × TTL, which no hold delays); a held instance that has still
// not renewed then gets half its TTL more (a resumed process renews within
// a heartbeat) and expires. Instances expired before it engaged stay removed
// until they renew (restoring them could flap).

// Defaults of self-preservation.
const (
	DefaultSelfPreservationThreshold = 0.5
	DefaultSelfPreservationMin       = 10
	preserveRecheck                  = time.Second
)

// preserve is the self-preservation state of a hub (guarded by Hub.mu).
type preserve struct {
	preserving     bool
	engagedAt      time.Time // catalog time
	preserveUntil  time.Time // local: next re-judgement
	heldItems      []item    // held entries' due items, out of the heap
	held           int       // entries held at the last check
	missed         int       // instances that missed their renewals at the last check
	preserveEvents int
}

// expire marks every entry past its due time as expired, unless
// self-preservation holds it.
func (h *Hub) expire(now time.Time) {
	var due []item
	for _, it := range h.heldItems {
		if h.valid(it) {
			due = append(due, it)
		}
	}
	h.heldItems = h.heldItems[:0]
	for {
		it, ok := h.top()
		if !ok || it.deadline.After(now) {
			break
		}
		heap.Pop(&h.dl)
		due = append(due, it)
	}
	if len(due) == 0 && !h.preserving {
		h.held = 0
		return
	}
	was := h.preserving
	h.judge(now)
	released := was && !h.preserving
	expired := false
	for _, it := range due {
		e := h.entries[it.id]
		if e.expired {
			continue // a second item of the same due time: expired once
		}
		// Held: it had already missed its renewals when the hold began.
		held := (h.preserving || released) && e.inst.LastSeen.Add(e.inst.TTL/2).Before(h.engagedAt)
		switch {
		case h.preserving && held:
			h.heldItems = append(h.heldItems, it)
			continue
		case released && held:
			// Most held instances renewed; this one gets half a TTL more
			// (its process may have resumed a moment ago), then expires.
			e.notBefore = now.Add(e.inst.TTL / 2)
			h.schedule(item{e.due(), e.inst.ID})
			continue
		}
		e.expired, e.expiredAt = true, now
		h.transition(e.inst, false, e.inst, true, switchboard.ReasonExpired, 0)
		expired = true
	}
	h.held = len(h.heldItems)
	if expired {
		// A renewal stamped before this read may commit after it: read
		// the renewals once more when such a commit must have landed.
		h.recheckAt = time.Now().Add(renewOverlap)
	}
}

// judge counts the instances that missed their renewals and engages or
// releases self-preservation.
func (h *Hub) judge(now time.Time) {
	missed, base := 0, 0
	for _, e := range h.entries {
		switch {
		case !e.expired:
			base++
			if now.Sub(e.inst.LastSeen) > e.inst.TTL/2 {
				missed++
			}
		case now.Sub(e.expiredAt) < e.inst.TTL:
			base++
			missed++
		}
	}
	h.missed = missed
	t, m := h.opts.SelfPreservationThreshold, h.opts.SelfPreservationMin
	on := t > 0 && m > 0 && base >= m && float64(missed) > t*float64(base)
	switch {
	case on && !h.preserving:
		h.preserving, h.engagedAt = true, now
		h.preserveEvents++
		h.log.Error("self-preservation: too many instances stopped renewing at once; holding their expirations",
			"missed", missed, "instances", base, "threshold", t)
	case !on && h.preserving:
		h.preserving = false
		h.log.Info("self-preservation off: renewals resumed or the rows were reaped", "missed", missed, "instances", base)
	}
	if h.preserving {
		h.preserveUntil = time.Now().Add(preserveRecheck)
	}
}
