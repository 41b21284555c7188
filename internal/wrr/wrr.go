// Package wrr builds weighted round-robin schedules: the order in which a
// picker with an atomic counter visits weighted targets, so that each gets
// its share of the picks, spread evenly over the cycle, with no lock and no
// allocation per pick.
package wrr

import "container/heap"

// MaxLen bounds the length of a schedule for up to MaxLen targets (a longer
// list of targets gets one slot per target at least).
const MaxLen = 4096

// Schedule returns one cycle of picks over len(weights) targets: target i
// appears in proportion to weights[i] (a weight below 1 counts as 1), the
// appearances of each spread evenly over the cycle (earliest deadline
// first: as smooth as nginx's smooth weighted round robin, though not
// always in its order; weights 5, 1, 1 give a a a b c a a where nginx
// gives a a b a c a a). Weights are divided by their greatest common
// divisor; a cycle that would still be longer than max(MaxLen,
// len(weights)) is scaled down proportionally, each target keeping at
// least one slot. Nil for no target.
func Schedule(weights []int) []uint32 {
	n := len(weights)
	if n == 0 {
		return nil
	}
	w := make([]int, n)
	g := 0
	for i, x := range weights {
		w[i] = max(x, 1)
		g = gcd(g, w[i])
	}
	total := 0
	for i := range w {
		w[i] /= g
		total += w[i]
	}
	if limit := max(MaxLen, n); total > limit {
		scaled := 0
		for i := range w {
			w[i] = max(1, w[i]*limit/total)
			scaled += w[i]
		}
		total = scaled
	}
	out := make([]uint32, 0, total)
	h := make(edf, n)
	for i := range h {
		h[i] = slot{i: uint32(i), w: w[i], k: 1}
	}
	heap.Init(&h)
	for len(out) < total {
		s := &h[0]
		out = append(out, s.i)
		s.k++
		if s.k > s.w {
			heap.Pop(&h)
		} else {
			heap.Fix(&h, 0)
		}
	}
	return out
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// slot is a target's next pick: its k-th of w in the cycle, due at the
// middle of its k-th share of the cycle, (k-½)/w, so that light targets are
// spread among heavy ones rather than left to the end.
type slot struct {
	i    uint32
	w, k int
}

// edf orders slots by deadline (earliest first), ties by index.
type edf []slot

func (h edf) Len() int { return len(h) }
func (h edf) Less(a, b int) bool {
	// (2k_a-1)/w_a < (2k_b-1)/w_b without division; a tie goes to the
	// lower index.
	l, r := (2*h[a].k-1)*h[b].w, (2*h[b].k-1)*h[a].w
	if l != r {
		return l < r
	}
	return h[a].i < h[b].i
}
func (h edf) Swap(a, b int) { h[a], h[b] = h[b], h[a] }
func (h *edf) Push(x any)   { *h = append(*h, x.(slot)) }
func (h *edf) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
