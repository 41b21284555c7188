package discovery

import (
	"math/bits"
	"math/rand/v2"
	"sync/atomic"
	"unsafe"
)

// A random pick among a capability of 100,000 members reads one record at
// a random place in 6.4 MB of slots: more than the core's caches hold, so
// the read waits for memory, and it cannot be issued before the number is
// drawn. A pick therefore draws ahead: it takes the number a previous pick
// drew, and draws the number a later pick will take, prefetching that
// one's record, so that the wait for memory runs beside the caller's work
// (or the next picks) instead of inside the pick.
//
// The numbers drawn ahead wait in stripes, each on a cache line of its
// own. A pick takes a number from its stripe and leaves its own in its
// place in one atomic swap, so that no number is used by two picks (those
// still waiting when the capability is forgotten are used by none). The
// stripe is chosen by where the picking goroutine's stack is, a hint
// rather than an identity: a goroutine that keeps picking keeps its
// stripe, whose line then stays in its core's cache, where one shared
// word would move between cores on every pick. Goroutines that share a
// stripe, or a goroutine whose stack moved, only lose that locality.
//
// The pick stays uniform: a number waiting in a stripe was drawn uniformly
// and independently of everything the picking goroutine can know, and is
// reduced to an index only when it is taken, against the version the pick
// reads (see index), so a version that grew or shrank in the meantime
// changes only which line the prefetch warmed.

// aheadFrom is the size from which a capability's random picks draw
// ahead: 16,384 records are 1 MiB, the whole of a core's own (L2) cache
// on this project's machine; below it, drawing ahead measured no faster
// and adds its atomic operations to each pick. A variable, so that tests
// can draw ahead in small capabilities.
var aheadFrom = 1 << 14

const (
	aheadBits    = 4
	aheadStripes = 1 << aheadBits
	aheadDepth   = 7 // with the tick, one cache line
)

// ahead is a capability's numbers drawn ahead. The writer makes them when
// the capability first reaches aheadFrom members, and every later version
// of its slots shares them, as the round-robin cursor is shared.
type ahead [aheadStripes]stripe

// stripe is one cache line of numbers drawn ahead: a pick takes the number
// at tick (mod aheadDepth) and leaves its own there, so that a goroutine
// picking alone takes each number aheadDepth picks after drawing it.
type stripe struct {
	tick atomic.Uint64
	v    [aheadDepth]atomic.Uint64
}

// newAhead returns numbers drawn ahead, each stripe full of numbers drawn
// now.
func newAhead() *ahead {
	a := new(ahead)
	for i := range a {
		for j := range a[i].v {
			a[i].v[j].Store(rand.Uint64())
		}
	}
	return a
}

// stripe returns the stripe of the calling goroutine: a hash of its stack
// address above the lowest 11 bits. A new goroutine's stack is 2 KiB: with
// fewer bits dropped one goroutine could change stripes between calls
// from different depths, with more, goroutines side by side in memory
// would share a stripe whatever the hash.
func (a *ahead) stripe() *stripe {
	var here byte
	h := uint64(uintptr(unsafe.Pointer(&here))>>11) * 0x9e3779b97f4a7c15
	return &a[h>>(64-aheadBits)]
}

// take returns a number a pick before left in st, leaving next in its
// place.
func (st *stripe) take(next uint64) uint64 {
	t := st.tick.Add(1)
	return st.v[t%aheadDepth].Swap(next)
}

// index reduces a uniform 64-bit number to a uniform index in [0, n), n > 0:
// the high word of r·n (Lemire's method). The few numbers that would make
// some indices one in 2⁶⁴/n more likely than others are replaced by a new
// draw, so the result is exactly uniform.
func index(r uint64, n int) int {
	hi, lo := bits.Mul64(r, uint64(n))
	if lo < uint64(n) && lo < -uint64(n)%uint64(n) { // among the 2⁶⁴ mod n that make the bias
		return rand.IntN(n)
	}
	return int(hi)
}

// pick returns the record of a uniformly random slot of s (n > 0), drawing
// ahead from aheadFrom members on.
func (s *slots) pick() *rec {
	if s.ahead == nil || s.n < aheadFrom {
		return s.at(rand.IntN(s.n))
	}
	return s.pickAhead()
}

// pickAhead returns the record of a uniformly random slot of s, taking the
// number a previous pick drew ahead and leaving one, its record
// prefetched, for a later pick.
func (s *slots) pickAhead() *rec {
	next := rand.Uint64()
	prefetch(s.at(index(next, s.n)))
	return s.at(index(s.ahead.stripe().take(next), s.n))
}
