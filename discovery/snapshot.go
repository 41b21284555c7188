package discovery

import (
	"iter"
	"math/rand/v2"

	"github.com/switchboard-io/switchboard"
)

// Snapshot is one published version of the cache: immutable, consistent
// across all its indexes, and safe to read from any goroutine. Holding one
// keeps that version alive; Cache's methods read the newest.
type Snapshot struct {
	ids                pmap[*switchboard.Instance]
	all                *bucket // nil when empty
	names, types, caps pmap[*bucket]
	stale              bool
	err                error
}

// members returns the bucket's members (none for a nil bucket).
func (b *bucket) members() []*switchboard.Instance {
	if b == nil {
		return nil
	}
	return b.m
}

// listing returns the members as a slice, building it on first use and
// keeping it for the other readers of this version of the bucket. Building
// it copies the bucket (O(k)); the writer never does, so a large bucket
// costs nothing per change unless somebody lists it.
func (b *bucket) listing() []switchboard.Instance {
	if b == nil {
		return nil
	}
	if l := b.list.Load(); l != nil {
		return *l
	}
	l := make([]switchboard.Instance, len(b.m))
	for i, p := range b.m {
		l[i] = *p
	}
	b.list.Store(&l)
	return l
}

func (s *Snapshot) capability(cp string) *bucket { b, _ := s.caps.get(cp); return b }

// ByCapability returns the active instances having capability cp, ordered
// by name then id. The slice is shared: do not modify it. The first call
// after the capability's members changed builds it (O(its size)); later
// calls on the same version cost a lookup.
func (s *Snapshot) ByCapability(cp string) []switchboard.Instance { return s.capability(cp).listing() }

// ByName returns the active instances named name, by id (shared; do not
// modify; built on first use per version, as ByCapability).
func (s *Snapshot) ByName(name string) []switchboard.Instance {
	b, _ := s.names.get(name)
	return b.listing()
}

// ByType returns the active instances of type typ, by name then id
// (shared; do not modify; built on first use per version).
func (s *Snapshot) ByType(typ string) []switchboard.Instance {
	b, _ := s.types.get(typ)
	return b.listing()
}

// All returns every active instance, by name then id (shared; do not
// modify; built on first use per version: O(n)).
func (s *Snapshot) All() []switchboard.Instance { return s.all.listing() }

// Len returns the number of active instances.
func (s *Snapshot) Len() int { return len(s.all.members()) }

// source returns the smallest bucket that holds what q selects, and
// whether every member of it is selected.
func (s *Snapshot) source(q switchboard.Query) ([]*switchboard.Instance, bool) {
	m, fields := s.all.members(), 0
	consider := func(idx *pmap[*bucket], key string) {
		fields++
		b, _ := idx.get(key)
		if bm := b.members(); fields == 1 || len(bm) < len(m) {
			m = bm
		}
	}
	if q.Capability != "" {
		consider(&s.caps, q.Capability)
	}
	if q.Name != "" {
		consider(&s.names, q.Name)
	}
	if q.Type != "" {
		consider(&s.types, q.Type)
	}
	return m, fields <= 1
}

// Count returns how many active instances q selects, without listing them
// when q has one field (a lookup).
func (s *Snapshot) Count(q switchboard.Query) int {
	m, single := s.source(q)
	if single {
		return len(m)
	}
	n := 0
	for _, p := range m {
		if q.Matches(p) {
			n++
		}
	}
	return n
}

// Instances iterates, by name then id, over the active instances q
// selects, without building a listing. Each is yielded as a copy sharing
// its slices and maps with the cache (do not modify them).
func (s *Snapshot) Instances(q switchboard.Query) iter.Seq[switchboard.Instance] {
	return func(yield func(switchboard.Instance) bool) {
		m, _ := s.source(q)
		for _, p := range m {
			if q.Matches(p) && !yield(*p) {
				return
			}
		}
	}
}

// Get returns the active instance with that id.
func (s *Snapshot) Get(id string) (switchboard.Instance, bool) {
	p, ok := s.ids.get(id)
	if !ok {
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
// through them by name then id; false when there is none. The cursor is
// the capability's, shared by every version: in a stable set every member
// is picked once per cycle.
func (s *Snapshot) PickRoundRobin(cp string) (switchboard.Instance, bool) {
	b := s.capability(cp)
	if b == nil {
		return switchboard.Instance{}, false
	}
	n := b.rr.Add(1) - 1
	return *b.m[n%uint64(len(b.m))], true
}

// PickRandom returns a uniformly random instance with capability cp.
func (s *Snapshot) PickRandom(cp string) (switchboard.Instance, bool) {
	b := s.capability(cp)
	if b == nil {
		return switchboard.Instance{}, false
	}
	return *b.m[rand.IntN(len(b.m))], true
}
