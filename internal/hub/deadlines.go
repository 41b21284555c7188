package hub

import (
	"container/heap"
	"slices"
	"time"
)

// Expiry scheduling: each live entry has one valid item in a min-heap of
// due times (its deadline, or the end of its post-outage grace); outdated
// items are dropped lazily and the heap is rebuilt when they pile up.

// refresh recomputes e's deadline after its LastSeen or TTL changed and
// schedules it. A renewed entry is revived here; a new entry already past its
// TTL starts expired; only expire ever expires a live entry.
//
// A live entry whose due time did not change (its post-outage grace
// outlasts the new deadline) keeps the item it has: a second valid item of
// the same due time would come due with it and expire the entry twice.
func (h *Hub) refresh(e *entry, now time.Time, isNew bool) {
	d := e.inst.LastSeen.Add(e.inst.TTL)
	if !isNew && d.Equal(e.deadline) {
		return
	}
	live, was := !isNew && !e.expired, e.due()
	e.deadline = d
	if now.After(d) {
		if isNew {
			e.expired = true
		} else if live && !e.due().Equal(was) {
			h.schedule(item{e.due(), e.inst.ID}) // its TTL shrank: due now (or after its grace)
		}
		return
	}
	e.expired = false
	if !live || !e.due().Equal(was) {
		h.schedule(item{e.due(), e.inst.ID})
	}
}

// schedule adds a deadline. Every renewal or update adds one and outdated
// ones are only dropped when they come to the top, so the heap is rebuilt
// from the entries when outdated items outnumber them: it stays bounded by
// the catalog, not by its history.
func (h *Hub) schedule(it item) {
	if h.bulk {
		h.dl = append(h.dl, it)
		return
	}
	heap.Push(&h.dl, it)
	if len(h.dl) <= 2*len(h.entries)+1024 {
		return
	}
	live := h.dl[:0]
	for _, x := range h.dl {
		if h.valid(x) {
			live = append(live, x)
		}
	}
	clear(h.dl[len(live):])
	h.dl = slices.Clip(live)
	if cap(h.dl) > 4*len(h.dl)+1024 {
		h.dl = append(deadlines(nil), h.dl...)
	}
	heap.Init(&h.dl)
}

// valid says whether a heap item is the entry's current due time.
func (h *Hub) valid(it item) bool {
	e := h.entries[it.id]
	return e != nil && !e.expired && e.due().Equal(it.deadline)
}

// top returns the earliest valid deadline, dropping outdated heap items.
func (h *Hub) top() (item, bool) {
	for h.dl.Len() > 0 {
		it := h.dl[0]
		if h.valid(it) {
			return it, true
		}
		heap.Pop(&h.dl)
	}
	return item{}, false
}

func (h *Hub) dueNow() bool {
	it, ok := h.top()
	return ok && !h.catalogNow().Before(it.deadline)
}

func (h *Hub) nextWake() (time.Time, bool) {
	var w time.Time
	it, ok := h.top()
	if ok {
		// A millisecond past the deadline, on the local monotonic clock.
		w = h.clockLocal.Add(it.deadline.Sub(h.clockNow) + time.Millisecond)
	}
	if h.preserving && (!ok || h.preserveUntil.Before(w)) {
		// Held entries are out of the heap: re-judge them once per
		// preserveRecheck.
		w, ok = h.preserveUntil, true
	}
	if !h.recheckAt.IsZero() && (!ok || h.recheckAt.Before(w)) {
		w, ok = h.recheckAt, true
	}
	return w, ok
}

type item struct {
	deadline time.Time
	id       string
}

type deadlines []item

func (d deadlines) Len() int           { return len(d) }
func (d deadlines) Less(i, j int) bool { return d[i].deadline.Before(d[j].deadline) }
func (d deadlines) Swap(i, j int)      { d[i], d[j] = d[j], d[i] }
func (d *deadlines) Push(x any)        { *d = append(*d, x.(item)) }
func (d *deadlines) Pop() any {
	old := *d
	it := old[len(old)-1]
	*d = old[:len(old)-1]
	return it
}
