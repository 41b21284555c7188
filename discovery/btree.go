package discovery

import (
	"cmp"
	"slices"
)

// The cache's indexes are persistent (copy-on-write) B+ trees that count
// their elements, so that one change copies only the path from the root to
// one leaf (O(log n)), every published version stays valid for the readers
// that hold it, and the i-th element (a pick) is found in O(log n) without
// allocating.
//
// Nodes carry the epoch they were created in. The writer mutates in place
// the nodes of its current epoch, which no reader can reach yet, and copies
// any older node before changing it; publishing a version ends the epoch.
// A burst of changes (a snapshot of 100,000 instances) is therefore built
// mostly in place, and a single change costs a few node copies.

const (
	maxNode = 64          // elements of a leaf, children of an inner node
	minNode = maxNode / 4 // below this a non-root node borrows or merges
)

// node is a B+ tree node. In a leaf, items are the elements in order. In an
// inner node, items[i] is the first element under kids[i] and cum[i] counts
// the elements under kids[0..i]. An inner node whose children are leaves
// also holds, in heads[i], the items of kids[i] (the same slice): finding
// the i-th element then reads the leaf's elements without first loading
// the leaf, one dependent cache miss fewer when the leaves are cold. Every
// change to a leaf goes through its parent, which sets heads again; other
// nodes have no heads.
type node[T any] struct {
	epoch uint64
	items []T
	kids  []*node[T]
	cum   []int32
	heads [][]T
}

// tree is one version of a persistent B+ tree; the zero value is empty.
// Published trees are never modified.
type tree[T any] struct {
	root *node[T]
	n    int
}

func (n *node[T]) leaf() bool { return n.kids == nil }

// size is the number of slots used: elements of a leaf, children otherwise.
func (n *node[T]) size() int { return len(n.items) }

// count is the number of elements under n.
func (n *node[T]) count() int {
	if n.leaf() {
		return len(n.items)
	}
	return int(n.cum[len(n.cum)-1])
}

// own returns n if it belongs to epoch ep, or a copy of it that does.
func own[T any](n *node[T], ep uint64) *node[T] {
	if n.epoch == ep {
		return n
	}
	c := &node[T]{epoch: ep, items: append(make([]T, 0, len(n.items)+1), n.items...)}
	if !n.leaf() {
		c.kids = append(make([]*node[T], 0, len(n.kids)+1), n.kids...)
		c.cum = append(make([]int32, 0, len(n.cum)+1), n.cum...)
	}
	if n.heads != nil {
		c.heads = append(make([][]T, 0, len(n.heads)+1), n.heads...)
	}
	return c
}

// search returns the first index whose element is not less than x, and
// whether it equals x.
func search[T any](items []T, x T, cmp func(a, b T) int) (int, bool) {
	lo, hi := 0, len(items)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if cmp(items[m], x) < 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(items) && cmp(items[lo], x) == 0
}

// child is the index of the child of an inner node that holds (or would
// hold) x, given search's answer for x among the node's items.
func child(i int, found bool) int {
	if found || i == 0 {
		return i
	}
	return i - 1
}

// refresh recomputes an inner node's separators, counts and heads from
// its children.
func (n *node[T]) refresh() {
	var sum int32
	for k, kid := range n.kids {
		n.items[k] = kid.items[0]
		sum += int32(kid.count())
		n.cum[k] = sum
		if n.heads != nil {
			n.heads[k] = kid.items
		}
	}
}

// recount refreshes the separators, counts and heads of children from..to, which
// changed, and moves the counts after them by d, the change in the number
// of elements under n (reading every child would cost a cache miss each).
func (n *node[T]) recount(from, to int, d int32) {
	var sum int32
	if from > 0 {
		sum = n.cum[from-1]
	}
	for k := from; k <= to && k < len(n.kids); k++ {
		n.items[k] = n.kids[k].items[0]
		sum += int32(n.kids[k].count())
		n.cum[k] = sum
		if n.heads != nil {
			n.heads[k] = n.kids[k].items
		}
	}
	for k := to + 1; k < len(n.cum); k++ {
		n.cum[k] += d
	}
}

// split moves the upper part of an overfull n into a new right sibling.
// after is the index after the element that overfilled it: n keeps at
// least half, and up to that element as long as the sibling gets more than
// minNode. Elements that arrive in order, at the end of a node (as a
// snapshot arrives) or at the end of a run inside it (a fleet arriving in
// id order joins each name's run of a capability), then fill nodes to
// three quarters instead of one half.
func (n *node[T]) split(ep uint64, after int) *node[T] {
	half := min(max(after, len(n.items)/2), len(n.items)-minNode-1)
	r := &node[T]{epoch: ep, items: append(make([]T, 0, maxNode+1), n.items[half:]...)}
	clear(n.items[half:])
	n.items = n.items[:half]
	if !n.leaf() {
		r.kids = append(make([]*node[T], 0, maxNode+1), n.kids[half:]...)
		r.cum = make([]int32, len(r.kids), maxNode+1)
		clear(n.kids[half:])
		n.kids = n.kids[:half]
		n.cum = n.cum[:half]
		if n.heads != nil {
			r.heads = make([][]T, len(r.kids), maxNode+1)
			clear(n.heads[half:])
			n.heads = n.heads[:half]
		}
		r.refresh()
	}
	return r
}

// set inserts x, or replaces the element equal to x; it reports whether x
// was new.
func (t *tree[T]) set(x T, ep uint64, cmp func(a, b T) int) bool {
	if t.root == nil {
		t.root = &node[T]{epoch: ep, items: []T{x}}
		t.n = 1
		return true
	}
	t.root = own(t.root, ep)
	right, added := t.root.set(x, ep, cmp)
	if right != nil {
		l := t.root
		t.root = &node[T]{epoch: ep, items: make([]T, 2, 4), kids: []*node[T]{l, right}, cum: make([]int32, 2, 4)}
		if l.leaf() {
			t.root.heads = make([][]T, 2, 4)
		}
		t.root.refresh()
	}
	if added {
		t.n++
	}
	return added
}

func (n *node[T]) set(x T, ep uint64, cmp func(a, b T) int) (*node[T], bool) {
	i, found := search(n.items, x, cmp)
	if n.leaf() {
		if found {
			n.items[i] = x
			return nil, false
		}
		n.items = slices.Insert(n.items, i, x)
		i++ // the index after x
	} else {
		j := child(i, found)
		kid := own(n.kids[j], ep)
		n.kids[j] = kid
		right, added := kid.set(x, ep, cmp)
		i = j + 1
		var d int32
		if added {
			d = 1
		}
		if right != nil {
			n.kids = slices.Insert(n.kids, j+1, right)
			n.items = slices.Insert(n.items, j+1, right.items[0])
			n.cum = slices.Insert(n.cum, j+1, 0)
			if n.heads != nil {
				n.heads = slices.Insert(n.heads, j+1, nil)
			}
			n.recount(j, j+1, d)
			i++
		} else {
			n.recount(j, j, d)
		}
		if !added {
			return nil, false
		}
	}
	if len(n.items) <= maxNode {
		return nil, true
	}
	return n.split(ep, i), true
}

// delete removes the element equal to x; it reports whether there was one.
func (t *tree[T]) delete(x T, ep uint64, cmp func(a, b T) int) bool {
	if !t.has(x, cmp) {
		return false
	}
	t.root = own(t.root, ep)
	t.root.delete(x, ep, cmp)
	t.n--
	switch {
	case t.root.leaf() && len(t.root.items) == 0:
		t.root = nil
	case !t.root.leaf() && len(t.root.kids) == 1:
		t.root = t.root.kids[0]
	}
	return true
}

// delete removes x, which is under n.
func (n *node[T]) delete(x T, ep uint64, cmp func(a, b T) int) {
	i, found := search(n.items, x, cmp)
	if n.leaf() {
		n.items = slices.Delete(n.items, i, i+1)
		return
	}
	j := child(i, found)
	kid := own(n.kids[j], ep)
	n.kids[j] = kid
	kid.delete(x, ep, cmp)
	if kid.size() < minNode && len(n.kids) > 1 {
		l, merged := n.rebalance(j, ep)
		if merged {
			n.recount(l, l, -1)
		} else {
			n.recount(l, l+1, -1)
		}
		return
	}
	n.recount(j, j, -1)
}

// rebalance fixes the underfull child j by merging it with a sibling, or,
// when both would not fit in one node, by sharing their slots evenly. It
// returns the index of the left one of the two, and whether they merged.
func (n *node[T]) rebalance(j int, ep uint64) (int, bool) {
	l, r := j, j+1
	if r == len(n.kids) {
		l, r = j-1, j
	}
	a, b := own(n.kids[l], ep), own(n.kids[r], ep)
	n.kids[l], n.kids[r] = a, b
	if a.size()+b.size() <= maxNode {
		a.items = append(a.items, b.items...)
		if !a.leaf() {
			a.kids = append(a.kids, b.kids...)
			a.cum = append(a.cum, b.cum...)
			if a.heads != nil {
				a.heads = append(a.heads, b.heads...)
			}
			a.refresh()
		}
		n.kids = slices.Delete(n.kids, r, r+1)
		n.items = slices.Delete(n.items, r, r+1)
		n.cum = slices.Delete(n.cum, r, r+1)
		if n.heads != nil {
			n.heads = slices.Delete(n.heads, r, r+1)
		}
		return l, true
	}
	want := (a.size() + b.size()) / 2
	if k := want - a.size(); k > 0 { // move b's first k to a's end
		a.items = append(a.items, b.items[:k]...)
		b.items = slices.Delete(b.items, 0, k)
		if !a.leaf() {
			a.kids = append(a.kids, b.kids[:k]...)
			a.cum = append(a.cum, b.cum[:k]...)
			b.kids = slices.Delete(b.kids, 0, k)
			b.cum = slices.Delete(b.cum, 0, k)
			if a.heads != nil {
				a.heads = append(a.heads, b.heads[:k]...)
				b.heads = slices.Delete(b.heads, 0, k)
			}
		}
	} else if k := -k; k > 0 { // move a's last k to b's front
		at := len(a.items) - k
		b.items = slices.Insert(b.items, 0, a.items[at:]...)
		clear(a.items[at:])
		a.items = a.items[:at]
		if !a.leaf() {
			b.kids = slices.Insert(b.kids, 0, a.kids[at:]...)
			b.cum = slices.Insert(b.cum, 0, a.cum[at:]...)
			clear(a.kids[at:])
			a.kids = a.kids[:at]
			a.cum = a.cum[:at]
			if a.heads != nil {
				b.heads = slices.Insert(b.heads, 0, a.heads[at:]...)
				clear(a.heads[at:])
				a.heads = a.heads[:at]
			}
		}
	}
	if !a.leaf() {
		a.refresh()
		b.refresh()
	}
	return l, false
}

// has reports whether an element equal to x is in the tree.
func (t *tree[T]) has(x T, cmp func(a, b T) int) bool {
	_, ok := t.get(x, cmp)
	return ok
}

// get returns the element equal to x, as the leaf holds it.
func (t *tree[T]) get(x T, cmp func(a, b T) int) (T, bool) {
	var zero T
	n := t.root
	if n == nil {
		return zero, false
	}
	for {
		i, found := search(n.items, x, cmp)
		if n.leaf() {
			if found {
				return n.items[i], true
			}
			return zero, false
		}
		if !found && i == 0 {
			return zero, false
		}
		n = n.kids[child(i, found)]
	}
}

// find returns the element whose key is k. key must order the elements as
// the tree does.
func find[T any, K cmp.Ordered](t *tree[T], k K, key func(T) K) (T, bool) {
	var zero T
	n := t.root
	if n == nil {
		return zero, false
	}
	for {
		lo, hi := 0, len(n.items)
		for lo < hi {
			m := int(uint(lo+hi) >> 1)
			if key(n.items[m]) < k {
				lo = m + 1
			} else {
				hi = m
			}
		}
		if lo < len(n.items) && key(n.items[lo]) == k {
			if n.leaf() {
				return n.items[lo], true
			}
			n = n.kids[lo]
			continue
		}
		if n.leaf() || lo == 0 {
			return zero, false
		}
		n = n.kids[lo-1]
	}
}

// at returns the i-th element (0 ≤ i < t.n).
func (t *tree[T]) at(i int) T { return *t.ptrAt(i) }

// ptrAt returns the i-th element (0 ≤ i < t.n) where it is held, in its
// leaf: read it, never write it. Below the root it reads only the counts
// and kids of inner nodes and then, from the heads of the last one, the
// element: the leaf node itself is not loaded (one dependent cache miss
// fewer when the leaves are cold).
//
// The child is found by interpolation: nodes hold between a quarter and
// all of maxNode, so the child of the i-th of a node's m elements is near
// i·len(kids)/m, and a short walk from that guess finds it. A binary
// search (measured, branching or not) took half again as long in a pick
// at a random index: its comparisons are unpredictable, or, without
// branches, each waits for the load before it.
func (t *tree[T]) ptrAt(i int) *T {
	n := t.root
	if n.leaf() {
		return &n.items[i]
	}
	for {
		cum := n.cum
		last := len(cum) - 1
		k := min(i*len(cum)/int(cum[last]), last)
		// The first k with cum[k] > i: it exists since i < cum[last].
		for int(cum[k]) <= i {
			k++
		}
		for k > 0 && int(cum[k-1]) > i {
			k--
		}
		if k > 0 {
			i -= int(cum[k-1])
		}
		if n.heads != nil {
			return &n.heads[k][i]
		}
		n = n.kids[k]
	}
}

// each calls fn for every element in order until fn returns false; it
// reports whether it reached the end.
func (t *tree[T]) each(fn func(T) bool) bool {
	if t.root == nil {
		return true
	}
	return t.root.each(fn)
}

func (n *node[T]) each(fn func(T) bool) bool {
	if n.leaf() {
		for _, x := range n.items {
			if !fn(x) {
				return false
			}
		}
		return true
	}
	for _, k := range n.kids {
		if !k.each(fn) {
			return false
		}
	}
	return true
}

// eachPtr is each, with each element passed where it is held (read it,
// never write it): for elements too large to copy for every call.
func (t *tree[T]) eachPtr(fn func(*T) bool) bool {
	if t.root == nil {
		return true
	}
	return t.root.eachPtr(fn)
}

func (n *node[T]) eachPtr(fn func(*T) bool) bool {
	if n.leaf() {
		for i := range n.items {
			if !fn(&n.items[i]) {
				return false
			}
		}
		return true
	}
	for _, k := range n.kids {
		if !k.eachPtr(fn) {
			return false
		}
	}
	return true
}
