package discovery

import (
	"sync/atomic"

	"github.com/switchboard-io/switchboard"
)

// Change is one instance's transition in the cache. Old is nil when the
// instance was added, New is nil when it was removed; both are set for an
// update. The instances share their slices and maps with the cache: do not
// modify them.
type Change struct {
	Old, New *switchboard.Instance
}

// change is a Change as the writer records it.
type change struct{ old, new *rec }

// public returns the change with its instances put back together.
func (c change) public() Change {
	var out Change
	if c.old != nil {
		in := c.old.instance()
		out.Old = &in
	}
	if c.new != nil {
		in := c.new.instance()
		out.New = &in
	}
	return out
}

// writer applies events to the working version of the indexes, in time
// proportional to the change (O(log n) per index the instance is in), and
// publishes versions. Only the cache's goroutine uses it.
type writer struct {
	ep    uint64 // nodes and buckets of this epoch are unpublished: changed in place
	ids   tree[idEntry]
	all   tree[*rec]
	names tree[keyed[*rec]]
	types tree[keyed[*rec]]
	caps  tree[keyed[member]]
	in    *interner

	changes []change // since the last publish
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
		renamed := old.sh.name != p.sh.name
		if renamed {
			w.all.delete(old, w.ep, cmpNameID)
			take(w, &w.names, old.sh.name, old, cmpNameID)
		}
		if renamed || old.sh.typ != p.sh.typ {
			take(w, &w.types, old.sh.typ, old, cmpNameID)
		}
		for _, c := range old.sh.caps {
			if renamed || !p.hasCapability(c) {
				leaveCap(w, c, old)
			}
		}
	}
	w.ids.set(idEntry{h, p}, w.ep, cmpIDEntry)
	w.all.set(p, w.ep, cmpNameID)
	join(w, &w.names, p.sh.name, p, cmpNameID)
	join(w, &w.types, p.sh.typ, p, cmpNameID)
	for _, c := range p.sh.caps {
		joinCap(w, c, p)
	}
	if old != nil {
		w.in.release(old)
	}
	w.changes = append(w.changes, change{old: old, new: p})
}

func (w *writer) remove(id string) {
	h := hashID(id)
	old := lookupID(&w.ids, h, id)
	if old == nil {
		return
	}
	w.ids.delete(idEntry{h, old}, w.ep, cmpIDEntry)
	w.all.delete(old, w.ep, cmpNameID)
	take(w, &w.names, old.sh.name, old, cmpNameID)
	take(w, &w.types, old.sh.typ, old, cmpNameID)
	for _, c := range old.sh.caps {
		leaveCap(w, c, old)
	}
	w.in.release(old)
	w.changes = append(w.changes, change{old: old})
}

// mine returns b if it belongs to the current epoch, or a new version of
// it (same members, slots and cursor carried over) that does and replaces
// it in idx.
func mine[T any](w *writer, idx *tree[keyed[T]], h uint64, b *bucket[T]) *bucket[T] {
	if b.epoch == w.ep {
		return b
	}
	nb := &bucket[T]{key: b.key, epoch: w.ep, set: b.set, rr: b.rr}
	if b.pool != nil {
		pool := *b.pool
		nb.pool = &pool
	}
	idx.set(keyed[T]{h, nb}, w.ep, cmpKeyed[T])
	return nb
}

// owned returns the bucket key of idx as a version of the current epoch:
// made, empty, when idx has none.
func owned[T any](w *writer, idx *tree[keyed[T]], key string) *bucket[T] {
	h := hashID(key)
	b := lookupBucket(idx, h, key)
	if b == nil {
		b = &bucket[T]{key: key, epoch: w.ep}
		idx.set(keyed[T]{h, b}, w.ep, cmpKeyed[T])
		return b
	}
	return mine(w, idx, h, b)
}

// take removes the element equal to x from the bucket key of idx and
// returns it, with the version of the bucket (of the current epoch) it was
// taken from; b is nil when x was the bucket's last member and the bucket
// left idx with it, ok false when x was not there.
func take[T any](w *writer, idx *tree[keyed[T]], key string, x T, cmp func(a, b T) int) (b *bucket[T], e T, ok bool) {
	h := hashID(key)
	if b = lookupBucket(idx, h, key); b == nil {
		return nil, e, false
	}
	if b.set.n == 1 {
		if e, ok = b.set.get(x, cmp); ok {
			idx.delete(keyed[T]{h, b}, w.ep, cmpKeyed[T])
		}
		return nil, e, ok
	}
	b = mine(w, idx, h, b)
	e, ok = b.set.delete(x, w.ep, cmp)
	return b, e, ok
}

// join puts x into the bucket key of idx.
func join[T any](w *writer, idx *tree[keyed[T]], key string, x T, cmp func(a, b T) int) {
	owned(w, idx, key).set.set(x, w.ep, cmp)
}

// joinCap puts p into the bucket of capability c: its copy into a new
// slot, or, when p replaces a record of the same name and id, into that
// record's slot. A new capability bucket gets its slots and round-robin
// cursor.
func joinCap(w *writer, c string, p *rec) {
	b := owned(w, &w.caps, c)
	if b.pool == nil {
		b.pool, b.rr = &slots{}, new(atomic.Uint64)
	}
	if e, ok := b.set.get(member{p: p}, cmpMember); ok {
		b.pool.set(int(e.slot), p, w.ep)
		b.set.set(member{p, e.slot}, w.ep, cmpMember)
		return
	}
	slot := b.pool.push(p, w.ep)
	b.set.set(member{p, int32(slot)}, w.ep, cmpMember)
	if b.pool.ahead == nil && b.pool.n >= aheadFrom {
		b.pool.ahead = newAhead()
	}
}

// leaveCap takes the record of old's name and id out of the bucket of
// capability c: out of its tree, and out of its slot, which the last
// slot's record then takes (its member is told its new slot).
func leaveCap(w *writer, c string, old *rec) {
	b, e, ok := take(w, &w.caps, c, member{p: old}, cmpMember)
	if b == nil || !ok {
		return
	}
	if moved := b.pool.remove(int(e.slot), w.ep); moved != nil {
		m, _ := b.set.get(member{p: moved}, cmpMember)
		b.set.set(member{m.p, e.slot}, w.ep, cmpMember)
	}
}

// snapshot returns the working version as a Snapshot and starts a new
// epoch, so that nothing it holds is changed again.
func (w *writer) snapshot() *Snapshot {
	s := &Snapshot{ids: w.ids, all: w.all, names: w.names, types: w.types, caps: w.caps, stale: w.stale, err: w.err}
	w.ep++
	w.pending = 0
	return s
}
