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
// burst shares the path copies): an update that changes an instance's
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

var pickSink switchboard.Instance

// BenchmarkPickFloor measures what bounds a random pick among 100,000: the
// member at a random index of the capability bucket "all" put together as
// an Instance, from the bucket's slots ("slots") and from a flat copy of
// the same records in one array ("array": no structure to descend, only
// the random index's own cache miss). In these loops consecutive picks are
// independent, so the processor may overlap one pick's miss with the next
// one's; "array-chained" makes each index depend on the record read before
// it (a zero derived from it), so that it cannot: one whole miss per pick,
// what a pick that reads its record only once it has drawn its number
// costs a caller that uses the instance before picking again. (On this
// project's machine the two cost the same.) "ahead" is what PickRandom
// does after finding the bucket: it takes a number drawn some picks before,
// whose record was prefetched then (see ahead), so the miss is not waited
// for inside the pick.
func BenchmarkPickFloor(b *testing.B) {
	_, s := fleetWriter(100000)
	bk := lookupBucket(&s.caps, hashID("all"), "all")
	flat := make([]rec, 0, bk.pool.n)
	for i := range bk.pool.n {
		flat = append(flat, *bk.pool.at(i))
	}
	run := func(name string, pick func() switchboard.Instance) {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			defer reportCPU(b)()
			for b.Loop() {
				pickSink = pick()
			}
		})
	}
	run("slots", func() switchboard.Instance { return bk.pool.at(rand.IntN(len(flat))).instance() })
	run("ahead", func() switchboard.Instance { return bk.pool.pickAhead().instance() })
	run("array", func() switchboard.Instance { return flat[rand.IntN(len(flat))].instance() })
	var prev *rec = &flat[0]
	run("array-chained", func() switchboard.Instance {
		// reg is a positive Unix time: the shift is 0, known only once
		// the record is loaded.
		prev = &flat[rand.IntN(len(flat))^int(uint64(prev.reg)>>63)]
		return prev.instance()
	})
}

// BenchmarkReadFloor measures what one random read costs this host at
// the sizes around a capability's records: chained random reads (each
// index depends on the value read before it) of one 64-byte record in
// arrays from 1 MiB to 64 MiB. A capability of 100,000 members keeps
// 6.4 MB of records in its slots, which is where the cost of a read
// leaves the processor's caches: the floor under BenchmarkPickFloor that
// no structure removes.
func BenchmarkReadFloor(b *testing.B) {
	for _, kib := range []int{1024, 4096, 6250, 16384, 65536} {
		b.Run(fmt.Sprintf("MiB=%.1f", float64(kib)/1024), func(b *testing.B) {
			recs := make([]rec, kib*1024/64)
			for i := range recs {
				recs[i].reg = int64(i) // non-negative: the shift below is 0
			}
			var v int64
			for b.Loop() {
				v = recs[rand.IntN(len(recs))^int(uint64(v)>>63)].reg
			}
			readSink = v
		})
	}
}

var readSink int64

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
