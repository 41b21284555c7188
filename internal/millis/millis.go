// Package millis rounds instance and lease TTLs as every backend stores them:
// up to whole milliseconds, so the same registration expires at the same
// moment on every backend and nothing expires before the TTL it asked for.
package millis

import (
	"math"
	"time"
)

// maxMillis is the longest TTL in whole milliseconds that a time.Duration
// holds (about 292 years).
const maxMillis = int64(math.MaxInt64 / time.Millisecond)

// Round returns a TTL rounded up to whole milliseconds (past the largest
// whole-millisecond Duration it is cut to that); zero and negative TTLs are
// returned as they are. A backend with coarser storage rounds up further
// (kube://: whole seconds, as Lease durations count them).
func Round(d time.Duration) time.Duration {
	if d <= 0 {
		return d
	}
	return time.Duration(Ceil(d)) * time.Millisecond
}

// Ceil is a positive TTL in whole milliseconds, rounded up, at most
// maxMillis. It rounds without adding first: d + 999,999 ns overflows near
// the largest Duration.
func Ceil(d time.Duration) int64 {
	ms := int64(d / time.Millisecond)
	if d%time.Millisecond != 0 && ms < maxMillis {
		ms++
	}
	return ms
}
