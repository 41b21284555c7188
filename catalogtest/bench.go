package catalogtest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
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
	ch, err := c.Watch(ctx, switchboard.Query{})
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
	took := time.Since(t0)
	if added != want {
		b.Fatalf("watch: %d added before synced (or an error), want %d", added, want)
	}
	return took
}
