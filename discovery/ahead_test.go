package discovery

import (
	"math"
	"math/big"
	"math/bits"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/switchboard-io/switchboard"
)

// TestIndexIsExact checks index's reduction against exact arithmetic: the
// high word of r·n stands, in [0, n), unless the low word is one of the
// 2⁶⁴ mod n values that would make the bias, and then a new draw, still in
// [0, n), replaces it. The numbers tried include, for each n, those whose
// low word lands at 0, just below the threshold and at it.
func TestIndexIsExact(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 5))
	two64 := new(big.Int).Lsh(big.NewInt(1), 64)
	ns := []int{1, 2, 3, 7, 100000, math.MaxInt}
	if bits.UintSize == 64 { // sizes an int holds only there
		big1, big2 := uint64(1)<<62+1, uint64(3)<<61
		ns = append(ns, int(big1), int(big2))
	}
	for range 50 {
		ns = append(ns, 1+rng.IntN(math.MaxInt))
	}
	for _, n := range ns {
		thresh := new(big.Int).Mod(two64, big.NewInt(int64(n))).Uint64()
		rs := []uint64{0, 1, math.MaxUint64, math.MaxUint64 - 1}
		for range 200 {
			rs = append(rs, rng.Uint64())
		}
		// The numbers whose low word lands just below and at the threshold.
		if thresh > 0 {
			for _, lo := range []uint64{0, thresh - 1, thresh} {
				// r·n ≡ lo (mod 2⁶⁴) has a solution when gcd(n, 2⁶⁴) divides lo.
				if r, ok := solve(uint64(n), lo); ok {
					if r*uint64(n) != lo {
						t.Fatalf("solve(%d, %d) = %d: r·n = %d", n, lo, r, r*uint64(n))
					}
					rs = append(rs, r)
				}
			}
		}
		for _, r := range rs {
			prod := new(big.Int).Mul(new(big.Int).SetUint64(r), big.NewInt(int64(n)))
			hi := new(big.Int).Rsh(prod, 64).Uint64()
			lo := new(big.Int).Mod(prod, two64).Uint64()
			got := index(r, n)
			if got < 0 || got >= n {
				t.Fatalf("seed %d: index(%d, %d) = %d, out of [0, n)", seed, r, n, got)
			}
			if lo >= thresh && uint64(got) != hi {
				t.Fatalf("seed %d: index(%d, %d) = %d, want the high word %d (low word %d ≥ %d)", seed, r, n, got, hi, lo, thresh)
			}
			// A new draw equals the high word once in n: past 2³², a
			// match says there was no new draw.
			if lo < thresh && uint64(n) > 1<<32 && uint64(got) == hi {
				t.Fatalf("seed %d: index(%d, %d) kept the high word %d, whose low word %d < %d makes the bias", seed, r, n, hi, lo, thresh)
			}
		}
	}
}

// solve returns an r with r·n ≡ lo (mod 2⁶⁴), when there is one.
func solve(n, lo uint64) (uint64, bool) {
	z := bits.TrailingZeros64(n)
	if lo&(1<<z-1) != 0 {
		return 0, false
	}
	odd := n >> z
	inv := odd // Newton's iteration for the inverse of an odd number mod 2⁶⁴
	for range 6 {
		inv *= 2 - odd*inv
	}
	return (lo >> z) * inv, true
}

// TestPickAheadOutlivesVersions draws numbers ahead in a capability of
// 3,000 members, then shrinks it to one member and grows it again: the
// numbers drawn against the larger version must still give a member of
// the one each pick reads, and picks from many goroutines at once, each on
// its own stripe or sharing one, must stay uniform.
func TestPickAheadOutlivesVersions(t *testing.T) {
	drawAheadAlways(t)
	const cp = "all"
	w, s := fleetWriter(3000)
	ids := fleetIDs(3000)
	for range 100 {
		if _, ok := s.PickRandom(cp); !ok {
			t.Fatal("no pick")
		}
	}
	drewAhead(t, s, cp)
	for _, id := range ids[1:] {
		w.apply(&switchboard.Event{Kind: switchboard.EventRemoved, Instance: switchboard.Instance{ID: id}})
	}
	one := w.snapshot()
	for range 100 {
		if in, ok := one.PickRandom(cp); !ok || in.ID != ids[0] {
			t.Fatalf("PickRandom in a version of one member = %q, %v; want %s", in.ID, ok, ids[0])
		}
	}
	for i := 1; i < 64; i++ {
		w.apply(&switchboard.Event{Kind: switchboard.EventAdded, Instance: fleetInstance(i)})
	}
	s = w.snapshot()
	uniform(t, s, cp, ids[:64], 8)
	uniform(t, one, cp, ids[:1], 8) // the older version, still held
}

// TestPickRandomFromManyGoroutines picks from 64 goroutines at once, more
// than there are stripes, so that goroutines share stripes and take each
// other's numbers: the picks, counted together, must be uniform.
func TestPickRandomFromManyGoroutines(t *testing.T) {
	drawAheadAlways(t)
	_, s := fleetWriter(200)
	uniform(t, s, "all", fleetIDs(200), 64)
	drewAhead(t, s, "all")
}

// drewAhead fails the test unless the random picks of capability cp in s
// drew ahead: the capability has numbers drawn ahead, and picks took some.
func drewAhead(t *testing.T, s *Snapshot, cp string) {
	t.Helper()
	b := lookupBucket(&s.caps, hashID(cp), cp)
	if b == nil || b.pool.ahead == nil {
		t.Fatalf("the picks of %q do not draw ahead", cp)
	}
	var ticks uint64
	for i := range b.pool.ahead {
		ticks += b.pool.ahead[i].tick.Load()
	}
	if ticks == 0 {
		t.Fatalf("the picks of %q took no number drawn ahead", cp)
	}
}

// TestStripeTakesEachNumberOnce has 8 goroutines take from one stripe and
// leave numbers of their own, 100,000 times each: every number, those the
// stripe started with and those left, must come out exactly once, taken by
// a pick or still waiting in the stripe at the end.
func TestStripeTakesEachNumberOnce(t *testing.T) {
	const goroutines, takes = 8, 100000
	var st stripe
	for j := range st.v {
		st.v[j].Store(uint64(1 + j)) // the numbers left are above aheadDepth
	}
	taken := make([][]uint64, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for k := range takes {
				taken[g] = append(taken[g], st.take(uint64(aheadDepth+1+g*takes+k)))
			}
		})
	}
	wg.Wait()
	seen := make(map[uint64]int, goroutines*takes+aheadDepth)
	for _, ts := range taken {
		for _, x := range ts {
			seen[x]++
		}
	}
	for j := range st.v {
		seen[st.v[j].Load()]++
	}
	for x := uint64(1); x <= aheadDepth+goroutines*takes; x++ {
		if seen[x] != 1 {
			t.Fatalf("number %d came out %d times", x, seen[x])
		}
	}
	if len(seen) != aheadDepth+goroutines*takes {
		t.Fatalf("%d distinct numbers came out, want %d", len(seen), aheadDepth+goroutines*takes)
	}
}

// fleetIDs returns the ids of the first n instances of the fleet.
func fleetIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fleetInstance(i).ID
	}
	return ids
}

// drawAheadAlways makes every capability's random picks draw ahead for the
// rest of the test, whatever its size.
func drawAheadAlways(t *testing.T) {
	old := aheadFrom
	aheadFrom = 0
	t.Cleanup(func() { aheadFrom = old })
}
