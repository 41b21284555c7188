package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
)

// BenchmarkRegisterToEvent measures the time from calling Register to the
// watcher receiving the added event, on the
// embedded SQLite default: a watcher in the same process, 100 watchers in
// the same process (until the last one has it), and a watcher in another OS
// process (a `switchboard watch --json` child, so the figure includes its
// JSON encoding and the pipe).
func BenchmarkRegisterToEvent(b *testing.B) {
	b.Run("same-process/1-watcher", func(b *testing.B) { benchInProcess(b, 1) })
	b.Run("same-process/100-watchers", func(b *testing.B) { benchInProcess(b, 100) })
	b.Run("two-processes/1-watcher", benchTwoProcesses)
}

func benchCatalog(b *testing.B) (switchboard.Catalog, string) {
	dsn := "sqlite://" + filepath.Join(b.TempDir(), "bench.db")
	cat, err := switchboard.Open(context.Background(), dsn, switchboard.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cat.Close() })
	return cat, dsn
}

func benchInProcess(b *testing.B, watchers int) {
	cat, _ := benchCatalog(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	chans := make([]<-chan switchboard.Event, watchers)
	for i := range chans {
		ch, err := cat.Watch(ctx, switchboard.Query{})
		if err != nil {
			b.Fatal(err)
		}
		for ev := range ch {
			if ev.Kind == switchboard.EventSynced {
				break
			}
		}
		chans[i] = ch
	}
	lat := make([]time.Duration, 0, b.N)
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		in, err := cat.Register(ctx, switchboard.Instance{Name: fmt.Sprintf("bench-%d", i), Type: "writer", Address: "127.0.0.1:1"})
		if err != nil {
			b.Fatal(err)
		}
		for _, ch := range chans {
			awaitEvent(b, ch, switchboard.EventAdded, in.ID)
		}
		lat = append(lat, time.Since(start))
		b.StopTimer()
		if err := cat.Deregister(ctx, in.ID); err != nil {
			b.Fatal(err)
		}
		for _, ch := range chans {
			awaitEvent(b, ch, switchboard.EventRemoved, in.ID)
		}
		b.StartTimer()
	}
	reportLatency(b, lat)
}

func benchTwoProcesses(b *testing.B) {
	cat, dsn := benchCatalog(b)
	ctx := context.Background()
	child := start(b, "watch", "--dsn", dsn, "--json")
	lat := make([]time.Duration, 0, b.N)
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		in, err := cat.Register(ctx, switchboard.Instance{Name: fmt.Sprintf("bench-%d", i), Type: "writer", Address: "127.0.0.1:1"})
		if err != nil {
			b.Fatal(err)
		}
		awaitLine(b, child, `"added"`, in.ID)
		lat = append(lat, time.Since(start))
		b.StopTimer()
		if err := cat.Deregister(ctx, in.ID); err != nil {
			b.Fatal(err)
		}
		awaitLine(b, child, `"removed"`, in.ID)
		b.StartTimer()
	}
	reportLatency(b, lat)
}

func awaitEvent(b *testing.B, ch <-chan switchboard.Event, kind switchboard.EventKind, id string) {
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev := <-ch:
			if ev.Kind == kind && ev.Instance.ID == id {
				return
			}
		case <-timeout:
			b.Fatalf("no %s event for %s", kind, id)
		}
	}
}

func awaitLine(b *testing.B, p *proc, kind, id string) {
	timeout := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				b.Fatalf("watcher exited: %s", p.stderr)
			}
			if strings.Contains(l, kind) && strings.Contains(l, id) {
				return
			}
		case <-timeout:
			b.Fatalf("no %s line for %s", kind, id)
		}
	}
}

// reportLatency reports the p50, p99 and max of lat in milliseconds.
func reportLatency(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	q := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
	}
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
}
