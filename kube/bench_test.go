package kube_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/kube"
	"github.com/switchboard-io/switchboard/kube/kubetestenv"
	"github.com/switchboard-io/switchboard/kube/types/v1alpha1"
	"github.com/switchboard-io/switchboard/pool"
)

func percentile(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// BenchmarkStatusToPool: a module's leader writes a new status.addr → the
// pool of another module (following the namespace through its own kube
// catalog) has the new address. From before the status write (a GET and a
// PUT) to the pool's table, through the API server's watch, the informer,
// the hub and the pool.
func BenchmarkStatusToPool(b *testing.B) {
	cfg, ns := kubetestenv.Setup(b)
	ctx := context.Background()
	writer, err := kube.New(cfg, ns, switchboard.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer writer.Close()
	reader, err := kube.New(cfg, ns, switchboard.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer reader.Close()
	p := pool.New(pool.Options{Lazy: true, Logger: slog.New(slog.DiscardHandler)})
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p.Start(pctx)
	defer p.Close()
	if _, err := writer.Register(ctx, switchboard.Instance{Name: "target", Type: kube.TypeModule, Address: "127.0.0.1:1", TTL: time.Hour}); err != nil {
		b.Fatal(err)
	}
	if err := p.Follow(pctx, reader, switchboard.Query{}); err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		addr := fmt.Sprintf("127.0.0.1:%d", 2+i%60000)
		start := time.Now()
		if err := writer.SetStatus(ctx, "target", v1alpha1.TinyModuleStatus{Addr: addr, Name: "target"}); err != nil {
			b.Fatal(err)
		}
		for !slices.Equal(p.Modules()["target"], []string{addr}) {
			if time.Since(start) > 30*time.Second {
				b.Fatalf("pool never saw %s", addr)
			}
			time.Sleep(100 * time.Microsecond)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	b.ReportMetric(float64(percentile(lat, 0.50).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(percentile(lat, 0.99).Microseconds())/1000, "p99-ms")
}

var (
	thousandOnce sync.Once
	thousandCfg  *rest.Config
	thousandNS   string
	thousandErr  error
)

// thousand returns a namespace holding 1,000 live TinyModules (each with
// a status and a Lease), made once per process.
func thousand(b *testing.B) (*rest.Config, string) {
	thousandOnce.Do(func() {
		thousandCfg, thousandNS = kubetestenv.Setup(b)
		cat, err := kube.New(thousandCfg, thousandNS, switchboard.Options{})
		if err != nil {
			thousandErr = err
			return
		}
		defer cat.Close()
		var wg sync.WaitGroup
		errs := make(chan error, 1000)
		work := make(chan int)
		for w := 0; w < 16; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range work {
					_, err := cat.Register(context.Background(), switchboard.Instance{
						Name: fmt.Sprintf("module-%04d", i), Type: kube.TypeModule,
						Address: fmt.Sprintf("10.0.%d.%d:8483", i/250, i%250), Version: "1.0.0", TTL: time.Hour,
					})
					if err != nil {
						errs <- err
					}
				}
			}()
		}
		for i := 0; i < 1000; i++ {
			work <- i
		}
		close(work)
		wg.Wait()
		close(errs)
		thousandErr = <-errs
	})
	if thousandErr != nil {
		b.Fatal(thousandErr)
	}
	return thousandCfg, thousandNS
}

// BenchmarkList1000 is what `switchboard ls --dsn kube://NS` reads: one
// list of 1,000 TinyModules and one of their Leases, joined.
func BenchmarkList1000(b *testing.B) {
	cfg, ns := thousand(b)
	cat, err := kube.New(cfg, ns, switchboard.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer cat.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		got, err := cat.List(context.Background(), switchboard.Query{})
		if err != nil || len(got) != 1000 {
			b.Fatalf("%d modules, %v", len(got), err)
		}
	}
}

// BenchmarkWatchSnapshot1000: a new catalog handle's first watcher
// receives the 1,000 modules and its synced event (the informers' first
// lists, the hub's snapshot, 1,000 added events).
func BenchmarkWatchSnapshot1000(b *testing.B) {
	cfg, ns := thousand(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cat, err := kube.New(cfg, ns, switchboard.Options{})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		ch, err := cat.Watch(ctx, switchboard.Query{})
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for ev := range ch {
			if ev.Kind == switchboard.EventAdded {
				n++
			}
			if ev.Kind == switchboard.EventSynced {
				break
			}
		}
		if n != 1000 {
			b.Fatalf("snapshot had %d modules", n)
		}
		b.StopTimer()
		cancel()
		cat.Close()
		b.StartTimer()
	}
}
