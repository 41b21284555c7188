package discovery

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// checkSlots verifies the structure of s: n slots, a head long enough for
// the first of them, exactly the middle nodes and chunks that the rest
// need, and nothing held past slot n-1 (a removed record must not be kept
// alive by the version).
func checkSlots(t *testing.T, s *slots, n int) {
	t.Helper()
	if s.n != n {
		t.Fatalf("slots: n = %d, want %d", s.n, n)
	}
	if len(s.head) < min(n, chunkLen) || cap(s.head) > chunkLen {
		t.Fatalf("slots: head of length %d, capacity %d, for %d slots", len(s.head), cap(s.head), n)
	}
	empty := func(r *rec) bool { return r.id == "" && r.addr == "" && r.sh == nil && r.meta == nil }
	for j := range s.head {
		if j >= n && !empty(&s.head[j]) {
			t.Fatalf("slots: slot %d past the last (%d) still holds %q", j, n-1, s.head[j].id)
		}
	}
	rn := max(n-chunkLen, 0) // the slots in the radix
	perMid := chunkLen * midLen
	if want := (rn + perMid - 1) / perMid; len(s.top) != want {
		t.Fatalf("slots: %d middle nodes for %d slots, want %d", len(s.top), n, want)
	}
	for _, m := range s.top[len(s.top):cap(s.top)] {
		if m != nil {
			t.Fatal("slots: the top array keeps a middle node past its end")
		}
	}
	for ti, m := range s.top {
		if m == nil {
			t.Fatalf("slots: middle node %d missing", ti)
		}
		for k, c := range m.kids {
			first := ti*perMid + k*chunkLen
			if (c != nil) != (first < rn) {
				t.Fatalf("slots: chunk of slot %d present: %v, with %d slots", chunkLen+first, c != nil, n)
			}
			if c == nil {
				continue
			}
			for j := range c {
				if first+j >= rn && !empty(&c[j]) {
					t.Fatalf("slots: slot %d past the last (%d) still holds %q", chunkLen+first+j, n-1, c[j].id)
				}
			}
		}
	}
}

// TestSlotsAgainstASlice applies random pushes, replacements and removals
// (the last slot's record moving into the removed one) to slots and to a
// plain slice, publishing a version (ending the epoch) every few steps.
// After each step it checks the slots the step touched and the last one,
// every 25 steps all of them; versions kept along the way must not have
// changed at the end. Sizes cross chunk and middle-node boundaries in both
// directions.
func TestSlotsAgainstASlice(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 5))
	r := func(k int) *rec { return &rec{id: fmt.Sprintf("r%d", k)} }
	var (
		s     slots
		model []string
		ep    uint64 = 1
		made  int
	)
	type kept struct {
		s   slots
		ids []string
	}
	var old []kept
	same := func(s *slots, ids []string) {
		t.Helper()
		checkSlots(t, s, len(ids))
		for i, id := range ids {
			if got := s.at(i).id; got != id {
				t.Fatalf("seed %d: slot %d holds %q, want %q", seed, i, got, id)
			}
		}
	}
	steps := 20000
	if testing.Short() {
		steps = 4000
	}
	for step := range steps {
		// Swing between empty and past two middle nodes' worth.
		target := []int{0, 3 * chunkLen, 2*chunkLen*midLen + 100}[step/500%3]
		touched := -1
		switch k := rng.IntN(10); {
		case len(model) > 0 && (k < 3 || k < 6 && len(model) > target):
			i := rng.IntN(len(model))
			touched = i
			moved := s.remove(i, ep)
			if i == len(model)-1 {
				if moved != nil {
					t.Fatalf("removing the last slot moved %q", moved.id)
				}
			} else if moved == nil || moved.id != model[len(model)-1] {
				t.Fatalf("removing slot %d of %d did not report %q moved", i, len(model), model[len(model)-1])
			}
			model[i] = model[len(model)-1]
			model = model[:len(model)-1]
		case len(model) > 0 && k == 6:
			i := rng.IntN(len(model))
			touched = i
			made++
			s.set(i, r(made), ep)
			model[i] = r(made).id
		default:
			made++
			if i := s.push(r(made), ep); i != len(model) {
				t.Fatalf("push into slot %d, want %d", i, len(model))
			}
			model = append(model, r(made).id)
		}
		// Many at a time (a snapshot arriving, a fleet leaving) moves the
		// size across middle nodes both ways.
		if rng.IntN(100) == 0 {
			if len(model) < target {
				for range target - len(model) {
					made++
					s.push(r(made), ep)
					model = append(model, r(made).id)
				}
			} else {
				for len(model) > target {
					i := rng.IntN(len(model))
					s.remove(i, ep)
					model[i] = model[len(model)-1]
					model = model[:len(model)-1]
				}
			}
		}
		if step%25 == 0 {
			same(&s, model)
		} else {
			checkSlot := func(i int) {
				if i >= 0 && i < len(model) && s.at(i).id != model[i] {
					t.Fatalf("seed %d step %d: slot %d holds %q, want %q", seed, step, i, s.at(i).id, model[i])
				}
			}
			checkSlot(touched)
			checkSlot(len(model) - 1)
			if s.n != len(model) {
				t.Fatalf("seed %d step %d: n = %d, want %d", seed, step, s.n, len(model))
			}
		}
		if rng.IntN(4) == 0 {
			ep++
			if rng.IntN(20) == 0 {
				old = append(old, kept{s: s, ids: slices.Clone(model)})
			}
		}
	}
	for _, k := range old {
		same(&k.s, k.ids)
	}
	t.Logf("seed %d: %d steps, %d older versions re-checked", seed, steps, len(old))
}
