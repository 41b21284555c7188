package testkit

import (
	"runtime"
	"slices"
	"testing"
	"time"
)

// ReportRoutedVsRaw reports what a routed-versus-raw benchmark measured:
// the p50 and p99 of each side's latencies (sorted here), their ratios,
// and the allocations of one call of each (counted outside the timer).
func ReportRoutedVsRaw(b *testing.B, routedLat, rawLat []time.Duration, routedCall, rawCall func()) {
	b.Helper()
	slices.Sort(rawLat)
	slices.Sort(routedLat)
	pct := func(d []time.Duration, p float64) float64 { return float64(d[int(float64(len(d)-1)*p)]) }
	b.ReportMetric(pct(rawLat, 0.50), "raw-p50-ns")
	b.ReportMetric(pct(rawLat, 0.99), "raw-p99-ns")
	b.ReportMetric(pct(routedLat, 0.50), "routed-p50-ns")
	b.ReportMetric(pct(routedLat, 0.99), "routed-p99-ns")
	b.ReportMetric(pct(routedLat, 0.50)/pct(rawLat, 0.50), "p50-ratio")
	b.ReportMetric(pct(routedLat, 0.99)/pct(rawLat, 0.99), "p99-ratio")
	b.ReportMetric(AllocsPerCall(routedCall), "routed-allocs/msg")
	b.ReportMetric(AllocsPerCall(rawCall), "raw-allocs/msg")
}

// AllocsPerCall is testing.AllocsPerRun without the GOMAXPROCS change (a
// client sharing the process with its server counts both sides of a
// loopback call).
func AllocsPerCall(f func()) float64 {
	const n = 200
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for i := 0; i < n; i++ {
		f()
	}
	runtime.ReadMemStats(&m1)
	return float64(m1.Mallocs-m0.Mallocs) / n
}
