package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
)

// cpuTime is the process's user+system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkHeartbeat10k measures one batched heartbeat of 10,000 instances
// on one file: the work of "10,000 instances heartbeating every second".
// cpu-cores is the CPU time of one batch per second of wall time, i.e. the
// fraction of a core that once-a-second batch costs.
func BenchmarkHeartbeat10k(b *testing.B) {
	const n = 10000
	ctx := context.Background()
	c, err := Open(ctx, fileDSN(filepath.Join(b.TempDir(), "bench.db")), quiet)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ids := make([]string, n)
	for i := range ids {
		in := sample(fmt.Sprintf("inst-%05d", i))
		in.TTL = time.Hour
		if _, err := c.Register(ctx, in); err != nil {
			b.Fatal(err)
		}
		ids[i] = in.ID
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime(b)
	for b.Loop() {
		missing, err := c.Heartbeat(ctx, ids...)
		if err != nil || len(missing) != 0 {
			b.Fatalf("heartbeat: %d missing, %v", len(missing), err)
		}
	}
	cpu := cpuTime(b) - cpu0
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/float64(time.Second), "cpu-cores")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/n, "cpu-ns/id")
}

// BenchmarkRegister measures one upsert that changes the row (and logs it).
func BenchmarkRegister(b *testing.B) {
	ctx := context.Background()
	c, err := Open(ctx, fileDSN(filepath.Join(b.TempDir(), "bench.db")), quiet)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	in := sample("r")
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		in.Version = fmt.Sprint(i)
		if _, err := c.Register(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkListCapability measures a capability lookup among 10,000 rows
// (through the capability index) that selects 100 of them.
func BenchmarkListCapability(b *testing.B) {
	ctx := context.Background()
	c, err := Open(ctx, fileDSN(filepath.Join(b.TempDir(), "bench.db")), quiet)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	for i := range 10000 {
		in := sample(fmt.Sprintf("inst-%05d", i))
		in.TTL = time.Hour
		in.Capabilities = []string{fmt.Sprint("cap-", i%100)}
		if _, err := c.Register(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		got, err := c.List(ctx, switchboard.Query{Capability: "cap-7"})
		if err != nil || len(got) != 100 {
			b.Fatalf("list: %d, %v", len(got), err)
		}
	}
}
