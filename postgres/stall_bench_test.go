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

// BenchmarkDeliveryBesideStalledWriter measures register → watcher
// latency (the watcher in another handle, as another process) with and
// without a writer that holds its transaction open after drawing its seq
// for the whole run: the stalled writer should cost the others' delivery
// nothing (p99 within about a millisecond of the unstalled case).
//
//	go test ./postgres/ -run '^$' -bench DeliveryBesideStalledWriter -benchtime 300x
func BenchmarkDeliveryBesideStalledWriter(b *testing.B) {
	for _, stalled := range []bool{false, true} {
		b.Run(fmt.Sprintf("stalled=%v", stalled), func(b *testing.B) {
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
			if stalled {
				_, end := openWriter(b, dsn, "stalled")
				defer end(false)
			}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
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
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}
