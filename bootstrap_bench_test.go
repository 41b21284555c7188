package switchboard_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/discovery"
	"github.com/switchboard-io/switchboard/internal/cputime"
	"github.com/switchboard-io/switchboard/internal/testkit"
	_ "github.com/switchboard-io/switchboard/postgres"
	"github.com/switchboard-io/switchboard/postgres/pgtest"
)

// BenchmarkHeartbeat10k runs 10,000 registrations heartbeating every second
// on one catalog, with a discovery cache following it, and reports the CPU
// this process spends per wall-clock second (cpu-cores: 0.5 is half a core),
// for PostgreSQL also the CPU of the server processes serving the catalog,
// and the heartbeat failures. One op is one second of sustained operation:
// run it with -benchtime=10x.
func BenchmarkHeartbeat10k(b *testing.B) {
	b.Run("sqlite", func(b *testing.B) { benchHeartbeat10k(b, testkit.OpenSQLite(b), nil) })
	b.Run("postgres", func(b *testing.B) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		dsn, drop, err := pgtest.NewDatabase(ctx)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(drop)
		cat, err := switchboard.Open(ctx, dsn, switchboard.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cat.Close() })
		benchHeartbeat10k(b, cat, func() time.Duration { return serverCPU(b, dsn) })
	})
}

func benchHeartbeat10k(b *testing.B, cat switchboard.Catalog, server func() time.Duration) {
	const n = 10000
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	regs := make([]*switchboard.Registration, 0, n)
	for i := 0; i < n; i++ {
		in := switchboard.Instance{Name: fmt.Sprintf("svc-%d", i%50), Type: "writer",
			Address: fmt.Sprintf("10.0.%d.%d:4317", i/250, i%250+1), Capabilities: []string{fmt.Sprintf("cap-%d", i%10)},
			TTL: 10 * time.Second}
		r, err := switchboard.Bootstrap(ctx, cat, in, switchboard.BootstrapOptions{HeartbeatInterval: time.Second, DisableReaper: true, Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		regs = append(regs, r)
	}
	defer func() {
		for _, r := range regs {
			r.Close()
		}
	}()
	cache, err := discovery.New(ctx, cat, discovery.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer cache.Close()
	time.Sleep(2 * time.Second) // let the heartbeat rounds settle into their rhythm

	cpu0, wall0 := cputime.Process(), time.Now()
	var srv0 time.Duration
	if server != nil {
		srv0 = server()
	}
	before := sumStats(regs)
	for b.Loop() {
		time.Sleep(time.Second)
	}
	cpu, wall := cputime.Process()-cpu0, time.Since(wall0)
	after := sumStats(regs)
	if got := len(cache.All()); got != n {
		b.Fatalf("cache holds %d instances, want %d (something expired)", got, n)
	}
	b.ReportMetric(cpu.Seconds()/wall.Seconds(), "cpu-cores")
	if server != nil {
		b.ReportMetric((server()-srv0).Seconds()/wall.Seconds(), "server-cpu-cores")
	}
	b.ReportMetric(float64(after.Heartbeats-before.Heartbeats)/wall.Seconds(), "heartbeats/s")
	b.ReportMetric(float64(after.Failures-before.Failures), "failures")
}

// serverCPU sums the CPU time of every server process connected to the
// database of dsn (the catalog's pool and its LISTEN connection).
func serverCPU(b *testing.B, dsn string) time.Duration {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`)
	if err != nil {
		b.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		b.Fatal(err)
	}
	var total time.Duration
	for _, pid := range pids {
		if d, err := pgtest.BackendCPU(pid); err == nil {
			total += d
		}
	}
	return total
}

func sumStats(regs []*switchboard.Registration) switchboard.RegistrationStats {
	var s switchboard.RegistrationStats
	for _, r := range regs {
		x := r.Stats()
		s.Heartbeats += x.Heartbeats
		s.Failures += x.Failures
		s.Reregistrations += x.Reregistrations
	}
	return s
}
