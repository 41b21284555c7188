package hub

import (
	"slices"
	"strings"
)

// The mirror's order by name then id, which every new watcher's snapshot
// follows. It is kept as a sorted slice that is brought up to date only
// when a watcher asks for it, in time proportional to the mirror plus
// k log k for the k entries added or renamed since: a steady catalog costs a
// new watcher one pass, never a sort of the whole mirror.

// reposition queues e (new, or renamed) for its place in the order.
func (h *Hub) reposition(e *entry) {
	if !e.reorder {
		e.reorder = true
		h.moved = append(h.moved, e)
		h.tidyOrder()
	}
}

func byNameID(a, b *entry) int {
	if c := strings.Compare(a.inst.Name, b.inst.Name); c != 0 {
		return c
	}
	return strings.Compare(a.inst.ID, b.inst.ID)
}

// sorted returns the entries of the mirror by name then id (h.mu held).
// The slice is the hub's: the caller reads it under h.mu and keeps none of
// it.
func (h *Hub) sorted() []*entry {
	if len(h.moved) == 0 && h.dropped == 0 {
		return h.order
	}
	out := make([]*entry, 0, len(h.entries))
	for _, e := range h.order {
		if !e.gone && !e.reorder { // else deleted, or renamed and waiting in moved
			out = append(out, e)
		}
	}
	moved := h.moved[:0]
	for _, e := range h.moved {
		e.reorder = false
		if !e.gone {
			moved = append(moved, e)
		}
	}
	// Entries arrive mostly in order (a snapshot is read sorted): pdqsort
	// finishes an ordered run in one pass.
	slices.SortFunc(moved, byNameID)
	if len(moved) > 0 {
		kept := out
		out = make([]*entry, 0, len(h.entries))
		i := 0
		for _, e := range kept {
			for i < len(moved) && byNameID(moved[i], e) < 0 {
				out = append(out, moved[i])
				i++
			}
			out = append(out, e)
		}
		out = append(out, moved[i:]...)
	}
	clear(h.moved[:cap(h.moved)])
	h.order, h.moved, h.dropped = out, h.moved[:0], 0
	if cap(h.moved) > 1024 {
		h.moved = nil // the first snapshot's, or a burst's
	}
	return out
}

// tidyOrder merges the queued entries once they outnumber the mirror, so
// that a hub no new watcher asks for its order keeps neither deleted
// entries nor an ever-growing queue: amortised O(log n) per change.
func (h *Hub) tidyOrder() {
	if n := len(h.moved) + h.dropped; n > 1024 && n > len(h.entries) {
		h.sorted()
	}
}

// checkOrder reports whether the order holds exactly the mirror's entries,
// sorted (tests).
func (h *Hub) checkOrder() bool {
	o := h.sorted()
	return len(o) == len(h.entries) && slices.IsSortedFunc(o, byNameID) &&
		!slices.ContainsFunc(o, func(e *entry) bool { return h.entries[e.inst.ID] != e })
}

// runs builds the order of a first snapshot streamed in parts (stream.go)
// while it is read: each part's new entries come sorted as a run, and runs
// of equal length merge as they arrive (a binary counter), so after the
// last part only one merge per run left remains, O(n) in all, instead of a
// sort of the whole mirror.
type runs [][]*entry

// add takes a run sorted by byNameID.
func (r *runs) add(run []*entry) {
	*r = append(*r, run)
	for s := *r; len(s) >= 2 && len(s[len(s)-2]) <= len(s[len(s)-1]); s = *r {
		*r = append(s[:len(s)-2], mergeRuns(s[len(s)-2], s[len(s)-1]))
	}
}

// merged returns every run merged into one.
func (r runs) merged() []*entry {
	var out []*entry
	for i := len(r) - 1; i >= 0; i-- {
		out = mergeRuns(r[i], out)
	}
	return out
}

func mergeRuns(a, b []*entry) []*entry {
	if len(a) == 0 {
		return b
	}
	if len(b) == 0 {
		return a
	}
	out := make([]*entry, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		if byNameID(b[j], a[i]) < 0 {
			out = append(out, b[j])
			j++
		} else {
			out = append(out, a[i])
			i++
		}
	}
	out = append(out, a[i:]...)
	return append(out, b[j:]...)
}
