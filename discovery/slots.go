package discovery

import "slices"

// A capability bucket keeps, besides its tree in name, id order (which
// listings and iteration walk), a copy of each member's record in a slot
// of its own: slots are numbered 0 … n-1 with no gap and in no particular
// order, so a pick draws a number and finds that slot by shifts alone.
//
// slots is a persistent radix of fixed-size chunks: a top array of middle
// nodes, each of up to 64 chunks of 64 records (4 KiB, exactly a size
// class of Go's allocator), after a first chunk of its own (head). The
// i-th record past the first 64 is top[j>>12].kids[j>>6&63][j&63] with
// j = i-64: two loads from small arrays (at 100,000 members, 25 top
// entries and 25 middle nodes of 1.5 KiB of chunk slices), then the
// record's own line — no search, no comparison, no count to walk, which
// is what a B+ tree's pick pays on top of that miss.
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
// epochs it carries make the writer copy the shared arrays before
// changing them.
//
// The first chunkLen slots live in head, a chunk of its own that grows as
// it fills (a capability of a few members keeps only their records, not a
// middle node and a whole chunk); the radix under top holds the slots
// from chunkLen on.
type slots struct {
	head   []rec
	headEp uint64 // the epoch head's array was made in
	top    []*slotMid
	epoch  uint64 // the epoch top's array was made in
	n      int
	ahead  *ahead // random picks' numbers drawn ahead, from aheadFrom members on
}

// at returns the record in slot i (0 ≤ i < n) where it is held: read it,
// never write it.
func (s *slots) at(i int) *rec {
	if i < chunkLen {
		return &s.head[i]
	}
	i -= chunkLen
	return &s.top[i>>(chunkBits+midBits)].kids[i>>chunkBits&(midLen-1)][i&(chunkLen-1)]
}

// own returns the record in slot i (0 ≤ i ≤ n, n being the slot a push
// fills) in memory owned by epoch ep, to write.
func (s *slots) own(i int, ep uint64) *rec {
	if i < chunkLen {
		return &s.headChunk(i, ep)[i]
	}
	i -= chunkLen
	return &s.chunk(i, ep)[i&(chunkLen-1)]
}

// headChunk returns head owned by epoch ep and long enough to hold slot i
// (i < chunkLen): copied if an older epoch made it, grown by doubling
// when it is full. Its length never shrinks (pop clears a slot instead),
// so the slots past n within it are always empty.
func (s *slots) headChunk(i int, ep uint64) []rec {
	need := max(len(s.head), i+1)
	if s.headEp == ep && need <= cap(s.head) {
		s.head = s.head[:need]
		return s.head
	}
	c := cap(s.head)
	if need > c {
		c = min(max(2*c, need), chunkLen)
	}
	h := make([]rec, need, c)
	copy(h, s.head)
	s.head, s.headEp = h, ep
	return h
}

// chunk returns the chunk of radix slot i (slot chunkLen+i; 0 ≤ i ≤ the
// radix's count, that count being the slot a push fills), owned by epoch
// ep: made in it, or copied into it along with the middle node and top
// array above it.
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
	*s.own(i, ep) = *r
	s.n++
	return i
}

// set replaces the record in slot i.
func (s *slots) set(i int, r *rec, ep uint64) {
	*s.own(i, ep) = *r
}

// remove empties slot i by moving the last slot's record into it. It
// returns that record where it now is (nil when i was the last slot).
func (s *slots) remove(i int, ep uint64) *rec {
	last := s.n - 1
	var moved *rec
	if i != last {
		moved = s.own(i, ep)
		*moved = *s.at(last)
	}
	s.pop(ep)
	return moved
}

// pop drops the last slot. In the radix, a chunk left empty is unlinked
// without being copied; otherwise the slot is cleared, so that the version
// keeps no reference to what it no longer holds.
func (s *slots) pop(ep uint64) {
	i := s.n - 1
	s.n--
	if i < chunkLen || (i-chunkLen)&(chunkLen-1) != 0 {
		*s.own(i, ep) = rec{}
		return
	}
	i -= chunkLen
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
