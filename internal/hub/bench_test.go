package hub

import (
	"fmt"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/cputime"
)

// BenchmarkWatchFromMirror100k is a new watcher in a process whose hub
// already mirrors 100,000 instances (two capabilities, two metadata keys
// each): Watch until synced, served from the mirror without a read of the
// catalog. cpu-ms/watch is the process's CPU per watcher (getrusage),
// steadier than the wall time on a busy machine.
func BenchmarkWatchFromMirror100k(b *testing.B) {
	const n = 100_000
	m := newMem()
	for i := range n {
		in := inst(fmt.Sprintf("inst-%06d", i), time.Hour)
		in.Name = fmt.Sprint("svc-", i%200)
		in.Capabilities = []string{"storage", fmt.Sprint("cap-", i%100)}
		in.Metadata = map[string]string{"zone": fmt.Sprint("z", i%3), "rack": fmt.Sprint("r", i%40)}
		m.put(in)
	}
	h := New(m, Options{PollInterval: time.Hour})
	defer h.Close()
	watch := func() {
		ch, err := h.Watch(b.Context(), switchboard.Query{})
		if err != nil {
			b.Fatal(err)
		}
		added := 0
		for ev := range ch {
			if ev.Kind == switchboard.EventSynced {
				break
			}
			added++
		}
		if added != n {
			b.Fatalf("%d added before synced, want %d", added, n)
		}
	}
	watch() // the first reads the catalog
	cpu0 := cputime.Process()
	b.ResetTimer()
	for b.Loop() {
		watch()
	}
	cpu := cputime.Process() - cpu0
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/watch")
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/watch")
}
