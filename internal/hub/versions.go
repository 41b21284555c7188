package hub

import (
	"slices"
	"time"

	"github.com/switchboard-io/switchboard"
)

// Versions. Every state of an instance carries the catalog's version of
// it (Instance.Revision: the log position of the change that wrote it),
// and every deletion its own position (Change.Seq). The mirror takes a
// state only when it is newer than the one it holds, whichever path
// brings it and in whatever order the paths deliver: a snapshot or a
// resync read while changes commit, a log read that joins each entry with
// the row as it is now, a write's own publish, a push from another
// process. So a watcher never sees an instance go back to an older state,
// and no path has to wait for another to keep the order: the log position
// is a cursor (what has been read), never the mirror's version.
//
// A deletion leaves a tombstone with its position while a state older
// than it may still arrive: while a full resync or a snapshot read is in
// flight (its read may predate the deletion), or while the deletion lies above the cursor's
// Seq (a publish or push of an older state may still be on its way; at
// or below Seq one is ignored, since a log read already brought the row's
// state as of that read). Tombstones are dropped as the cursor passes
// them, so they cost memory only for the deletions of the last moments.
//
// A source that does not track versions (Revision 0) gets what it got
// before versions existed: states applied as they come, a publish applied
// only when it directly follows the cursor.
//
// A source whose revisions are not its log positions (Change.Revision on
// its deletions, Revision on its reads) has each deletion compared, and
// its tombstone kept, by that revision, and the tombstones dropped as the
// revision its log reads reflect passes them.

// gapWarn is how long a missing change number (a writer that drew it has
// not committed) is waited for before the hub logs it; Stats names the
// oldest one at any time.
const gapWarn = 5 * time.Second

// put makes in (owned by the hub from now on) the state of its instance
// when it is newer than the mirror's, and returns the entry that holds
// the instance's state afterwards: in's, or the mirror's own when that is
// as new or newer (a newer last_seen of the same version and content is
// taken as a renewal). nil when a tombstone says the instance was deleted
// after in was read.
func (h *Hub) put(in *switchboard.Instance, now time.Time) *entry {
	if !h.force && in.Revision != 0 {
		if e := h.entries[in.ID]; e != nil && e.inst.Revision != 0 {
			switch {
			case in.Revision < e.inst.Revision:
				return e
			case in.Revision == e.inst.Revision && sameContent(e.inst, in):
				h.renew(e, in.LastSeen, now)
				return e
			}
			// The same version with other content: a write that bypassed
			// the log (another tool's plain SQL), which only a read of the
			// row itself brings. The row is the truth.
		} else if e == nil {
			if t, ok := h.tombs[in.ID]; ok && in.Revision <= t {
				return nil
			}
		}
	}
	delete(h.tombs, in.ID)
	return h.upsert(in, now)
}

// deleteAt applies a deletion at log position rev (0: unknown) unless the
// mirror holds a newer state (the row was created again after it), and
// leaves a tombstone.
func (h *Hub) deleteAt(id string, rev int64, reason switchboard.Reason) {
	if e := h.entries[id]; e != nil && !h.force && rev != 0 && e.inst.Revision > rev {
		return
	}
	h.tomb(id, rev)
	h.delete(id, reason, rev)
}

// tomb records that id was deleted at or after revision rev (0: unknown).
func (h *Hub) tomb(id string, rev int64) {
	if rev > 0 && rev > h.tombs[id] {
		if h.tombs == nil {
			h.tombs = make(map[string]int64)
		}
		h.tombs[id] = rev
	}
}

// versioned reports whether every change of cs carries versions: an
// upsert its row's revision (a deletion always has its position).
func versioned(cs []Change) bool {
	for i := range cs {
		if cs[i].Found && cs[i].Instance.Revision == 0 {
			return false
		}
	}
	return true
}

// version is a deletion's version: its Revision, or its Seq where the
// source's revisions are its log positions.
func (c *Change) version() int64 {
	if c.Revision != 0 {
		return c.Revision
	}
	return c.Seq
}

// applyChanges applies log entries in seq order, read at catalog time now;
// entries at or below the cursor's Seq were read already (with the row as
// it was at that read, at least as new) and are skipped.
func (h *Hub) applyChanges(cs []Change, now time.Time) {
	for _, c := range cs {
		if c.Seq <= h.seq {
			continue
		}
		h.touch(c.ID)
		switch {
		case c.Deleted:
			h.deleteAt(c.ID, c.version(), c.Reason)
		case c.Found:
			in := c.Instance
			h.put(&in, now)
		}
	}
}

// advance moves the cursor to what a log read ended at (Batch's Seq, Read
// and Missing), never back, notes since when each missing number has been
// waited for, and drops the tombstones no older state can undo any more.
func (h *Hub) advance(seq, read int64, missing []int64) {
	if seq < h.seq {
		return // a publish moved it on meanwhile
	}
	h.seq, h.read = seq, max(read, seq, h.read)
	h.missing = h.missing[:0]
	for _, m := range missing {
		if m > seq {
			h.missing = append(h.missing, m)
		}
	}
	h.noteMissing()
	h.pruneTombs()
}

// gap is a missing change number being waited for.
type gap struct {
	since  time.Time // local time it was first found missing
	warned bool
}

// noteMissing keeps gaps in step with missing, and warns once per number
// that has been missing for gapWarn.
func (h *Hub) noteMissing() {
	if len(h.missing) == 0 {
		clear(h.gaps)
		return
	}
	if h.gaps == nil {
		h.gaps = make(map[int64]*gap)
	}
	for m := range h.gaps {
		if _, ok := slices.BinarySearch(h.missing, m); !ok {
			delete(h.gaps, m)
		}
	}
	now := time.Now()
	for _, m := range h.missing {
		g := h.gaps[m]
		if g == nil {
			h.gaps[m] = &gap{since: now}
			continue
		}
		if !g.warned && now.Sub(g.since) >= gapWarn {
			g.warned = true
			h.log.Warn("change log: waiting for a change whose writer has not committed; later changes are delivered meanwhile",
				"seq", m, "waiting", now.Sub(g.since).Round(time.Millisecond))
		}
	}
}

// oldestMissing returns the lowest number still missing and how long it
// has been waited for (h.mu held).
func (h *Hub) oldestMissing() (int64, time.Duration) {
	if len(h.missing) == 0 {
		return 0, 0
	}
	m := h.missing[0]
	if g := h.gaps[m]; g != nil {
		return m, time.Since(g.since)
	}
	return m, 0
}

// pruneTombs drops the tombstones at or below the cursor's Seq (the
// revision the log reads reflect, for a source whose revisions are not its
// positions), unless a resync or a snapshot read is in flight (its read
// may predate any of them).
func (h *Hub) pruneTombs() {
	if h.touched != nil || h.reading > 0 || len(h.tombs) == 0 {
		return
	}
	upTo := h.seq
	if h.rev != 0 {
		upTo = h.rev
	}
	for id, rev := range h.tombs {
		if rev <= upTo {
			delete(h.tombs, id)
		}
	}
}

// cursor is the hub's position in the log (h.mu held).
func (h *Hub) cursor() Cursor {
	return Cursor{Seq: h.seq, Read: max(h.read, h.seq), Missing: slices.Clone(h.missing), Last: h.last}
}
