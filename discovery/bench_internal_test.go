package discovery

import (
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/cputime"
)

// FleetInstance, ReportCPU and Quantile are fleetInstance, reportCPU and
// quantile, for the package's external tests.
var (
	FleetInstance = fleetInstance
	ReportCPU     = reportCPU
	Quantile      = quantile
)

// quantile returns the p-quantile of xs (nearest rank), which it leaves
// unsorted.
func quantile(xs []float64, p float64) float64 {
	xs = slices.Clone(xs)
	slices.Sort(xs)
	return xs[min(len(xs)-1, int(p*float64(len(xs))))]
}

// reportCPU starts measuring the process's CPU time (getrusage); the
// function it returns reports it per operation as cpu-ns/op. On this shared
// machine ns/op counts the time other processes hold the cores; cpu-ns/op
// does not (their use of the caches still shows).
func reportCPU(b *testing.B) func() {
	start := cputime.Process()
	return func() { b.ReportMetric(float64(cputime.Process()-start)/float64(b.N), "cpu-ns/op") }
}

// fleetInstance is instance i of a fleet: 100 service names, 5 types, two
// capabilities (one of 20, and "all"), two metadata keys (a zone shared by
// a third of the fleet, a pod name of its own), as a catalog sends it.
func fleetInstance(i int) switchboard.Instance {
	return switchboard.Instance{
		ID:           fmt.Sprintf("id-%06d", i),
		Name:         fmt.Sprintf("svc-%d", i%100),
		Type:         []string{"acceptor", "writer", "router", "querier", "compactor"}[i%5],
		Address:      fmt.Sprintf("10.%d.%d.%d:50051", i>>16&255, i>>8&255, i&255),
		Capabilities: []string{fmt.Sprintf("cap-%d", i%20), "all"},
		Version:      "1.4.2",
		Metadata:     map[string]string{"zone": fmt.Sprintf("zone-%d", i%3), "pod": fmt.Sprintf("svc-%d-%06d", i%100, i)},
		TTL:          10 * time.Second,
		RegisteredAt: time.Now(),
		LastSeen:     time.Now(),
	}
}

// fleetWriter returns a writer holding the first n instances of the fleet,
// published, and that version.
func fleetWriter(n int) (*writer, *Snapshot) {
	w := newWriter()
	for i := range n {
		ev := switchboard.Event{Kind: switchboard.EventAdded, Instance: fleetInstance(i)}
		w.apply(&ev)
	}
	return w, w.snapshot()
}

// BenchmarkApply measures one change applied to a cache of 100,000
// instances and published as a version of its own (the worst case: no
// burst shares the copies): an update that changes an instance's
// metadata, and a removal followed by the same instance's addition.
func BenchmarkApply(b *testing.B) {
	const n = 100000
	w, _ := fleetWriter(n)
	rng := rand.New(rand.NewPCG(1, 1))
	updates := make([]switchboard.Event, 1024)
	for k := range updates {
		in := fleetInstance(rng.IntN(n))
		in.Metadata = map[string]string{"zone": "zone-9", "pod": fmt.Sprintf("moved-%d", k)}
		updates[k] = switchboard.Event{Kind: switchboard.EventUpdated, Instance: in}
	}
	b.Run("update", func(b *testing.B) {
		b.ReportAllocs()
		k := 0
		defer reportCPU(b)()
		for b.Loop() {
			w.apply(&updates[k%len(updates)])
			w.snapshot()
			w.changes = w.changes[:0]
			k++
		}
	})
	b.Run("remove+add", func(b *testing.B) {
		b.ReportAllocs()
		k := 0
		defer reportCPU(b)()
		for b.Loop() {
			ev := &updates[k%len(updates)]
			rm := switchboard.Event{Kind: switchboard.EventRemoved, Instance: ev.Instance}
			w.apply(&rm)
			w.snapshot()
			w.apply(ev)
			w.snapshot()
			w.changes = w.changes[:0]
			k++
		}
	})
}

// BenchmarkApplyTail measures the spread of the time one change takes, in
// the shape of BenchmarkChurn's changes (an update of one metadata value
// to a value of its own, each published as a version), applied to a cache
// of 100,000 instances at 1,000 changes a second: the wall time of each
// apply, its p50, p99 and p99.9, and the page faults per change. "fresh"
// gives the process's free memory back to the system, builds the cache and
// times the first b.N changes, while the heap grows into pages the process
// has not touched (each first touch a page fault); "steady" times b.N
// changes after 30,000 unmeasured ones, once the heap has reached its size
// and reuses its pages. The pace
// keeps the collector's share of the time near what it is at
// BenchmarkChurn's 100 a second (back to back, the collector would be
// marking for much of the run, and every apply during a mark is slower).
// Run with -benchtime 3000x.
func BenchmarkApplyTail(b *testing.B) {
	for _, phase := range []struct {
		name   string
		warmup int
	}{{"fresh", 0}, {"steady", 30000}} {
		b.Run(phase.name, func(b *testing.B) {
			// Whatever ran before in this process leaves its heap's free
			// pages mapped, already touched; give them back, so that
			// "fresh" grows into untouched pages however it is run.
			debug.FreeOSMemory()
			const n = 100000
			w, _ := fleetWriter(n)
			k := 0
			change := func() {
				in := fleetInstance(k * 7919 % n)
				in.Metadata = map[string]string{"zone": in.Metadata["zone"], "sent": strconv.Itoa(k)}
				ev := switchboard.Event{Kind: switchboard.EventUpdated, Instance: in}
				w.apply(&ev)
				w.snapshot()
				w.changes = w.changes[:0]
				k++
			}
			for range phase.warmup {
				change()
			}
			tick := time.NewTicker(time.Millisecond)
			defer tick.Stop()
			var took []float64 // µs
			flt := cputime.MinorFaults()
			for b.Loop() {
				<-tick.C
				t := time.Now()
				change()
				took = append(took, float64(time.Since(t).Nanoseconds())/1000)
			}
			flt = cputime.MinorFaults() - flt
			b.ReportMetric(quantile(took, 0.50), "p50-µs")
			b.ReportMetric(quantile(took, 0.99), "p99-µs")
			b.ReportMetric(quantile(took, 0.999), "p99.9-µs")
			b.ReportMetric(float64(flt)/float64(b.N), "faults/op")
		})
	}
}

// BenchmarkBuildTable measures building the pick table of a version (once
// per version, on the first weighted or zone-preferring pick): the
// capability "all" of 100,000 instances and "cap-7" of 5,000, weights
// 100, 100 and 200, three zones.
func BenchmarkBuildTable(b *testing.B) {
	w := newWriter()
	for i := range 100000 {
		in := fleetInstance(i)
		in.Weight = []int{100, 100, 200}[i/3%3]
		in.Zone = []string{"zone-0", "zone-1", "zone-2"}[i%3]
		ev := switchboard.Event{Kind: switchboard.EventAdded, Instance: in}
		w.apply(&ev)
	}
	s := w.snapshot()
	for _, cp := range []string{"all", "cap-7"} {
		b.Run(cp, func(b *testing.B) {
			bk := s.capability(cp)
			b.ReportAllocs()
			defer reportCPU(b)()
			for b.Loop() {
				buildTable(bk)
			}
		})
	}
}
