package discovery

import (
	"cmp"
	"hash/maphash"
	"iter"
	"math/rand/v2"
	"strings"
	"sync/atomic"

	"github.com/switchboard-io/switchboard"
)

// Snapshot is one published version of the cache: immutable, consistent
// across all its indexes, and safe to read from any goroutine. Holding one
// keeps that version alive; Cache's methods read the newest.
type Snapshot struct {
	ids   tree[idEntry]               // by hash of the id, then id
	all   tree[*switchboard.Instance] // by name, then id
	names tree[*bucket]
	types tree[*bucket]
	caps  tree[*bucket]
	stale bool
	err   error

	allList atomic.Pointer[[]switchboard.Instance] // All, built on first use
}

// bucket is the instances that share one name, type or capability, by
// name then id, in one version. A new version of a bucket is made only when
// its own members change.
type bucket struct {
	key   string
	epoch uint64
	set   tree[*switchboard.Instance]
	rr    *atomic.Uint64                         // round-robin cursor of a capability, kept across versions
	list  atomic.Pointer[[]switchboard.Instance] // the ordered listing, built on first use
}

func bucketKey(b *bucket) string { return b.key }
func cmpBucket(a, b *bucket) int { return strings.Compare(a.key, b.key) }

// idEntry is an element of the index by id. It carries a hash of the id,
// so that a search compares integers held in the node instead of following
// a pointer to each instance it passes (a cache miss each).
type idEntry struct {
	h uint64
	p *switchboard.Instance
}

var idSeed = maphash.MakeSeed()

func hashID(id string) uint64 { return maphash.String(idSeed, id) }

func cmpIDEntry(a, b idEntry) int {
	if c := cmp.Compare(a.h, b.h); c != 0 {
		return c
	}
	return strings.Compare(a.p.ID, b.p.ID)
}

// lookupID returns the instance with that id (whose hash is h), or nil.
func lookupID(t *tree[idEntry], h uint64, id string) *switchboard.Instance {
	n := t.root
	if n == nil {
		return nil
	}
	for {
		lo, hi := 0, len(n.items)
		for lo < hi {
			m := int(uint(lo+hi) >> 1)
			if e := n.items[m]; e.h < h || e.h == h && e.p.ID < id {
				lo = m + 1
			} else {
				hi = m
			}
		}
		if lo < len(n.items) && n.items[lo].h == h && n.items[lo].p.ID == id {
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

// cmpNameID is the order of every listing: by name, then id.
func cmpNameID(a, b *switchboard.Instance) int {
	if c := strings.Compare(a.Name, b.Name); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}

// bucket returns the bucket key of idx, or nil. It is find, written out
// for buckets: lookups are the hot path.
func (s *Snapshot) bucket(idx *tree[*bucket], key string) *bucket {
	n := idx.root
	if n == nil {
		return nil
	}
	for {
		lo, hi := 0, len(n.items)
		for lo < hi {
			m := int(uint(lo+hi) >> 1)
			if n.items[m].key < key {
				lo = m + 1
			} else {
				hi = m
			}
		}
		if lo < len(n.items) && n.items[lo].key == key {
			if n.leaf() {
				return n.items[lo]
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

// listing returns the members of set as a slice, building it on first use
// and keeping it in slot for the other readers of this version. Building
// it copies the bucket (O(k)); the writer never does, so a large bucket
// costs nothing per change unless somebody lists it.
func listing(set *tree[*switchboard.Instance], slot *atomic.Pointer[[]switchboard.Instance]) []switchboard.Instance {
	if l := slot.Load(); l != nil {
		return *l
	}
	if set.n == 0 {
		return nil
	}
	l := make([]switchboard.Instance, 0, set.n)
	set.each(func(p *switchboard.Instance) bool {
		l = append(l, *p)
		return true
	})
	slot.Store(&l)
	return l
}

func (b *bucket) listing() []switchboard.Instance {
	if b == nil {
		return nil
	}
	return listing(&b.set, &b.list)
}

// ByCapability returns the active instances having capability cp, ordered
// by name then id. The slice is shared: do not modify it. The first call
// after the capability's members changed builds it (O(its size)); later
// calls on the same version cost a lookup.
func (s *Snapshot) ByCapability(cp string) []switchboard.Instance {
	return s.bucket(&s.caps, cp).listing()
}

// ByName returns the active instances named name, by id (shared; do not
// modify; built on first use per version, as ByCapability).
func (s *Snapshot) ByName(name string) []switchboard.Instance {
	return s.bucket(&s.names, name).listing()
}

// ByType returns the active instances of type typ, by name then id
// (shared; do not modify; built on first use per version).
func (s *Snapshot) ByType(typ string) []switchboard.Instance {
	return s.bucket(&s.types, typ).listing()
}

// All returns every active instance, by name then id (shared; do not
// modify; built on first use per version: O(n)).
func (s *Snapshot) All() []switchboard.Instance { return listing(&s.all, &s.allList) }

// Len returns the number of active instances.
func (s *Snapshot) Len() int { return s.all.n }

// Count returns how many active instances q selects, without listing them
// when q has one field (O(log n)).
func (s *Snapshot) Count(q switchboard.Query) int {
	set, single := s.source(q)
	if single {
		return set.n
	}
	n := 0
	set.each(func(p *switchboard.Instance) bool {
		if q.Matches(p) {
			n++
		}
		return true
	})
	return n
}

var emptySet tree[*switchboard.Instance]

// source returns the smallest index that holds what q selects, and whether
// every member of it is selected.
func (s *Snapshot) source(q switchboard.Query) (*tree[*switchboard.Instance], bool) {
	set, fields := &s.all, 0
	consider := func(idx *tree[*bucket], key string) {
		if key == "" {
			return
		}
		fields++
		b := s.bucket(idx, key)
		if b == nil {
			set = &emptySet
		} else if b.set.n < set.n || fields == 1 {
			set = &b.set
		}
	}
	consider(&s.caps, q.Capability)
	consider(&s.names, q.Name)
	consider(&s.types, q.Type)
	return set, fields <= 1
}

// Instances iterates, by name then id, over the active instances q
// selects, without building a listing. Each is yielded as a copy sharing
// its slices and maps with the cache (do not modify them).
func (s *Snapshot) Instances(q switchboard.Query) iter.Seq[switchboard.Instance] {
	return func(yield func(switchboard.Instance) bool) {
		set, _ := s.source(q)
		set.each(func(p *switchboard.Instance) bool {
			return !q.Matches(p) || yield(*p)
		})
	}
}

// Get returns the active instance with that id.
func (s *Snapshot) Get(id string) (switchboard.Instance, bool) {
	p := lookupID(&s.ids, hashID(id), id)
	if p == nil {
		return switchboard.Instance{}, false
	}
	return *p, true
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
// through them in name, id order; false when there is none. The cursor is
// the capability's, shared by every version.
func (s *Snapshot) PickRoundRobin(cp string) (switchboard.Instance, bool) {
	b := s.bucket(&s.caps, cp)
	if b == nil {
		return switchboard.Instance{}, false
	}
	n := b.rr.Add(1) - 1
	return *b.set.at(int(n % uint64(b.set.n))), true
}

// PickRandom returns a uniformly random instance with capability cp.
func (s *Snapshot) PickRandom(cp string) (switchboard.Instance, bool) {
	b := s.bucket(&s.caps, cp)
	if b == nil {
		return switchboard.Instance{}, false
	}
	return *b.set.at(rand.IntN(b.set.n)), true
}
