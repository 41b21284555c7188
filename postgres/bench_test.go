package postgres

import (
	"context"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/catalogtest"
	"github.com/switchboard-io/switchboard/internal/cputime"
	"github.com/switchboard-io/switchboard/postgres/pgtest"
)

// benchCatalog opens a catalog on a fresh schema with a one-connection pool
// (so one server backend does all the work and can be measured) and fills
// it with n active instances through generate_series: capability cap<i%1000>
// (100 holders each among 100,000) plus "storage" on every row.
func benchCatalog(b *testing.B, n int) (*Catalog, []string) {
	b.Helper()
	dsn := pgtest.Schema(b, testDSN)
	u, _ := url.Parse(dsn)
	q := u.Query()
	q.Set("pool_max_conns", "1")
	u.RawQuery = q.Encode()
	c := openDSN(b, u.String(), switchboard.Options{})
	ctx := context.Background()
	if _, err := c.pool.Exec(ctx, `INSERT INTO instances (id, name, type, address, capabilities, version, metadata, ttl)
		SELECT 'inst-' || g, 'svc-' || (g % 200), 'writer', '10.0.' || (g % 250) || '.' || (g % 200) || ':4317',
		       ARRAY['storage', 'cap' || (g % 1000)], '1.0.0', '{"zone": "a"}', interval '1 hour'
		FROM generate_series(1, $1::int) g`, n); err != nil {
		b.Fatal(err)
	}
	if _, err := c.pool.Exec(ctx, `ANALYZE instances`); err != nil {
		b.Fatal(err)
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = "inst-" + strconv.Itoa(i+1)
	}
	return c, ids
}

// BenchmarkListByCapability reads the 100 holders of one capability among
// 100,000 rows straight from the catalog (no cache): the GIN index at work.
func BenchmarkListByCapability(b *testing.B) {
	c, _ := benchCatalog(b, 100_000)
	ctx := context.Background()
	b.ResetTimer()
	rows := 0
	for i := 0; b.Loop(); i++ {
		l, err := c.List(ctx, switchboard.Query{Capability: "cap" + strconv.Itoa(i%1000)})
		if err != nil {
			b.Fatal(err)
		}
		rows = len(l)
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/list")
	b.ReportMetric(float64(rows), "rows/list")
}

// BenchmarkHeartbeat10k renews 10,000 instances in one batched Heartbeat,
// as a monolith heartbeating them every second would, and reports the CPU
// that costs on both sides as cores busy at one batch per second.
func BenchmarkHeartbeat10k(b *testing.B) {
	c, all := benchCatalog(b, 10_000)
	ctx := context.Background()
	var pid int
	if err := c.pool.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		b.Fatal(err)
	}
	srv0, err := pgtest.BackendCPU(pid)
	if err != nil {
		b.Skipf("server CPU unreadable: %v", err)
	}
	cli0 := cputime.Process()
	b.ResetTimer()
	for b.Loop() {
		missing, err := c.Heartbeat(ctx, all...)
		if err != nil || len(missing) != 0 {
			b.Fatalf("heartbeat: %d missing, %v", len(missing), err)
		}
	}
	b.StopTimer()
	cli := cputime.Process() - cli0
	srv, _ := pgtest.BackendCPU(pid)
	srv -= srv0
	// CPU seconds per batch = cores busy at one batch per second.
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/batch")
	b.ReportMetric(cli.Seconds()/float64(b.N), "client-cores@1Hz")
	b.ReportMetric(srv.Seconds()/float64(b.N), "server-cores@1Hz")
}

// BenchmarkWriteChurn is the write-churn shape of the side-by-side benchmark (bench/): 12 writers, each
// with its own catalog handle (its own pool and connections, as 12
// processes would have), each looping register → heartbeat → deregister of
// a fresh instance, the deregister in 4 of 5 rounds. ops/s counts every call
// (2.8 per round). The b.N rounds are shared among the writers.
func BenchmarkWriteChurn(b *testing.B) {
	const writers = 12
	dsn := pgtest.Schema(b, testDSN)
	cats := make([]switchboard.Catalog, writers)
	for i := range cats {
		cats[i] = openDSN(b, dsn, switchboard.Options{})
	}
	cpu0 := cputime.Process()
	ops := catalogtest.WriteChurn(b, cats, func(w int, i int64) switchboard.Instance {
		return inst("churn-"+strconv.Itoa(w), "10.0.0.1:"+strconv.Itoa(int(i%60000)), "cap"+strconv.Itoa(int(i%7)))
	})
	// The client side's CPU per call: steadier than ops/s on a busy machine.
	b.ReportMetric(float64((cputime.Process()-cpu0).Microseconds())/float64(ops), "client-cpu-µs/op")
}

// BenchmarkWatchSnapshot100k measures a new handle's Watch of everything
// until synced over 100,000 instances (2 capabilities, 1 metadata key):
// what a process starting up pays before its cache is ready. Each round
// opens its own catalog handle, as a new process would.
func BenchmarkWatchSnapshot100k(b *testing.B) {
	const n = 100_000
	seed, _ := benchCatalog(b, n)
	dsn := seed.dsn
	b.ResetTimer()
	var total, cpu time.Duration
	var faults int64
	for range b.N {
		c := openDSN(b, dsn, switchboard.Options{})
		cpu0, flt0 := cputime.Process(), cputime.MinorFaults()
		total += catalogtest.TimeSnapshot(b, c, n)
		cpu += cputime.Process() - cpu0
		faults += cputime.MinorFaults() - flt0
		c.Close()
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/snapshot")
	// This process's CPU (decoding and the hub) until synced: steadier
	// than the wall time on a shared machine.
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "client-cpu-ms")
	// Its page faults (the heap growing into pages it had not touched).
	b.ReportMetric(float64(faults)/float64(b.N), "faults/snapshot")
}

// BenchmarkResync100k measures one periodic resync (every poll_interval in
// every watching process) of a 100,000-row catalog whose content has not
// changed since the mirror read it (catalogtest.Resync): as the mirror
// holds it, and with every row renewed since. The CPU is this process's
// (reading and reconciling), not the server's.
func BenchmarkResync100k(b *testing.B) {
	const n = 100_000
	c, _ := benchCatalog(b, n)
	ctx := context.Background()
	catalogtest.Resync(b, c, n, func() {
		h, err := c.startHub()
		if err != nil {
			b.Fatal(err)
		}
		h.Resync()
	}, func() error {
		_, err := c.pool.Exec(ctx, `UPDATE instances SET last_seen = last_seen + interval '1 ms'`)
		return err
	})
}

// pctCatalog is benchCatalog's 100,000 rows where each also holds one of
// the capabilities pct0…pct99 (1 % each), vacuumed and analysed; pid is the
// backend of c's pool that List uses (its one connection).
func pctCatalog(b *testing.B) (c *Catalog, ctx context.Context, pid int) {
	c, _ = benchCatalog(b, 100_000)
	ctx = context.Background()
	if _, err := c.pool.Exec(ctx, `UPDATE instances SET capabilities = capabilities || ('pct' || (substr(id, 6)::int % 100))`); err != nil {
		b.Fatal(err)
	}
	if _, err := c.pool.Exec(ctx, `VACUUM ANALYZE instances`); err != nil {
		b.Fatal(err)
	}
	if err := c.pool.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		b.Fatal(err)
	}
	return c, ctx, pid
}

// BenchmarkListByCapability1pct reads the 1,000 holders of a capability 1 %
// of 100,000 rows hold (the side-by-side benchmark's shape), straight from the catalog.
func BenchmarkListByCapability1pct(b *testing.B) {
	c, ctx, pid := pctCatalog(b)
	b.ResetTimer()
	rows := 0
	// The CPU of both sides per list: steadier than the wall time on a
	// shared machine.
	cpuPerRound(b, pid, func(i int) {
		l, err := c.List(ctx, switchboard.Query{Capability: "pct" + strconv.Itoa(i%100)})
		if err != nil {
			b.Fatal(err)
		}
		rows = len(l)
	})
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/list")
	b.ReportMetric(float64(rows), "rows/list")
}

// cpuPerRound runs f in b's loop and reports the CPU both sides spent per
// round: this process and the server backend pid.
func cpuPerRound(b *testing.B, pid int, f func(i int)) {
	srv0, _ := pgtest.BackendCPU(pid)
	cli0 := cputime.Process()
	for i := 0; b.Loop(); i++ {
		f(i)
	}
	srv, _ := pgtest.BackendCPU(pid)
	b.ReportMetric(float64((srv-srv0).Microseconds())/1000/float64(b.N), "server-cpu-ms")
	b.ReportMetric(float64((cputime.Process()-cli0).Microseconds())/1000/float64(b.N), "client-cpu-ms")
}
