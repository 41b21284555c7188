package discovery

import (
	"slices"

	"github.com/switchboard-io/switchboard"
)

// Change is one instance's transition in the cache. Old is nil when the
// instance was added, New is nil when it was removed; both are set for an
// update. The instances are the cache's: they are never changed, and may
// be kept, but share their slices and maps with every reader, so do not
// modify them.
type Change struct {
	Old, New *switchboard.Instance
}

// writer applies events to the working version of the indexes and
// publishes versions. A change copies, of what readers may hold, one shard
// of each index it touches, and one chunk and the list of chunks of each
// bucket it touches: its cost grows with the size of a chunk and the
// number of chunks, not with the catalog. Only the cache's goroutine uses
// it.
type writer struct {
	ep                 uint64 // what this epoch made is unpublished: changed in place
	ids                wmap[*switchboard.Instance]
	all                *bucket
	names, types, caps wmap[*bucket]
	touched            []*bucket // made in this epoch: their counts to set

	changes []Change // since the last publish
	pending int      // events since the last publish
	stale   bool     // an error event came, and no synced since
	err     error    // that error

	// resync holds the ids a new watch has sent since it started, until
	// its synced: the instances it did not send are gone.
	resync map[string]bool
	// removed collects the removals a resync found, for OnEvent.
	removed []switchboard.Event
}

func newWriter() *writer { return &writer{ep: 1} }

// apply applies one event to the working version.
func (w *writer) apply(ev *switchboard.Event) {
	w.pending++
	switch ev.Kind {
	case switchboard.EventAdded, switchboard.EventUpdated:
		if w.resync != nil {
			w.resync[ev.Instance.ID] = true
		}
		w.put(&ev.Instance)
	case switchboard.EventRemoved:
		w.remove(ev.Instance.ID)
	case switchboard.EventError:
		w.stale, w.err = true, ev.Err
	case switchboard.EventSynced:
		w.stale, w.err = false, nil
		if w.resync != nil {
			w.endResync()
		}
	}
}

// startResync is called when a new watch replaces one that ended: at its
// synced, what it did not send is removed.
func (w *writer) startResync() { w.resync = map[string]bool{} }

func (w *writer) endResync() {
	var gone []*switchboard.Instance
	w.ids.each(func(id string, in *switchboard.Instance) {
		if !w.resync[id] {
			gone = append(gone, in)
		}
	})
	w.resync = nil
	for _, in := range gone {
		w.remove(in.ID)
		w.removed = append(w.removed, switchboard.Event{Kind: switchboard.EventRemoved, Reason: switchboard.ReasonUnknown, Instance: *in})
	}
}

func (w *writer) put(in *switchboard.Instance) {
	p := new(switchboard.Instance)
	*p = *in
	old, _ := w.ids.get(in.ID)
	w.ids.set(in.ID, p)
	if old != nil {
		w.buckets(old, (*bucket).remove)
	}
	w.buckets(p, (*bucket).insert)
	w.changes = append(w.changes, Change{Old: old, New: p})
}

func (w *writer) remove(id string) {
	old, ok := w.ids.get(id)
	if !ok {
		return
	}
	w.ids.del(id)
	w.buckets(old, (*bucket).remove)
	w.changes = append(w.changes, Change{Old: old})
}

// buckets calls fn, in this epoch, on each bucket in is a member of; a
// bucket left empty leaves its index.
func (w *writer) buckets(in *switchboard.Instance, fn func(*bucket, *switchboard.Instance, uint64)) {
	w.all = w.own(w.all, nil)
	fn(w.all, in, w.ep)
	update := func(idx *wmap[*bucket], key string) {
		b, _ := idx.get(key)
		nb := w.own(b, idx)
		if nb != b {
			idx.set(key, nb)
		}
		if fn(nb, in, w.ep); nb.n == 0 {
			idx.del(key)
		}
	}
	update(&w.names, in.Name)
	update(&w.types, in.Type)
	for i, c := range in.Capabilities {
		if !slices.Contains(in.Capabilities[:i], c) {
			update(&w.caps, c)
		}
	}
}

// own returns b if this epoch made it, or else a new version of it (a
// new bucket when b is nil) that this epoch makes.
func (w *writer) own(b *bucket, idx *wmap[*bucket]) *bucket {
	if b != nil && b.ep == w.ep {
		return b
	}
	nb := &bucket{ep: w.ep}
	switch {
	case b != nil:
		nb.chunks, nb.n, nb.off, nb.picks = append(make([]chunk, 0, len(b.chunks)+1), b.chunks...), b.n, b.off, b.picks
	case idx == &w.caps || idx == &w.names:
		nb.picks = new(pickState)
	}
	w.touched = append(w.touched, nb)
	return nb
}

// snapshot publishes the working version as a Snapshot and starts a new
// epoch.
func (w *writer) snapshot() *Snapshot {
	for _, b := range w.touched {
		b.count()
	}
	clear(w.touched)
	w.touched = w.touched[:0]
	s := &Snapshot{ids: w.ids.publish(), all: w.all, names: w.names.publish(), types: w.types.publish(),
		caps: w.caps.publish(), stale: w.stale, err: w.err}
	w.ep++
	w.pending = 0
	return s
}
