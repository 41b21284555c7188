package discovery

import "slices"

// A capability bucket keeps, besides its tree in name, id order (which
// listings and iteration walk), a copy of each member's record in a slot
// of its own: slots are numbered 0 … n-1 with no gap and in no particular
// order, so a pick draws a number and finds that slot by shifts alone.
//
// slots is a persistent radix of fixed-size chunks: a top array of middle
// nodes, each of up to 64 chunks of 64 records (4 KiB, exactly a size
// class of Go's allocator). The i-th record is top[i>>12].kids[i>>6&63][i&63]:
// two loads from small arrays (at 100,000 members, 25 top entries and 25
// middle nodes of 1.5 KiB of chunk slices), then the record's own line — no search, no comparison, no count to walk, which is
// what a B+ tree's pick pays on top of that miss.
//
// When a member leaves, the last slot's record moves into its slot, so the
// slots stay dense and a uniform number is a uniform pick. A change copies
// at most one chunk, one middle node and the top array (8 bytes per 4,096
// members), in the epoch discipline of the trees: chunks, middle nodes and
// top arrays made in the writer's current epoch are changed in place,
// older ones are copied first.
const (
	chunkBits = 6
	chunkLen  = 1 << chunkBits // records in a chunk
	midBits   = 6
	midLen    = 1 << midBits // chunks under a middle node
)

// A middle node holds its chunks as slices, not pointers to arrays:
// indexing a slice checks its length, held in the middle node, where a
// pointer to an array is checked against nil by a load from the chunk's
// first cache line, a second line for a pick to wait for beside the
// record's own.
type slotMid struct {
	kids  [midLen][]rec  // each of chunkLen records, or nil
	eps   [midLen]uint64 // the epoch each chunk was made in
	epoch uint64
}

// slots is one version of a capability's slots; the zero value is empty.
// Each version of a bucket points to a slots of its own: copying the
// struct (as a bucket's new version does) copies the version, and the
// epoch it carries makes the writer copy the shared top array before
// changing it.
type slots struct {
	top   []*slotMid
	epoch uint64 // the epoch top's array was made in
	n     int
}

// at returns the record in slot i (0 ≤ i < n) where it is held: read it,
// never write it.
func (s *slots) at(i int) *rec {
	return &s.top[i>>(chunkBits+midBits)].kids[i>>chunkBits&(midLen-1)][i&(chunkLen-1)]
}

// chunk returns the chunk of slot i (0 ≤ i ≤ n, n being the slot a push
// fills), owned by epoch ep: made in it, or copied into it along with the
// middle node and top array above it.
func (s *slots) chunk(i int, ep uint64) []rec {
	m := s.mid(i>>(chunkBits+midBits), ep)
	k := i >> chunkBits & (midLen - 1)
	c := m.kids[k]
	switch {
	case c == nil:
		c = make([]rec, chunkLen)
	case m.eps[k] != ep:
		c = slices.Clone(c)
	default:
		return c
	}
	m.kids[k], m.eps[k] = c, ep
	return c
}

// mid returns middle node t (0 ≤ t ≤ len(top), a new one at the end), owned
// by epoch ep, as is the top array that now holds it.
func (s *slots) mid(t int, ep uint64) *slotMid {
	s.ownTop(ep)
	if t == len(s.top) {
		s.top = append(s.top, &slotMid{epoch: ep})
	}
	m := s.top[t]
	if m.epoch != ep {
		c := *m
		c.epoch = ep
		m = &c
		s.top[t] = m
	}
	return m
}

// ownTop makes the top array epoch ep's, copying it if it is older.
func (s *slots) ownTop(ep uint64) {
	if s.epoch != ep {
		s.top = append(make([]*slotMid, 0, len(s.top)+1), s.top...)
		s.epoch = ep
	}
}

// push puts r in a new last slot and returns its number.
func (s *slots) push(r *rec, ep uint64) int {
	i := s.n
	s.chunk(i, ep)[i&(chunkLen-1)] = *r
	s.n++
	return i
}

// set replaces the record in slot i.
func (s *slots) set(i int, r *rec, ep uint64) {
	s.chunk(i, ep)[i&(chunkLen-1)] = *r
}

// remove empties slot i by moving the last slot's record into it. It
// returns that record where it now is (nil when i was the last slot).
func (s *slots) remove(i int, ep uint64) *rec {
	last := s.n - 1
	var moved *rec
	if i != last {
		c := s.chunk(i, ep)
		c[i&(chunkLen-1)] = *s.at(last)
		moved = &c[i&(chunkLen-1)]
	}
	s.pop(ep)
	return moved
}

// pop drops the last slot. A chunk left empty is unlinked without being
// copied; otherwise the slot is cleared, so that the version keeps no
// reference to what it no longer holds.
func (s *slots) pop(ep uint64) {
	i := s.n - 1
	s.n--
	if i&(chunkLen-1) != 0 {
		s.chunk(i, ep)[i&(chunkLen-1)] = rec{}
		return
	}
	t := i >> (chunkBits + midBits)
	if i&(chunkLen*midLen-1) == 0 { // the middle node's only chunk
		s.ownTop(ep)
		s.top[t] = nil
		s.top = s.top[:t]
		return
	}
	m := s.mid(t, ep)
	k := i >> chunkBits & (midLen - 1)
	m.kids[k], m.eps[k] = nil, 0
}
