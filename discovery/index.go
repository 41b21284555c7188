package discovery

import (
	"sync/atomic"

	"github.com/switchboard-io/switchboard"
)

// Change is one instance's transition in the cache. Old is nil when the
// instance was added, New is nil when it was removed; both are set for an
// update. The instances are the cache's own: do not modify them.
type Change struct {
	Old, New *switchboard.Instance
}

// writer applies events to the working version of the indexes, in time
// proportional to the change (O(log n) per index the instance is in), and
// publishes versions. Only the cache's goroutine uses it.
type writer struct {
	ep    uint64 // nodes and buckets of this epoch are unpublished: changed in place
	ids   tree[idEntry]
	all   tree[*switchboard.Instance]
	names tree[*bucket]
	types tree[*bucket]
	caps  tree[*bucket]
	in    *interner

	changes []Change // since the last publish
	pending int      // events since the last publish
	stale   bool     // an error event came, and no synced since
	err     error    // that error
}

func newWriter() *writer { return &writer{ep: 1, in: newInterner()} }

// apply applies one event to the working version.
func (w *writer) apply(ev *switchboard.Event) {
	w.pending++
	switch ev.Kind {
	case switchboard.EventAdded, switchboard.EventUpdated:
		w.put(&ev.Instance)
	case switchboard.EventRemoved:
		w.remove(ev.Instance.ID)
	case switchboard.EventError:
		w.stale, w.err = true, ev.Err
	case switchboard.EventSynced:
		w.stale, w.err = false, nil
	}
}

func (w *writer) put(in *switchboard.Instance) {
	h := hashID(in.ID)
	old := lookupID(&w.ids, h, in.ID)
	p := w.in.acquire(in)
	if old != nil {
		// Leave the buckets p is not in; in the others p replaces old in
		// place, unless the name (the buckets' order) changed.
		renamed := old.Name != p.Name
		if renamed {
			w.all.delete(old, w.ep, cmpNameID)
			w.leave(&w.names, old.Name, old)
		}
		if renamed || old.Type != p.Type {
			w.leave(&w.types, old.Type, old)
		}
		for _, c := range old.Capabilities {
			if renamed || !p.HasCapability(c) {
				w.leave(&w.caps, c, old)
			}
		}
	}
	w.ids.set(idEntry{h, p}, w.ep, cmpIDEntry)
	w.all.set(p, w.ep, cmpNameID)
	w.join(&w.names, p.Name, p, false)
	w.join(&w.types, p.Type, p, false)
	for _, c := range p.Capabilities {
		w.join(&w.caps, c, p, true)
	}
	if old != nil {
		w.in.release(old)
	}
	w.changes = append(w.changes, Change{Old: old, New: p})
}

func (w *writer) remove(id string) {
	h := hashID(id)
	old := lookupID(&w.ids, h, id)
	if old == nil {
		return
	}
	w.ids.delete(idEntry{h, old}, w.ep, cmpIDEntry)
	w.all.delete(old, w.ep, cmpNameID)
	w.leave(&w.names, old.Name, old)
	w.leave(&w.types, old.Type, old)
	for _, c := range old.Capabilities {
		w.leave(&w.caps, c, old)
	}
	w.in.release(old)
	w.changes = append(w.changes, Change{Old: old})
}

// mine returns b if it belongs to the current epoch, or a new version of
// it (same members, cursor carried over) that does and replaces it in idx.
func (w *writer) mine(idx *tree[*bucket], b *bucket) *bucket {
	if b.epoch == w.ep {
		return b
	}
	nb := &bucket{key: b.key, epoch: w.ep, set: b.set, rr: b.rr}
	idx.set(nb, w.ep, cmpBucket)
	return nb
}

// join puts p into the bucket key of idx; capability buckets get a
// round-robin cursor.
func (w *writer) join(idx *tree[*bucket], key string, p *switchboard.Instance, cursor bool) {
	b, ok := find(idx, key, bucketKey)
	if !ok {
		b = &bucket{key: key, epoch: w.ep}
		if cursor {
			b.rr = new(atomic.Uint64)
		}
		idx.set(b, w.ep, cmpBucket)
	} else {
		b = w.mine(idx, b)
	}
	b.set.set(p, w.ep, cmpNameID)
}

// leave takes p out of the bucket key of idx, and the bucket out of idx
// when p was its last member.
func (w *writer) leave(idx *tree[*bucket], key string, p *switchboard.Instance) {
	b, ok := find(idx, key, bucketKey)
	if !ok || !b.set.has(p, cmpNameID) {
		return
	}
	if b.set.n == 1 {
		idx.delete(b, w.ep, cmpBucket)
		return
	}
	w.mine(idx, b).set.delete(p, w.ep, cmpNameID)
}

// snapshot returns the working version as a Snapshot and starts a new
// epoch, so that nothing it holds is changed again.
func (w *writer) snapshot() *Snapshot {
	s := &Snapshot{ids: w.ids, all: w.all, names: w.names, types: w.types, caps: w.caps, stale: w.stale, err: w.err}
	w.ep++
	w.pending = 0
	return s
}
