package postgres

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/postgres/pgtest"
)

// BenchmarkRegisterToWatcher measures Register → the added event in
// watchers on other catalog handles (each its own pool and LISTEN
// connection, as other processes would have), until every watcher has it:
// the benchmark's "register → watcher in another process" on PostgreSQL. It
// reports p50 and p99 over b.N registrations (each deregistered, untimed,
// before the next), and the p50 of the Register call alone: the rest is the
// notification's way to the watchers.
func BenchmarkRegisterToWatcher(b *testing.B) {
	for _, n := range []int{1, 10} {
		b.Run(fmt.Sprintf("watchers=%d", n), func(b *testing.B) { benchRegisterToWatcher(b, n, 0) })
	}
}

// benchRegisterToWatcher first registers replicas live instances of the
// name the timed registrations use.
func benchRegisterToWatcher(b *testing.B, watchers, replicas int) {
	dsn := pgtest.Schema(b, testDSN)
	writer := openDSN(b, dsn, switchboard.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range replicas {
		in := inst("lat", fmt.Sprintf("10.1.%d.%d:4317", i/256, i%256), "storage")
		in.ID = fmt.Sprintf("replica-%d", i)
		if _, err := writer.Register(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
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
	reportPercentiles(b, lat)
	slices.Sort(reg)
	b.ReportMetric(percentile(reg, 0.50), "register-p50-ms")
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

// BenchmarkRegisterFloor breaks BenchmarkRegisterToWatcher down into what
// bounds it on this server, each as p50 / p99 over b.N rounds:
//
//   - roundtrip: SELECT 1, one round trip to the server;
//   - commit: one row inserted and committed in a pipelined batch (BEGIN,
//     INSERT, COMMIT), the cheapest durable write: a round trip and a WAL
//     flush;
//   - commit-to-listener: the same, followed in the batch by a NOTIFY, until
//     a LISTEN on another connection has it: the floor of any write that
//     another session learns of, which is what a watcher in another process
//     is;
//   - register: Register of a new instance (deregistered, untimed, after),
//     on a catalog of its own;
//   - register-among-2000-replicas: the same, in a catalog already holding
//     2,000 live instances of the name it registers (what a service with
//     many replicas costs a registration).
func BenchmarkRegisterFloor(b *testing.B) {
	ctx := context.Background()
	dsn := pgtest.Schema(b, testDSN)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	listener, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer listener.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE TABLE floor_writes (id bigint PRIMARY KEY, at timestamptz NOT NULL DEFAULT now())`); err != nil {
		b.Fatal(err)
	}
	channel := "floor_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if _, err := listener.Exec(ctx, `LISTEN `+pgx.Identifier{channel}.Sanitize()); err != nil {
		b.Fatal(err)
	}
	var next int64
	write := func(notify bool) {
		next++
		var bt pgx.Batch
		bt.Queue(`BEGIN`)
		bt.Queue(`INSERT INTO floor_writes (id) VALUES ($1)`, next)
		bt.Queue(`COMMIT`)
		if notify {
			bt.Queue(`SELECT pg_notify($1, $2)`, channel, strconv.FormatInt(next, 10))
		}
		if err := conn.SendBatch(ctx, &bt).Close(); err != nil {
			b.Fatal(err)
		}
	}
	timed := func(b *testing.B, round func()) {
		var lat []time.Duration
		for b.Loop() {
			start := time.Now()
			round()
			lat = append(lat, time.Since(start))
		}
		reportPercentiles(b, lat)
	}
	b.Run("roundtrip", func(b *testing.B) {
		timed(b, func() {
			if _, err := conn.Exec(ctx, `SELECT 1`); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("commit", func(b *testing.B) { timed(b, func() { write(false) }) })
	b.Run("commit-to-listener", func(b *testing.B) {
		timed(b, func() {
			write(true)
			n, err := listener.WaitForNotification(ctx)
			if err != nil || n.Payload != strconv.FormatInt(next, 10) {
				b.Fatal(n, err)
			}
		})
	})
	// With no watcher, the latency is Register's own.
	b.Run("register", func(b *testing.B) { benchRegisterToWatcher(b, 0, 0) })
	b.Run("register-among-2000-replicas", func(b *testing.B) { benchRegisterToWatcher(b, 0, 2000) })
}

// reportPercentiles reports the p50 and p99 of lat in milliseconds.
func reportPercentiles(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	b.ReportMetric(percentile(lat, 0.50), "p50-ms")
	b.ReportMetric(percentile(lat, 0.99), "p99-ms")
}

// percentile is the p-th percentile of sorted, in milliseconds.
func percentile(sorted []time.Duration, p float64) float64 {
	return float64(sorted[int(p*float64(len(sorted)-1))].Microseconds()) / 1000
}
