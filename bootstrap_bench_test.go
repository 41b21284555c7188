package switchboard_test

import (
	"context"
	"fmt"
	"log/slog"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/discovery"
)

// BenchmarkHeartbeat10k runs 10,000 registrations heartbeating every second
// on one SQLite file, with a discovery cache following the catalog, and
// reports the CPU this process spends per wall-clock second (cpu-cores: 0.5
// is half a core) and the heartbeat failures. One op is one second of
// sustained operation: run it with -benchtime=10x.
func BenchmarkHeartbeat10k(b *testing.B) {
	const n = 10000
	cat := openSQLite(b)
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

	cpu0, wall0 := cpuTime(), time.Now()
	before := sumStats(regs)
	for b.Loop() {
		time.Sleep(time.Second)
	}
	cpu, wall := cpuTime()-cpu0, time.Since(wall0)
	after := sumStats(regs)
	if got := len(cache.All()); got != n {
		b.Fatalf("cache holds %d instances, want %d (something expired)", got, n)
	}
	b.ReportMetric(cpu.Seconds()/wall.Seconds(), "cpu-cores")
	b.ReportMetric(float64(after.Heartbeats-before.Heartbeats)/wall.Seconds(), "heartbeats/s")
	b.ReportMetric(float64(after.Failures-before.Failures), "failures")
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

// cpuTime is the user+system CPU time of this process.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
