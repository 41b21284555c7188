package discovery_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/discovery"
)

// BenchmarkViewHeapPerInstance measures a process's whole view of a SQLite
// catalog of 100,000 instances (BenchmarkChurn's fleet), per instance: the
// live heap a new catalog handle holds once a bare Watch has its snapshot
// (the hub's mirror: "mirror-B/instance"), then once a cache follows it too
// ("view-B/instance"; the cache's part alone: "cache-B/instance"). The
// cache shares the strings, slices and maps of the mirror's instances, as
// it does with any catalog whose watch hands out the same instance to
// every watcher.
func BenchmarkViewHeapPerInstance(b *testing.B) {
	const n = 100000
	ctx := context.Background()
	dsn := "sqlite://" + filepath.Join(b.TempDir(), "view.db")
	opts := switchboard.Options{Logger: slog.New(slog.DiscardHandler)}
	w, err := switchboard.Open(ctx, dsn, opts)
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for k := range 8 {
		wg.Go(func() {
			for i := k; i < n; i += 8 {
				if _, err := w.Register(ctx, churnInstance(i, 0)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	w.Close()
	for b.Loop() {
		before := liveHeap()
		cat, err := switchboard.Open(ctx, dsn, opts)
		if err != nil {
			b.Fatal(err)
		}
		wctx, cancel := context.WithCancel(ctx)
		ch, err := cat.Watch(wctx, switchboard.Query{})
		if err != nil {
			b.Fatal(err)
		}
		for ev := range ch {
			if ev.Kind == switchboard.EventSynced {
				break
			}
		}
		mirror := liveHeap()
		c, err := discovery.New(ctx, cat, discovery.Options{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		view := liveHeap()
		if c.Count(switchboard.Query{}) != n {
			b.Fatal("not every instance cached")
		}
		b.ReportMetric(float64(mirror-before)/n, "mirror-B/instance")
		b.ReportMetric(float64(view-before)/n, "view-B/instance")
		b.ReportMetric(float64(view-mirror)/n, "cache-B/instance")
		c.Close()
		cancel()
		cat.Close()
	}
}
