package wrr

import (
	"slices"
	"testing"
)

func count(s []uint32, n int) []int {
	c := make([]int, n)
	for _, i := range s {
		c[i]++
	}
	return c
}

func TestScheduleShares(t *testing.T) {
	for _, tc := range []struct {
		w    []int
		want []int
	}{
		{[]int{100, 100, 200}, []int{1, 1, 2}},
		{[]int{1}, []int{1}},
		{[]int{0, -3, 2}, []int{1, 1, 2}}, // below 1 counts as 1
		{[]int{3, 7}, []int{3, 7}},
		{[]int{10000, 1}, []int{4095, 1}}, // scaled to MaxLen, the light one kept
	} {
		s := Schedule(tc.w)
		if got := count(s, len(tc.w)); !slices.Equal(got, tc.want) {
			t.Errorf("Schedule(%v): counts %v, want %v", tc.w, got, tc.want)
		}
	}
	if Schedule(nil) != nil {
		t.Error("Schedule(nil) not nil")
	}
	// Many targets: one slot each at least.
	w := make([]int, 10000)
	for i := range w {
		w[i] = 1 + i%7
	}
	s := Schedule(w)
	if len(s) < 10000 || len(s) > 2*10000 {
		t.Fatalf("length %d for 10000 targets", len(s))
	}
	for i, c := range count(s, len(w)) {
		if c < 1 {
			t.Fatalf("target %d has no slot", i)
		}
	}
}

// TestScheduleIsSmooth: in every window of the cycle a target's picks stay
// within one of its share (no burst of one target).
func TestScheduleIsSmooth(t *testing.T) {
	w := []int{5, 1, 1, 3}
	s := Schedule(w)
	if len(s) != 10 {
		t.Fatalf("length %d", len(s))
	}
	seen := make([]int, len(w))
	for k, i := range s {
		seen[i]++
		for j := range w {
			ideal := float64((k+1)*w[j]) / 10
			if d := float64(seen[j]) - ideal; d > 1 || d < -1 {
				t.Fatalf("after %d picks target %d has %d, ideal %.1f (schedule %v)", k+1, j, seen[j], ideal, s)
			}
		}
	}
}

// TestScheduleOrder pins the earliest-deadline-first order, which is not
// nginx's for weights 5, 1, 1 (as Schedule's comment says).
func TestScheduleOrder(t *testing.T) {
	if got, want := Schedule([]int{5, 1, 1}), []uint32{0, 0, 0, 1, 2, 0, 0}; !slices.Equal(got, want) {
		t.Fatalf("Schedule(5, 1, 1) = %v, want %v", got, want)
	}
}
