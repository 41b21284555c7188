package catalogtest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/cputime"
)

// WriteChurn runs the write-churn shape every backend measures: one writer
// per catalog handle in cats (each with its own connections, as separate
// processes would have), each looping register → heartbeat → deregister of
// the instance inst(writer, round) returns, the deregister in 4 of 5
// rounds. The b.N rounds are shared among the writers. It resets the timer,
// reports ops/s (every call counts: 2.8 per round) and returns the calls
// made.
func WriteChurn(b *testing.B, cats []switchboard.Catalog, inst func(writer int, round int64) switchboard.Instance) int64 {
	b.Helper()
	ctx := context.Background()
	var next, ops atomic.Int64
	errs := make(chan error, len(cats))
	b.ResetTimer()
	var wg sync.WaitGroup
	for w, c := range cats {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				out, err := c.Register(ctx, inst(w, i))
				if err == nil {
					_, err = c.Heartbeat(ctx, out.ID)
				}
				if err == nil && i%5 != 0 {
					err = c.Deregister(ctx, out.ID)
					ops.Add(1)
				}
				if err != nil {
					errs <- err
					return
				}
				ops.Add(2)
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	b.ReportMetric(float64(ops.Load())/b.Elapsed().Seconds(), "ops/s")
	return ops.Load()
}

// TimeSnapshot watches everything in c until synced and returns how long
// that took; it fails b unless exactly want instances were added first.
func TimeSnapshot(b *testing.B, c switchboard.Catalog, want int) time.Duration {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t0 := time.Now()
	syncedWatch(ctx, b, c, switchboard.Query{}, want)
	return time.Since(t0)
}

// syncedWatch watches q in c until synced and returns the watch, which
// goes on until ctx ends; it fails b unless exactly want instances were
// added first.
func syncedWatch(ctx context.Context, b *testing.B, c switchboard.Catalog, q switchboard.Query, want int) <-chan switchboard.Event {
	b.Helper()
	ch, err := c.Watch(ctx, q)
	if err != nil {
		b.Fatal(err)
	}
	added := 0
	for ev := range ch {
		if ev.Kind == switchboard.EventAdded {
			added++
		}
		if ev.Kind == switchboard.EventSynced || ev.Kind == switchboard.EventError {
			break
		}
	}
	if added != want {
		b.Fatalf("watch: %d added before synced (or an error), want %d", added, want)
	}
	return ch
}

// Resync runs the resync benchmark every SQL backend measures, on a catalog
// c of n rows whose watch hub runs one full resync when resync is called
// (the backend's hub.Hub.Resync): "unchanged", the rows as the mirror holds
// them; "renewed", every row's last_seen moved on by renewAll before each
// resync (a heartbeating fleet, whose renewals the hub reads only when an
// expiry is due). It reports ms/resync, the process's cpu-ms/resync and
// B/op, and events/resync, which must stay 0: neither is news to a
// watcher.
func Resync(b *testing.B, c switchboard.Catalog, n int, resync func(), renewAll func() error) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := syncedWatch(ctx, b, c, switchboard.Query{All: true}, n)
	var events atomic.Int64
	go func() {
		for range ch {
			events.Add(1)
		}
	}()
	for _, renewed := range []bool{false, true} {
		name := map[bool]string{false: "unchanged", true: "renewed"}[renewed]
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			resync() // the mirror as a resync leaves it (digests learned)
			events.Store(0)
			var cpu time.Duration
			for b.Loop() {
				if renewed {
					b.StopTimer()
					if err := renewAll(); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				cpu0 := cputime.Process()
				resync()
				cpu += cputime.Process() - cpu0
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/resync")
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/resync")
			b.ReportMetric(float64(events.Load())/float64(b.N), "events/resync")
		})
	}
}
