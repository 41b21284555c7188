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
// (or the next pick's) instead of inside the pick.
//
// The numbers drawn ahead wait in stripes, each on a cache line of its
// own. A pick takes its stripe's number and leaves its own in one atomic
// swap, so that every number drawn is used by exactly one pick. The stripe
// is chosen by where the picking goroutine's stack is, a hint rather than
// an identity: a goroutine that keeps picking keeps its stripe, whose line
// then stays in its core's cache, where one shared word would move between
// cores on every pick. Goroutines that share a stripe, or a goroutine
// whose stack moved, only lose that locality.
//
// The pick stays uniform: a number waiting in a stripe was drawn uniformly
// and independently of everything the picking goroutine can know, and is
// reduced to an index only when it is taken, against the version the pick
// reads (see index), so a version that grew or shrank in the meantime
// changes only which line the prefetch warmed.

// aheadFrom is the size from which a capability's random picks draw
// ahead: 16,384 records are 1 MiB, half of a core's own (L2) cache on this
// project's machine. A smaller capability's records stay in that cache,
// where drawing ahead would only add its atomic operations to each pick.
// A variable, so that tests can draw ahead in small capabilities.
var aheadFrom = 1 << 14

const (
	aheadBits    = 4
	aheadStripes = 1 << aheadBits
	aheadDepth   = 7 // with the tick, one cache line
)

// ahead is a capability's numbers drawn ahead, shared by every version of
// its bucket and made on the capability's first random pick (a capability
// nobody picks at random does not pay its kilobyte).
type ahead [aheadStripes]stripe

// stripe is one cache line of numbers drawn ahead: a pick takes the number
// at tick (mod aheadDepth) and leaves its own there, so that a goroutine
// picking alone takes each number aheadDepth picks after drawing it.
type stripe struct {
	tick atomic.Uint64
	v    [aheadDepth]atomic.Uint64
}

// cursor is what a capability's picks share across the versions of its
// bucket: the round-robin position and the numbers drawn ahead.
type cursor struct {
	rr    atomic.Uint64
	ahead atomic.Pointer[ahead]
}

// draws returns the capability's numbers drawn ahead, making them on first
// use.
func (c *cursor) draws() *ahead {
	if a := c.ahead.Load(); a != nil {
		return a
	}
	return c.makeDraws()
}

// makeDraws is draws' first use, out of line so that draws inlines: each
// stripe gets a number drawn now.
func (c *cursor) makeDraws() *ahead {
	a := new(ahead)
	for i := range a {
		for j := range a[i].v {
			a[i].v[j].Store(rand.Uint64())
		}
	}
	if c.ahead.CompareAndSwap(nil, a) {
		return a
	}
	return c.ahead.Load()
}

// stripe returns the stripe of the calling goroutine: a hash of its stack
// address, above the bits that differ between the frames of one call.
func (a *ahead) stripe() *stripe {
	var here byte
	h := uint64(uintptr(unsafe.Pointer(&here))>>13) * 0x9e3779b97f4a7c15
	return &a[h>>(64-aheadBits)]
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
// ahead in the numbers of c from aheadFrom members on.
func (s *slots) pick(c *cursor) *rec {
	if s.n < aheadFrom {
		return s.at(rand.IntN(s.n))
	}
	return s.pickAhead(c.draws())
}

// pickAhead returns the record of a uniformly random slot of s, taking the
// number a previous pick drew ahead and leaving one, its record
// prefetched, for a later pick.
func (s *slots) pickAhead(a *ahead) *rec {
	st := a.stripe()
	t := st.tick.Add(1)
	next := rand.Uint64()
	prefetch(s.at(index(next, s.n)))
	return s.at(index(st.v[t%aheadDepth].Swap(next), s.n))
}
