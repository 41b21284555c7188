package discovery

import (
	"slices"
	"strings"
	"sync/atomic"

	"github.com/switchboard-io/switchboard"
)

// bucket is one version of the instances that share a name, a type or a
// capability (or, for the bucket of every instance, nothing), by name then
// id. The members are held in chunks of at most chunkMax, so that a change
// copies one chunk and the list of chunks, not the whole bucket, and the
// i-th member is found by a binary search over the chunks' running counts.
//
// A bucket and its chunks carry the writer's epoch they were made in: the
// writer changes in place what its current epoch made, which no reader has
// seen, and copies anything older first. Published versions never change.
type bucket struct {
	chunks []chunk
	n      int
	off    int // members that are not Serving (draining, critical, stale)
	ep     uint64
	picks  *pickState                             // a name's or capability's, shared by its versions
	list   atomic.Pointer[[]switchboard.Instance] // the members (serving ones only, but in the bucket of every instance) as Instances, built on first use
	tab    atomic.Pointer[table]                  // the serving members by weight and zone, built on first use
}

type chunk struct {
	m   []*switchboard.Instance // not empty
	end int                     // members in this chunk and those before it
	ep  uint64
}

// chunkMax is the most members a chunk holds (4 KiB of pointers). A
// variable, so that tests can make buckets of many chunks from a few
// members.
var chunkMax = 512

// cmpNameID is the order of every listing: by name, then id.
func cmpNameID(a, b *switchboard.Instance) int {
	if c := strings.Compare(a.Name, b.Name); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}

// len returns the number of members (none for a nil bucket).
func (b *bucket) len() int {
	if b == nil {
		return 0
	}
	return b.n
}

// at returns member i, 0 ≤ i < n.
func (b *bucket) at(i int) *switchboard.Instance {
	lo, hi := 0, len(b.chunks)-1
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if b.chunks[m].end > i {
			hi = m
		} else {
			lo = m + 1
		}
	}
	c := &b.chunks[lo]
	return c.m[i-(c.end-len(c.m))]
}

// each calls fn for every member in order until fn returns false.
func (b *bucket) each(fn func(*switchboard.Instance) bool) {
	if b == nil {
		return
	}
	for _, c := range b.chunks {
		for _, p := range c.m {
			if !fn(p) {
				return
			}
		}
	}
}

// serving returns the number of members that are Serving.
func (b *bucket) serving() int {
	if b == nil {
		return 0
	}
	return b.n - b.off
}

// listing returns the members as a slice, building it on first use and
// keeping it for the other readers of this version of the bucket: the
// serving ones only, or (every) all of them. A bucket is always listed the
// same way: the bucket of every instance with every, the others without.
// Building it copies the bucket (O(k)); the writer never does, so a large
// bucket costs nothing per change unless somebody lists it.
func (b *bucket) listing(every bool) []switchboard.Instance {
	if b == nil || b.n == 0 || !every && b.off == b.n {
		return nil
	}
	if l := b.list.Load(); l != nil {
		return *l
	}
	size := b.n
	if !every {
		size -= b.off
	}
	l := make([]switchboard.Instance, 0, size)
	b.each(func(p *switchboard.Instance) bool {
		if every || p.Serving() {
			l = append(l, *p)
		}
		return true
	})
	b.list.Store(&l)
	return l
}

// find returns the chunk where x is or would go, and its place there.
func (b *bucket) find(x *switchboard.Instance) (j, i int, found bool) {
	j, _ = slices.BinarySearchFunc(b.chunks, x, func(c chunk, x *switchboard.Instance) int {
		return cmpNameID(c.m[len(c.m)-1], x)
	})
	j = min(j, len(b.chunks)-1)
	i, found = slices.BinarySearchFunc(b.chunks[j].m, x, cmpNameID)
	return j, i, found
}

// own returns chunk j's members, copied first unless epoch ep made them.
func (b *bucket) own(j int, ep uint64) []*switchboard.Instance {
	c := &b.chunks[j]
	if c.ep != ep {
		c.m, c.ep = append(make([]*switchboard.Instance, 0, len(c.m)+1), c.m...), ep
	}
	return c.m
}

// insert puts x in a bucket of epoch ep; a chunk that grows past chunkMax
// splits in two.
func (b *bucket) insert(x *switchboard.Instance, ep uint64) {
	b.n++
	if !x.Serving() {
		b.off++
	}
	if len(b.chunks) == 0 {
		b.chunks = append(b.chunks, chunk{m: []*switchboard.Instance{x}, ep: ep})
		return
	}
	j, i, _ := b.find(x)
	m := slices.Insert(b.own(j, ep), i, x)
	if len(m) > chunkMax {
		half := len(m) / 2
		next := chunk{m: slices.Clone(m[half:]), ep: ep}
		clear(m[half:])
		m = m[:half]
		b.chunks = slices.Insert(b.chunks, j+1, next)
	}
	b.chunks[j].m = m
}

// remove takes x out of a bucket of epoch ep, if it is there; a chunk left
// small joins the next one when both fit in one.
func (b *bucket) remove(x *switchboard.Instance, ep uint64) {
	if len(b.chunks) == 0 {
		return
	}
	j, i, found := b.find(x)
	if !found || b.chunks[j].m[i] != x {
		return
	}
	b.n--
	if !x.Serving() {
		b.off--
	}
	if len(b.chunks[j].m) == 1 {
		b.chunks = slices.Delete(b.chunks, j, j+1)
		return
	}
	m := slices.Delete(b.own(j, ep), i, i+1)
	if j+1 < len(b.chunks) && len(m) < chunkMax/4 && len(m)+len(b.chunks[j+1].m) <= chunkMax {
		m = append(m, b.chunks[j+1].m...)
		b.chunks = slices.Delete(b.chunks, j+1, j+2)
	}
	b.chunks[j].m = m
}

// count sets each chunk's running count, once a burst of changes is done.
func (b *bucket) count() {
	end := 0
	for j := range b.chunks {
		end += len(b.chunks[j].m)
		b.chunks[j].end = end
	}
}
