package postgres

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/postgres/pgtest"
)

// stallBlock is how many registrations each phase of
// BenchmarkDeliveryBesideStalledWriter times before the other takes over.
const stallBlock = 25

// BenchmarkDeliveryBesideStalledWriter measures register → watcher
// latency (the watcher in another handle, as another process) with and
// without a writer that holds its transaction open after drawing its seq:
// the stalled writer should cost the others' delivery nothing (p99 within
// about a millisecond of the unstalled case). The two phases alternate in
// blocks of stallBlock registrations within one run (each stalled block
// opens a writer of its own and rolls it back at its end, leaving a gap in
// the log), so that the host's noise falls on both alike; p50/p99 of each
// phase and their p99 difference are reported.
//
//	go test ./postgres/ -run '^$' -bench DeliveryBesideStalledWriter -benchtime 600x -count 3
func BenchmarkDeliveryBesideStalledWriter(b *testing.B) {
	dsn := pgtest.Schema(b, testDSN)
	watcher := openDSN(b, dsn, switchboard.Options{PollInterval: time.Hour})
	writer := openDSN(b, dsn, switchboard.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := watcher.Watch(ctx, switchboard.Query{})
	if err != nil {
		b.Fatal(err)
	}
	for ev := range ch {
		if ev.Kind == switchboard.EventSynced {
			break
		}
	}
	var lat [2][]time.Duration // [0]: no stalled writer, [1]: one
	var end func(commit bool)
	b.ResetTimer()
	for i := range b.N {
		stalled := i/stallBlock%2 == 1
		switch {
		case stalled && end == nil:
			b.StopTimer()
			_, end = openWriter(b, dsn, fmt.Sprintf("stalled-%d", i))
			b.StartTimer()
		case !stalled && end != nil:
			b.StopTimer()
			end(false)
			end = nil
			b.StartTimer()
		}
		in := inst("svc", "h:1")
		in.ID, in.TTL = fmt.Sprintf("i-%d", i), time.Minute
		start := time.Now()
		if _, err := writer.Register(ctx, in); err != nil {
			b.Fatal(err)
		}
		for ev := range ch {
			if ev.Kind == switchboard.EventAdded && ev.Instance.ID == in.ID {
				break
			}
		}
		phase := 0
		if stalled {
			phase = 1
		}
		lat[phase] = append(lat[phase], time.Since(start))
	}
	b.StopTimer()
	if end != nil {
		end(false)
	}
	if len(lat[1]) == 0 {
		return // the framework's first, one-iteration run; -benchtime of fewer than 2 blocks reports nothing
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	p := func(l []time.Duration, q int) time.Duration {
		slices.Sort(l)
		return l[len(l)*q/100]
	}
	b.ReportMetric(ms(p(lat[0], 50)), "p50-ms")
	b.ReportMetric(ms(p(lat[0], 99)), "p99-ms")
	b.ReportMetric(ms(p(lat[1], 50)), "stalled-p50-ms")
	b.ReportMetric(ms(p(lat[1], 99)), "stalled-p99-ms")
	b.ReportMetric(ms(p(lat[1], 99)-p(lat[0], 99)), "p99-diff-ms")
}
