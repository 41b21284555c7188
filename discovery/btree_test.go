package discovery

import (
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// check verifies a tree's structure: sizes within bounds, separators equal
// to each child's first element, all leaves at one depth, the element count,
// and the elements in strictly increasing order, equal to want.
func check[T any](t *testing.T, tr *tree[T], cmp func(a, b T) int, want []T) {
	t.Helper()
	if tr.n != len(want) {
		t.Fatalf("n = %d, want %d", tr.n, len(want))
	}
	if tr.root == nil {
		if len(want) != 0 {
			t.Fatalf("empty root, want %d elements", len(want))
		}
		return
	}
	leafDepth := -1
	var walk func(n *node[T], depth int, root bool) int
	walk = func(n *node[T], depth int, root bool) int {
		if len(n.items) > maxNode || (!root && len(n.items) < minNode) {
			t.Fatalf("node with %d slots at depth %d", len(n.items), depth)
		}
		if n.leaf() {
			if leafDepth == -1 {
				leafDepth = depth
			} else if leafDepth != depth {
				t.Fatalf("leaves at depths %d and %d", leafDepth, depth)
			}
			return len(n.items)
		}
		if root && len(n.kids) < 2 {
			t.Fatal("inner root with one child")
		}
		if len(n.kids) != len(n.items) {
			t.Fatalf("inner node: %d items, %d kids", len(n.items), len(n.kids))
		}
		sum := 0
		for k, kid := range n.kids {
			if cmp(n.items[k], kid.items[0]) != 0 {
				t.Fatalf("separator %d is not its child's first element", k)
			}
			sum += walk(kid, depth+1, false)
		}
		return sum
	}
	if got := walk(tr.root, 0, true); got != len(want) {
		t.Fatalf("%d elements under the root, want %d", got, len(want))
	}
	i := 0
	tr.each(func(x T) bool {
		if i > 0 && cmp(want[i-1], x) >= 0 {
			t.Fatalf("element %d is not above element %d", i, i-1)
		}
		if cmp(x, want[i]) != 0 {
			t.Fatalf("element %d differs", i)
		}
		i++
		return true
	})
}

type version struct {
	tr   tree[int]
	want []int
}

// TestTreeAgainstASortedSlice applies random inserts and deletes, publishing
// a version every few operations, and checks the tree and every kept older
// version against sorted slices.
func TestTreeAgainstASortedSlice(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 1))
	var tr tree[int]
	var want []int
	ep := uint64(1)
	var kept []version
	for step := 0; step < 20000; step++ {
		// Grow to a few thousand, then shrink to zero, then grow again:
		// every split, borrow and merge path is taken.
		phase := (step / 5000) % 2
		x := rng.IntN(4000)
		if (phase == 0 && rng.IntN(4) != 0) || (phase == 1 && rng.IntN(4) == 0) {
			i, found := slices.BinarySearch(want, x)
			if added := tr.set(x, ep, cmp.Compare[int]); added == found {
				t.Fatalf("seed %d step %d: set(%d) added=%v, present=%v", seed, step, x, added, found)
			}
			if !found {
				want = slices.Insert(want, i, x)
			}
		} else {
			i, found := slices.BinarySearch(want, x)
			if _, deleted := tr.delete(x, ep, cmp.Compare[int]); deleted != found {
				t.Fatalf("seed %d step %d: delete(%d) = %v, present=%v", seed, step, x, deleted, found)
			}
			if found {
				want = slices.Delete(want, i, i+1)
			}
		}
		if rng.IntN(10) == 0 { // publish
			check(t, &tr, cmp.Compare[int], want)
			if rng.IntN(20) == 0 {
				kept = append(kept, version{tr: tr, want: slices.Clone(want)})
			}
			ep++
		}
		for _, k := range want[:min(len(want), 3)] {
			if v, ok := find(&tr, k, func(x int) int { return x }); !ok || v != k {
				t.Fatalf("seed %d: find(%d) = %d, %v", seed, k, v, ok)
			}
		}
	}
	for i := range kept {
		check(t, &kept[i].tr, cmp.Compare[int], kept[i].want)
	}
	if len(kept) == 0 {
		t.Fatal("no version kept")
	}
	t.Logf("seed %d: %d older versions checked unchanged", seed, len(kept))
}

func TestTreeFindMissing(t *testing.T) {
	var tr tree[string]
	for i := 0; i < 1000; i++ {
		tr.set(fmt.Sprintf("k%04d", i*2), 1, cmp.Compare[string])
	}
	id := func(s string) string { return s }
	for i := 0; i < 2000; i++ {
		k := fmt.Sprintf("k%04d", i)
		_, ok := find(&tr, k, id)
		if ok != (i%2 == 0) {
			t.Fatalf("find(%s) = %v", k, ok)
		}
	}
	if _, ok := find(&tr, "a", id); ok {
		t.Fatal("found a key below the first")
	}
	if _, ok := find(&tr, "z", id); ok {
		t.Fatal("found a key above the last")
	}
}

// TestTreeOrderedLoad loads elements in order (as a snapshot arrives), in
// one epoch and one per element, then deletes them in random order.
func TestTreeOrderedLoad(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 3))
	for _, perElement := range []bool{false, true} {
		var tr tree[int]
		var want []int
		ep := uint64(1)
		for i := 0; i < 10000; i++ {
			tr.set(i, ep, cmp.Compare[int])
			want = append(want, i)
			if perElement {
				ep++
			}
		}
		check(t, &tr, cmp.Compare[int], want)
		for _, i := range rng.Perm(10000) {
			tr.delete(i, ep, cmp.Compare[int])
			want = slices.DeleteFunc(want, func(x int) bool { return x == i })
			if len(want)%97 == 0 {
				check(t, &tr, cmp.Compare[int], want)
				ep++
			}
		}
		check(t, &tr, cmp.Compare[int], want)
	}
}

// TestTreeClusteredChurn inserts and deletes runs of neighbouring keys in a
// tree of tens of thousands, publishing now and then, so that whole inner
// nodes fill up and empty: an underfull inner node then merges with, or
// takes children from, a sibling on either side, which scattered changes
// rarely cause.
func TestTreeClusteredChurn(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 5))
	var tr tree[int]
	present := map[int]bool{}
	ep := uint64(1)
	const keys = 60000
	for round := 0; round < 300; round++ {
		lo := rng.IntN(keys)
		hi := min(keys, lo+1+rng.IntN(6000))
		insert := len(present) < 8000 || (len(present) < 40000 && rng.IntN(2) == 0)
		for x := lo; x < hi; x++ {
			if insert {
				tr.set(x, ep, cmp.Compare[int])
				present[x] = true
			} else if present[x] {
				tr.delete(x, ep, cmp.Compare[int])
				delete(present, x)
			}
		}
		if round%10 == 0 {
			ep++
		}
		if round%25 == 0 || round == 299 {
			want := slices.Sorted(maps.Keys(present))
			check(t, &tr, cmp.Compare[int], want)
		}
	}
}
