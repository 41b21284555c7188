package discovery

import (
	"cmp"
	"hash/maphash"
	"iter"
	"strings"
	"sync/atomic"

	"github.com/switchboard-io/switchboard"
)

// Snapshot is one published version of the cache: immutable, consistent
// across all its indexes, and safe to read from any goroutine. Holding one
// keeps that version alive; Cache's methods read the newest.
type Snapshot struct {
	ids   tree[idEntry] // by hash of the id, then id
	all   tree[*rec]    // by name, then id
	names tree[keyed[*rec]]
	types tree[keyed[*rec]]
	caps  tree[keyed[member]]
	stale bool
	err   error

	allList atomic.Pointer[[]switchboard.Instance] // All, built on first use
}

// bucket is the instances that share one name, type or capability, by
// name then id, in one version: pointers to their records (T is *rec), or,
// for a capability, members (T is member), each a pointer to its record
// and the number of the slot in pool that holds a copy of it. A new
// version of a bucket is made only when its own members change.
type bucket[T any] struct {
	key   string
	epoch uint64
	set   tree[T]
	pool  *slots                                 // a capability's slots: what picks read
	rr    *atomic.Uint64                         // round-robin cursor of a capability, kept across versions
	list  atomic.Pointer[[]switchboard.Instance] // the ordered listing, built on first use
}

// member is an element of a capability bucket's tree: the record, and the
// slot of the bucket's pool that holds its copy.
type member struct {
	p    *rec
	slot int32
}

// cmpMember orders a capability's members by name, then id.
func cmpMember(a, b member) int { return cmpNameID(a.p, b.p) }

// keyed is an element of an index of buckets: the bucket with a hash of
// its key, so that a lookup compares integers held in the node instead of
// following a pointer to each bucket it passes, and then its key.
type keyed[T any] struct {
	h uint64
	b *bucket[T]
}

func cmpKeyed[T any](a, b keyed[T]) int {
	if c := cmp.Compare(a.h, b.h); c != 0 {
		return c
	}
	return strings.Compare(a.b.key, b.b.key)
}

// idEntry is an element of the index by id. It carries a hash of the id,
// so that a search compares integers held in the node instead of following
// a pointer to each instance it passes (a cache miss each).
type idEntry struct {
	h uint64
	p *rec
}

var idSeed = maphash.MakeSeed()

func hashID(id string) uint64 { return maphash.String(idSeed, id) }

func cmpIDEntry(a, b idEntry) int {
	if c := cmp.Compare(a.h, b.h); c != 0 {
		return c
	}
	return strings.Compare(a.p.id, b.p.id)
}

// lookupID returns the record with that id (whose hash is h), or nil.
func lookupID(t *tree[idEntry], h uint64, id string) *rec {
	n := t.root
	if n == nil {
		return nil
	}
	for {
		lo, hi := 0, len(n.items)
		for lo < hi {
			m := int(uint(lo+hi) >> 1)
			if e := n.items[m]; e.h < h || e.h == h && e.p.id < id {
				lo = m + 1
			} else {
				hi = m
			}
		}
		if lo < len(n.items) && n.items[lo].h == h && n.items[lo].p.id == id {
			if n.leaf() {
				return n.items[lo].p
			}
			n = n.kids[lo]
			continue
		}
		if n.leaf() || lo == 0 {
			return nil
		}
		n = n.kids[lo-1]
	}
}

// lookupBucket returns the bucket key (whose hash is h) of idx, or nil.
func lookupBucket[T any](idx *tree[keyed[T]], h uint64, key string) *bucket[T] {
	n := idx.root
	if n == nil {
		return nil
	}
	for {
		lo, hi := 0, len(n.items)
		for lo < hi {
			m := int(uint(lo+hi) >> 1)
			if e := &n.items[m]; e.h < h || e.h == h && e.b.key < key {
				lo = m + 1
			} else {
				hi = m
			}
		}
		if lo < len(n.items) && n.items[lo].h == h && n.items[lo].b.key == key {
			if n.leaf() {
				return n.items[lo].b
			}
			n = n.kids[lo]
			continue
		}
		if n.leaf() || lo == 0 {
			return nil
		}
		n = n.kids[lo-1]
	}
}

// members is what a query reads: one index, whose elements are pointers to
// records or (a capability bucket) members.
type members struct {
	ptrs *tree[*rec]
	caps *tree[member]
}

func (m members) len() int {
	if m.caps != nil {
		return m.caps.n
	}
	return m.ptrs.n
}

// each calls fn for every record in order until fn returns false.
func (m members) each(fn func(*rec) bool) {
	if m.caps != nil {
		m.caps.each(func(e member) bool { return fn(e.p) })
	} else {
		m.ptrs.each(fn)
	}
}

// listing returns the members as a slice, building it on first use and
// keeping it in slot for the other readers of this version. Building it
// copies the bucket (O(k)); the writer never does, so a large bucket costs
// nothing per change unless somebody lists it.
func listing(m members, slot *atomic.Pointer[[]switchboard.Instance]) []switchboard.Instance {
	if l := slot.Load(); l != nil {
		return *l
	}
	if m.len() == 0 {
		return nil
	}
	l := make([]switchboard.Instance, 0, m.len())
	m.each(func(r *rec) bool {
		l = append(l, r.instance())
		return true
	})
	slot.Store(&l)
	return l
}

func (b *bucket[T]) listing(m members) []switchboard.Instance {
	if b == nil {
		return nil
	}
	return listing(m, &b.list)
}

// ByCapability returns the active instances having capability cp, ordered
// by name then id. The slice is shared: do not modify it. The first call
// after the capability's members changed builds it (O(its size)); later
// calls on the same version cost a lookup.
func (s *Snapshot) ByCapability(cp string) []switchboard.Instance {
	b := lookupBucket(&s.caps, hashID(cp), cp)
	if b == nil {
		return nil
	}
	return b.listing(members{caps: &b.set})
}

// ByName returns the active instances named name, by id (shared; do not
// modify; built on first use per version, as ByCapability).
func (s *Snapshot) ByName(name string) []switchboard.Instance {
	b := lookupBucket(&s.names, hashID(name), name)
	if b == nil {
		return nil
	}
	return b.listing(members{ptrs: &b.set})
}

// ByType returns the active instances of type typ, by name then id
// (shared; do not modify; built on first use per version).
func (s *Snapshot) ByType(typ string) []switchboard.Instance {
	b := lookupBucket(&s.types, hashID(typ), typ)
	if b == nil {
		return nil
	}
	return b.listing(members{ptrs: &b.set})
}

// All returns every active instance, by name then id (shared; do not
// modify; built on first use per version: O(n)).
func (s *Snapshot) All() []switchboard.Instance { return listing(members{ptrs: &s.all}, &s.allList) }

// Len returns the number of active instances.
func (s *Snapshot) Len() int { return s.all.n }

// Count returns how many active instances q selects, without listing them
// when q has one field (O(log n)).
func (s *Snapshot) Count(q switchboard.Query) int {
	m, single := s.source(q)
	if single {
		return m.len()
	}
	n := 0
	m.each(func(r *rec) bool {
		if in := r.instance(); q.Matches(&in) {
			n++
		}
		return true
	})
	return n
}

var (
	emptySet  tree[*rec]
	emptyCaps tree[member]
)

// source returns the smallest index that holds what q selects, and whether
// every member of it is selected.
func (s *Snapshot) source(q switchboard.Query) (members, bool) {
	m, fields := members{ptrs: &s.all}, 0
	consider := func(b members, found bool) {
		fields++
		switch {
		case !found:
			m = members{ptrs: &emptySet}
		case b.len() < m.len() || fields == 1:
			m = b
		}
	}
	if q.Capability != "" {
		b := lookupBucket(&s.caps, hashID(q.Capability), q.Capability)
		if b != nil {
			consider(members{caps: &b.set}, true)
		} else {
			consider(members{caps: &emptyCaps}, false)
		}
	}
	for _, f := range []struct {
		idx *tree[keyed[*rec]]
		key string
	}{{&s.names, q.Name}, {&s.types, q.Type}} {
		if f.key == "" {
			continue
		}
		if b := lookupBucket(f.idx, hashID(f.key), f.key); b != nil {
			consider(members{ptrs: &b.set}, true)
		} else {
			consider(members{ptrs: &emptySet}, false)
		}
	}
	return m, fields <= 1
}

// Instances iterates, by name then id, over the active instances q
// selects, without building a listing. Each is yielded as a copy sharing
// its slices and maps with the cache (do not modify them).
func (s *Snapshot) Instances(q switchboard.Query) iter.Seq[switchboard.Instance] {
	return func(yield func(switchboard.Instance) bool) {
		m, _ := s.source(q)
		m.each(func(r *rec) bool {
			in := r.instance()
			return !q.Matches(&in) || yield(in)
		})
	}
}

// Get returns the active instance with that id.
func (s *Snapshot) Get(id string) (switchboard.Instance, bool) {
	r := lookupID(&s.ids, hashID(id), id)
	if r == nil {
		return switchboard.Instance{}, false
	}
	return r.instance(), true
}

// Lookup returns the active instances selected by q, by name then id (a
// new slice).
func (s *Snapshot) Lookup(q switchboard.Query) []switchboard.Instance {
	var out []switchboard.Instance
	for in := range s.Instances(q) {
		out = append(out, in)
	}
	return out
}

// Stale reports whether this version could not be confirmed with the
// catalog (it was unreachable), and the error that made it so.
func (s *Snapshot) Stale() (bool, error) { return s.stale, s.err }

// PickRoundRobin returns the next instance with capability cp, cycling
// through them in the order of the capability's slots; false when there is
// none. The cursor is the capability's, shared by every version: in a
// stable set every member is picked once per cycle.
func (s *Snapshot) PickRoundRobin(cp string) (switchboard.Instance, bool) {
	b := lookupBucket(&s.caps, hashID(cp), cp)
	if b == nil {
		return switchboard.Instance{}, false
	}
	n := b.rr.Add(1) - 1
	return b.pool.at(int(n % uint64(b.pool.n))).instance(), true
}

// PickRandom returns a uniformly random instance with capability cp. In a
// capability too large for the core's cache, each pick takes a number
// drawn by a pick before it, whose record was prefetched then, and leaves
// one for a pick after it (see ahead): a goroutine that picks often finds
// its record in cache, even among 100,000 members.
func (s *Snapshot) PickRandom(cp string) (switchboard.Instance, bool) {
	b := lookupBucket(&s.caps, hashID(cp), cp)
	if b == nil {
		return switchboard.Instance{}, false
	}
	return b.pool.pick().instance(), true
}
