package discovery

import (
	"cmp"
	"slices"
)

// The cache's indexes are persistent (copy-on-write) B+ trees, so that one
// change copies only the path from the root to one leaf (O(log n)) and
// every published version stays valid for the readers that hold it.
//
// Nodes carry the epoch they were created in. The writer mutates in place
// the nodes of its current epoch, which no reader can reach yet, and copies
// any older node before changing it; publishing a version ends the epoch.
// A burst of changes (a snapshot of 100,000 instances) is therefore built
// mostly in place, and a single change costs a few node copies.
//
// A pick does not use these trees: it reads a capability's slots (see
// slots), which find the i-th member by shifts instead of by counts.

const (
	maxNode = 64          // elements of a leaf, children of an inner node
	minNode = maxNode / 4 // below this a non-root node borrows or merges
)

// node is a B+ tree node. In a leaf, items are the elements in order. In an
// inner node, items[i] is the first element under kids[i].
type node[T any] struct {
	epoch uint64
	items []T
	kids  []*node[T]
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

// own returns n if it belongs to epoch ep, or a copy of it that does.
func own[T any](n *node[T], ep uint64) *node[T] {
	if n.epoch == ep {
		return n
	}
	c := &node[T]{epoch: ep, items: append(make([]T, 0, len(n.items)+1), n.items...)}
	if !n.leaf() {
		c.kids = append(make([]*node[T], 0, len(n.kids)+1), n.kids...)
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

// separate sets the separators of children from..to (which changed) to
// their first elements.
func (n *node[T]) separate(from, to int) {
	for k := from; k <= to && k < len(n.kids); k++ {
		n.items[k] = n.kids[k].items[0]
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
		clear(n.kids[half:])
		n.kids = n.kids[:half]
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
		t.root = &node[T]{epoch: ep, items: []T{l.items[0], right.items[0]}, kids: []*node[T]{l, right}}
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
		if right != nil {
			n.kids = slices.Insert(n.kids, j+1, right)
			n.items = slices.Insert(n.items, j+1, right.items[0])
			i++
		}
		n.separate(j, j)
		if !added {
			return nil, false
		}
	}
	if len(n.items) <= maxNode {
		return nil, true
	}
	return n.split(ep, i), true
}

// delete removes the element equal to x and returns it, as the leaf held
// it; ok is false (and nothing is copied) when there was none.
func (t *tree[T]) delete(x T, ep uint64, cmp func(a, b T) int) (e T, ok bool) {
	if e, ok = t.get(x, cmp); !ok {
		return e, false
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
	return e, true
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
		l := n.rebalance(j, ep)
		n.separate(l, l+1)
		return
	}
	n.separate(j, j)
}

// rebalance fixes the underfull child j by merging it with a sibling, or,
// when both would not fit in one node, by sharing their slots evenly. It
// returns the index of the left one of the two.
func (n *node[T]) rebalance(j int, ep uint64) int {
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
		}
		n.kids = slices.Delete(n.kids, r, r+1)
		n.items = slices.Delete(n.items, r, r+1)
		return l
	}
	want := (a.size() + b.size()) / 2
	if k := want - a.size(); k > 0 { // move b's first k to a's end
		a.items = append(a.items, b.items[:k]...)
		b.items = slices.Delete(b.items, 0, k)
		if !a.leaf() {
			a.kids = append(a.kids, b.kids[:k]...)
			b.kids = slices.Delete(b.kids, 0, k)
		}
	} else if k := -k; k > 0 { // move a's last k to b's front
		at := len(a.items) - k
		b.items = slices.Insert(b.items, 0, a.items[at:]...)
		clear(a.items[at:])
		a.items = a.items[:at]
		if !a.leaf() {
			b.kids = slices.Insert(b.kids, 0, a.kids[at:]...)
			clear(a.kids[at:])
			a.kids = a.kids[:at]
		}
	}
	return l
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
