package discovery

import (
	"iter"

	"github.com/switchboard-io/switchboard"
)

// Snapshot is one published version of the cache: immutable, consistent
// across all its indexes, and safe to read from any goroutine. Holding one
// keeps that version alive; Cache's methods read the newest.
//
// Lookups and picks (ByCapability, ByName, ByType, Lookup, Count, the
// picks and Picker) answer where traffic may go: the instances that are
// Serving (not stale, not draining, check not critical). Get, All, Len and
// Instances give every instance the cache holds, draining ones included
// (ask Instance.Serving), as SubscribeChanges' changes do: they are the
// cache's content, for those who mirror or show it.
type Snapshot struct {
	ids                pmap[*switchboard.Instance]
	all                *bucket // nil before the first instance
	names, types, caps pmap[*bucket]
	stale              bool
	err                error
}

func (s *Snapshot) capability(cp string) *bucket { b, _ := s.caps.get(cp); return b }

// ByCapability returns the serving instances having capability cp, ordered
// by name then id. The slice is shared: do not modify it. The first call
// after the capability's members changed builds it (O(its size)); later
// calls on the same version cost a lookup.
func (s *Snapshot) ByCapability(cp string) []switchboard.Instance {
	return s.capability(cp).listing(false)
}

// ByName returns the serving instances named name, by id (shared; do not
// modify; built on first use per version, as ByCapability).
func (s *Snapshot) ByName(name string) []switchboard.Instance {
	b, _ := s.names.get(name)
	return b.listing(false)
}

// ByType returns the serving instances of type typ, by name then id
// (shared; do not modify; built on first use per version).
func (s *Snapshot) ByType(typ string) []switchboard.Instance {
	b, _ := s.types.get(typ)
	return b.listing(false)
}

// All returns every instance the cache holds, serving or not (draining),
// by name then id (shared; do not modify; built on first use per version:
// O(n)).
func (s *Snapshot) All() []switchboard.Instance { return s.all.listing(true) }

// Len returns the number of instances the cache holds, serving or not.
func (s *Snapshot) Len() int { return s.all.len() }

// source returns the smallest bucket that holds what q selects, and
// whether every member of it is selected.
func (s *Snapshot) source(q switchboard.Query) (*bucket, bool) {
	b, fields := s.all, 0
	consider := func(idx *pmap[*bucket], key string) {
		fields++
		if c, _ := idx.get(key); fields == 1 || c.len() < b.len() {
			b = c
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
	return b, fields <= 1
}

// Count returns how many serving instances q selects, without listing
// them when q has at most one field (a lookup).
func (s *Snapshot) Count(q switchboard.Query) int {
	b, single := s.source(q)
	if single {
		return b.serving()
	}
	n := 0
	b.each(func(p *switchboard.Instance) bool {
		if q.Matches(p) && p.Serving() {
			n++
		}
		return true
	})
	return n
}

// Instances iterates, by name then id, over every instance q selects that
// the cache holds, serving or not (draining), without building a listing:
// with SubscribeChanges, what a mirror of the cache starts from. Each is
// yielded as a copy sharing its slices and maps with the cache (do not
// modify them).
func (s *Snapshot) Instances(q switchboard.Query) iter.Seq[switchboard.Instance] {
	return func(yield func(switchboard.Instance) bool) {
		b, _ := s.source(q)
		b.each(func(p *switchboard.Instance) bool { return !q.Matches(p) || yield(*p) })
	}
}

// Get returns the instance with that id that the cache holds, serving or
// not (draining).
func (s *Snapshot) Get(id string) (switchboard.Instance, bool) {
	p, ok := s.ids.get(id)
	if !ok {
		return switchboard.Instance{}, false
	}
	return *p, true
}

// Lookup returns the serving instances selected by q, by name then id (a
// new slice).
func (s *Snapshot) Lookup(q switchboard.Query) []switchboard.Instance {
	var out []switchboard.Instance
	for in := range s.Instances(q) {
		if in.Serving() {
			out = append(out, in)
		}
	}
	return out
}

// Stale reports whether this version could not be confirmed with the
// catalog (it was unreachable), and the error that made it so.
func (s *Snapshot) Stale() (bool, error) { return s.stale, s.err }

// PickRoundRobin returns the next serving instance with capability cp,
// cycling through them, whatever their weight; false when there is none.
// The cursor is the capability's, shared by every version: in a stable set
// every member is picked once per cycle. (A Picker with RoundRobin.)
func (s *Snapshot) PickRoundRobin(cp string) (switchboard.Instance, bool) {
	return s.capability(cp).pickOne(RoundRobin, &noZone)
}

// PickRandom returns a uniformly random serving instance with capability
// cp, whatever its weight. (A Picker with Random.)
func (s *Snapshot) PickRandom(cp string) (switchboard.Instance, bool) {
	return s.capability(cp).pickOne(Random, &noZone)
}
