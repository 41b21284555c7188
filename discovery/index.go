package discovery

import (
	"hash/maphash"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/switchboard-io/switchboard"
)

// pmap is one version of a persistent map from strings: its entries are
// spread over 256 shards by a hash of their key, each shard sorted by hash,
// then key. A change copies the array of shards and the one shard it
// touches, never the whole map, so every published version stays intact
// for its readers. The zero value is empty.
type pmap[V any] struct {
	shards *[nShards][]entry[V]
	n      int
}

const (
	shardBits = 8
	nShards   = 1 << shardBits
)

type entry[V any] struct {
	h uint64
	k string
	v V
}

var seed = maphash.MakeSeed()

func hash(k string) uint64 { return maphash.String(seed, k) }

// search returns where key k (whose hash is h) is or would go in shard s.
func search[V any](s []entry[V], h uint64, k string) (int, bool) {
	lo, hi := 0, len(s)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if e := &s[m]; e.h < h || e.h == h && e.k < k {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(s) && s[lo].h == h && s[lo].k == k
}

func (m *pmap[V]) get(k string) (v V, ok bool) {
	if m.shards == nil {
		return v, false
	}
	h := hash(k)
	s := m.shards[h>>(64-shardBits)]
	i, ok := search(s, h, k)
	if !ok {
		return v, false
	}
	return s[i].v, true
}

// each calls fn for every entry, in no particular order.
func (m *pmap[V]) each(fn func(k string, v V)) {
	if m.shards == nil {
		return
	}
	for _, s := range m.shards {
		for _, e := range s {
			fn(e.k, e.v)
		}
	}
}

// wmap is the writer's working version of a pmap. What it copied since the
// last publish (the array of shards, the shards marked in owned) no reader
// has seen, so it changes them in place: a burst of changes (a snapshot of
// the whole catalog) copies each shard once, not once per change.
type wmap[V any] struct {
	pmap[V]
	top   bool
	owned [nShards / 64]uint64
}

// shard returns shard j of the working version, owned.
func (w *wmap[V]) shard(j uint64) *[]entry[V] {
	if !w.top {
		a := new([nShards][]entry[V])
		if w.shards != nil {
			*a = *w.shards
		}
		w.shards, w.top = a, true
	}
	if w.owned[j/64]&(1<<(j%64)) == 0 {
		s := w.shards[j]
		w.shards[j] = append(make([]entry[V], 0, len(s)+1), s...)
		w.owned[j/64] |= 1 << (j % 64)
	}
	return &w.shards[j]
}

func (w *wmap[V]) set(k string, v V) {
	h := hash(k)
	s := w.shard(h >> (64 - shardBits))
	i, ok := search(*s, h, k)
	if ok {
		(*s)[i].v = v
		return
	}
	*s = slices.Insert(*s, i, entry[V]{h, k, v})
	w.n++
}

func (w *wmap[V]) del(k string) {
	if w.shards == nil {
		return
	}
	h := hash(k)
	if _, ok := search(w.shards[h>>(64-shardBits)], h, k); !ok {
		return
	}
	s := w.shard(h >> (64 - shardBits))
	i, _ := search(*s, h, k)
	*s = slices.Delete(*s, i, i+1)
	w.n--
}

// publish returns the working version for readers; what the writer
// changes next, it copies first.
func (w *wmap[V]) publish() pmap[V] {
	w.top, w.owned = false, [nShards / 64]uint64{}
	return w.pmap
}

// Change is one instance's transition in the cache. Old is nil when the
// instance was added, New is nil when it was removed; both are set for an
// update. The instances are the cache's: they are never changed, and may
// be kept, but share their slices and maps with every reader, so do not
// modify them.
type Change struct {
	Old, New *switchboard.Instance
}

// bucket is one version of the instances that share a name, a type or a
// capability (or, for the bucket of every instance, nothing), by name then
// id. It is never changed once published: a change to its members makes a
// new version.
type bucket struct {
	m    []*switchboard.Instance
	rr   *atomic.Uint64                         // a capability's round-robin cursor, shared by its versions
	list atomic.Pointer[[]switchboard.Instance] // the members as Instances, built on first use
}

// edit is what a burst of changes does to one bucket: the members it
// takes out and puts in, merged into a new version when the burst is
// published.
type edit struct {
	idx      *wmap[*bucket] // nil for the bucket of every instance
	key      string
	add, del []*switchboard.Instance
}

type editKey struct {
	idx *wmap[*bucket]
	key string
}

// writer applies events to the working version of the indexes and
// publishes versions. An event changes its instance's entry by id at once
// and records what it does to the instance's buckets; publishing merges
// those into new versions of the buckets touched, in one pass over each.
// A change therefore costs in proportion to the buckets it touches, not to
// the catalog. Only the cache's goroutine uses it.
type writer struct {
	ids                wmap[*switchboard.Instance]
	all                *bucket
	names, types, caps wmap[*bucket]
	edits              map[editKey]*edit

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

func newWriter() *writer { return &writer{edits: map[editKey]*edit{}} }

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
		w.buckets(old, (*edit).leave)
	}
	w.buckets(p, (*edit).join)
	w.changes = append(w.changes, Change{Old: old, New: p})
}

func (w *writer) remove(id string) {
	old, ok := w.ids.get(id)
	if !ok {
		return
	}
	w.ids.del(id)
	w.buckets(old, (*edit).leave)
	w.changes = append(w.changes, Change{Old: old})
}

// buckets calls fn with the edit of each bucket in is a member of.
func (w *writer) buckets(in *switchboard.Instance, fn func(*edit, *switchboard.Instance)) {
	fn(w.edit(nil, ""), in)
	fn(w.edit(&w.names, in.Name), in)
	fn(w.edit(&w.types, in.Type), in)
	for i, c := range in.Capabilities {
		if !slices.Contains(in.Capabilities[:i], c) {
			fn(w.edit(&w.caps, c), in)
		}
	}
}

func (w *writer) edit(idx *wmap[*bucket], key string) *edit {
	k := editKey{idx, key}
	e := w.edits[k]
	if e == nil {
		e = &edit{idx: idx, key: key}
		w.edits[k] = e
	}
	return e
}

func (e *edit) join(in *switchboard.Instance) { e.add = append(e.add, in) }

// leave takes in out: out of what this burst put in, or else out of the
// published version.
func (e *edit) leave(in *switchboard.Instance) {
	for i := len(e.add) - 1; i >= 0; i-- {
		if e.add[i] == in {
			e.add[i] = e.add[len(e.add)-1]
			e.add[len(e.add)-1] = nil
			e.add = e.add[:len(e.add)-1]
			return
		}
	}
	e.del = append(e.del, in)
}

// cmpNameID is the order of every listing: by name, then id.
func cmpNameID(a, b *switchboard.Instance) int {
	if c := strings.Compare(a.Name, b.Name); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}

// flush makes the new version of the bucket e edits: the published
// members without those taken out, merged with those put in, in one pass.
func (w *writer) flush(e *edit) {
	var old *bucket
	if e.idx == nil {
		old = w.all
	} else {
		old, _ = e.idx.get(e.key)
	}
	var cur []*switchboard.Instance
	if old != nil {
		cur = old.m
	}
	slices.SortFunc(e.add, cmpNameID)
	slices.SortFunc(e.del, cmpNameID)
	m := make([]*switchboard.Instance, 0, max(0, len(cur)-len(e.del))+len(e.add))
	add, del := e.add, e.del
	for _, p := range cur {
		for len(del) > 0 && cmpNameID(del[0], p) < 0 {
			del = del[1:] // not a member: nothing to take out
		}
		if len(del) > 0 && del[0] == p {
			del = del[1:]
			continue
		}
		for len(add) > 0 && cmpNameID(add[0], p) < 0 {
			m = append(m, add[0])
			add = add[1:]
		}
		m = append(m, p)
	}
	m = append(m, add...)
	var nb *bucket
	if len(m) > 0 {
		nb = &bucket{m: m}
		switch {
		case old != nil:
			nb.rr = old.rr
		case e.idx == &w.caps:
			nb.rr = new(atomic.Uint64)
		}
	}
	switch {
	case e.idx == nil:
		w.all = nb
	case nb == nil:
		e.idx.del(e.key)
	default:
		e.idx.set(e.key, nb)
	}
}

// snapshot publishes the working version as a Snapshot.
func (w *writer) snapshot() *Snapshot {
	for k, e := range w.edits {
		w.flush(e)
		delete(w.edits, k)
	}
	s := &Snapshot{ids: w.ids.publish(), all: w.all, names: w.names.publish(), types: w.types.publish(),
		caps: w.caps.publish(), stale: w.stale, err: w.err}
	w.pending = 0
	return s
}
