package remote

import (
	"testing"
	"time"
)

// TestJitter: a reconnect waits between half the backoff and all of it,
// drawn anew each time, so a fleet of clients spreads its reconnections.
func TestJitter(t *testing.T) {
	for _, d := range []time.Duration{0, 1, 100 * time.Millisecond, 2 * time.Second} {
		seen := map[time.Duration]bool{}
		for range 200 {
			j := jitter(d)
			if j < d/2 || j > d {
				t.Fatalf("jitter(%v) = %v, want within [%v, %v]", d, j, d/2, d)
			}
			seen[j] = true
		}
		if d >= 100*time.Millisecond && len(seen) < 100 {
			t.Errorf("jitter(%v): %d distinct waits in 200 draws, want them spread", d, len(seen))
		}
	}
}
