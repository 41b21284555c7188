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

// BenchmarkRegisterToWatcher measures Register → the added event in
// watchers on other catalog handles (each its own pool and LISTEN
// connection, as other processes would have), until every watcher has it:
// issue 8's "register → watcher in another process" on PostgreSQL. It
// reports p50 and p99 over b.N registrations (each deregistered, untimed,
// before the next), and the p50 of the Register call alone: the rest is the
// notification's way to the watchers.
func BenchmarkRegisterToWatcher(b *testing.B) {
	for _, n := range []int{1, 10} {
		b.Run(fmt.Sprintf("watchers=%d", n), func(b *testing.B) { benchRegisterToWatcher(b, n) })
	}
}

func benchRegisterToWatcher(b *testing.B, watchers int) {
	dsn := pgtest.Schema(b, testDSN)
	writer := openDSN(b, dsn, switchboard.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	chans := make([]<-chan switchboard.Event, watchers)
	for i := range chans {
		c := openDSN(b, dsn, switchboard.Options{})
		ch, err := c.Watch(ctx, switchboard.Query{})
		if err != nil {
			b.Fatal(err)
		}
		awaitKind(b, ch, switchboard.EventSynced, "")
		chans[i] = ch
	}
	var lat, reg []time.Duration
	for i := 0; b.Loop(); i++ {
		in := inst("lat", "10.0.0.1:4317", "storage")
		in.ID = fmt.Sprintf("lat-%d", i)
		start := time.Now()
		if _, err := writer.Register(ctx, in); err != nil {
			b.Fatal(err)
		}
		reg = append(reg, time.Since(start))
		for _, ch := range chans {
			awaitKind(b, ch, switchboard.EventAdded, in.ID)
		}
		lat = append(lat, time.Since(start))
		b.StopTimer()
		if err := writer.Deregister(ctx, in.ID); err != nil {
			b.Fatal(err)
		}
		for _, ch := range chans {
			awaitKind(b, ch, switchboard.EventRemoved, in.ID)
		}
		b.StartTimer()
	}
	slices.Sort(lat)
	slices.Sort(reg)
	pct := func(d []time.Duration, p float64) float64 {
		return float64(d[int(p*float64(len(d)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(lat, 0.50), "p50-ms")
	b.ReportMetric(pct(lat, 0.99), "p99-ms")
	b.ReportMetric(pct(reg, 0.50), "register-p50-ms")
}

// awaitKind reads ch until an event of kind for id (any id when empty)
// arrives; a closed channel or a minute without it fails b.
func awaitKind(b *testing.B, ch <-chan switchboard.Event, kind switchboard.EventKind, id string) {
	b.Helper()
	timeout := time.After(time.Minute)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				b.Fatalf("watch closed waiting for %s %s", kind, id)
			}
			if ev.Kind == kind && (id == "" || ev.Instance.ID == id) {
				return
			}
		case <-timeout:
			b.Fatalf("no %s %s within a minute", kind, id)
		}
	}
}
