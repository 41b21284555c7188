package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/catalogtest"
	"github.com/switchboard-io/switchboard/internal/cputime"
)

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
	cpu0 := cputime.Process()
	for b.Loop() {
		missing, err := c.Heartbeat(ctx, ids...)
		if err != nil || len(missing) != 0 {
			b.Fatalf("heartbeat: %d missing, %v", len(missing), err)
		}
	}
	cpu := cputime.Process() - cpu0
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

// BenchmarkFleet100k is the side-by-side benchmark's 100,000-instance shape on one file:
// 8 concurrent writers of one handle register 100,000 instances (2
// capabilities each, one of them held by 1 % of the fleet, and 2 metadata
// keys); then List by that capability (1,000 rows) runs b.N times; then a
// new handle's Watch of everything runs until synced, b.N times.
// cpu-us/register is the process's CPU time per registration, steadier
// than the rate on a shared machine.
func BenchmarkFleet100k(b *testing.B) {
	const n, writers = 100_000, 8
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "bench.db")
	c, err := Open(ctx, fileDSN(path), quiet)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	start, cpu0 := time.Now(), cputime.Process()
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := w; i < n; i += writers {
				in := switchboard.Instance{ID: fmt.Sprintf("inst-%06d", i), Name: fmt.Sprint("svc-", i%200),
					Type: switchboard.TypeWriter, Address: fmt.Sprintf("10.0.%d.%d:4317", i%250, i%200),
					Capabilities: []string{"storage", fmt.Sprint("cap-", i%100)}, Version: "1.0.0",
					Metadata: map[string]string{"zone": fmt.Sprint("z", i%3), "rack": fmt.Sprint("r", i%40)}, TTL: time.Hour}
				if _, err := c.Register(ctx, in); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	rate := n / time.Since(start).Seconds()
	cpu := float64((cputime.Process() - cpu0).Microseconds()) / n
	b.Logf("registration: %.0f/s, %.0f µs CPU each", rate, cpu) // shown even if a later phase fails
	b.ReportMetric(rate, "registers/s")
	b.ReportMetric(cpu, "cpu-us/register")

	var list time.Duration
	for range b.N {
		t0 := time.Now()
		got, err := c.List(ctx, switchboard.Query{Capability: "cap-7"})
		list += time.Since(t0)
		if err != nil || len(got) != n/100 {
			b.Fatalf("list: %d, %v", len(got), err)
		}
	}
	b.ReportMetric(float64(list.Microseconds())/1000/float64(b.N), "ms/list")

	var snap time.Duration
	for range b.N {
		w, err := Open(ctx, fileDSN(path), quiet)
		if err != nil {
			b.Fatal(err)
		}
		snap += catalogtest.TimeSnapshot(b, w, n)
		w.Close()
	}
	b.ReportMetric(float64(snap.Microseconds())/1000/float64(b.N), "ms/snapshot")
}

// BenchmarkWriteChurn is the side-by-side benchmark's write-churn shape on one file: 12
// writers, each with its own catalog handle (its own pools and write lock,
// as 12 processes would have), each looping register → heartbeat →
// deregister of a fresh instance, the deregister in 4 of 5 rounds. ops/s
// counts every call (2.8 per round). The b.N rounds are shared.
func BenchmarkWriteChurn(b *testing.B) {
	const writers = 12
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "bench.db")
	cats := make([]switchboard.Catalog, writers)
	for i := range cats {
		c, err := Open(ctx, fileDSN(path), quiet)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		cats[i] = c
	}
	catalogtest.WriteChurn(b, cats, func(w int, i int64) switchboard.Instance {
		return sample(fmt.Sprintf("churn-%d-%d", w, i))
	})
}

// benchFleet fills a new file with n instances in one transaction (as
// BenchmarkFleet100k's writers would leave them, without the wait): ids
// inst-000000…, 200 names, capabilities "storage" and one of cap-0…cap-99
// (each held by 1 %), 2 metadata keys, a TTL of an hour. It returns the
// file's path and a handle on it.
func benchFleet(b *testing.B, n int) (string, *Catalog) {
	b.Helper()
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "bench.db")
	c, err := Open(ctx, fileDSN(path), quiet)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	err = c.write(ctx, func(tx *txn) error {
		if _, err := tx.ExecContext(ctx, `WITH RECURSIVE g(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM g WHERE i < ? - 1)
			INSERT INTO instances (id, name, type, address, capabilities, version, metadata, ttl_ms, registered_at, last_seen)
			SELECT printf('inst-%06d', i), 'svc-' || (i % 200), 'writer', '10.0.' || (i % 250) || '.' || (i % 200) || ':4317',
				'["storage","cap-' || (i % 100) || '"]', '1.0.0', '{"rack":"r' || (i % 40) || '","zone":"z' || (i % 3) || '"}',
				3600000, `+nowSQL+`, `+nowSQL+` FROM g`, n); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO instance_capabilities (instance_id, capability)
			SELECT i.id, j.value FROM instances i, json_each(i.capabilities) j`)
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	// Rows packed after their insert (by a trigger) grew and split their
	// pages; registered in id order they would fill them (VACUUM). One
	// transaction left the whole file in the WAL, whose pages a reader
	// looks up one by one; a fleet registered over time is mostly in the
	// file (SQLite checkpoints every 1,000 pages).
	for _, stmt := range []string{`VACUUM`, `PRAGMA wal_checkpoint(TRUNCATE)`} {
		if _, err := c.d.wdb.ExecContext(ctx, stmt); err != nil {
			b.Fatal(err)
		}
	}
	return path, c
}

// BenchmarkWatchSnapshot100k measures a new handle's Watch of everything
// until synced over 100,000 instances (the side-by-side benchmark's shape, as
// postgres.BenchmarkWatchSnapshot100k): what a process starting up pays
// before its cache is ready. Each round opens its own handle, as a new
// process would. cpu-ms/snapshot is the process's CPU time per round.
func BenchmarkWatchSnapshot100k(b *testing.B) {
	const n = 100_000
	path, _ := benchFleet(b, n)
	ctx := context.Background()
	b.ResetTimer()
	var total time.Duration
	cpu0, flt0 := cputime.Process(), cputime.MinorFaults()
	for range b.N {
		c, err := Open(ctx, fileDSN(path), quiet)
		if err != nil {
			b.Fatal(err)
		}
		total += catalogtest.TimeSnapshot(b, c, n)
		c.Close()
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/snapshot")
	b.ReportMetric(float64((cputime.Process()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/snapshot")
	b.ReportMetric(float64(cputime.MinorFaults()-flt0)/float64(b.N), "faults/snapshot")
}

// BenchmarkListByCapability1pct reads the 1,000 holders of a capability 1 %
// of 100,000 rows hold (the side-by-side benchmark's shape, as
// postgres.BenchmarkListByCapability1pct), straight from the catalog, in a
// process that has listed them before: each capability is listed once
// before the timer starts (the first List of a capability in a process
// also takes the page faults of the file's mapping for its rows).
func BenchmarkListByCapability1pct(b *testing.B) {
	_, c := benchFleet(b, 100_000)
	ctx := context.Background()
	for i := range 100 {
		if _, err := c.List(ctx, switchboard.Query{Capability: "cap-" + strconv.Itoa(i)}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	rows := 0
	cpu0 := cputime.Process()
	for i := 0; b.Loop(); i++ {
		l, err := c.List(ctx, switchboard.Query{Capability: "cap-" + strconv.Itoa(i%100)})
		if err != nil {
			b.Fatal(err)
		}
		rows = len(l)
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/list")
	b.ReportMetric(float64((cputime.Process()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/list")
	b.ReportMetric(float64(rows), "rows/list")
}

// BenchmarkSnapshotRead100k breaks the snapshot read of 100,000 instances
// down, to tell this package's cost from the driver's and the hub's:
// "ids" steps through `SELECT id FROM instances` (the driver's floor for
// any read of every row: one column, nothing decoded), "packed" steps
// through the rows a snapshot reads (packedCols, nothing decoded),
// "snapshot" is the whole of the source's Snapshot (read, sort, decode).
// What BenchmarkWatchSnapshot100k takes beyond "snapshot" is the hub's.
func BenchmarkSnapshotRead100k(b *testing.B) {
	const n = 100_000
	_, c := benchFleet(b, n)
	ctx := context.Background()
	scan := func(query string, dest ...any) func() (int, error) {
		return func() (int, error) {
			rows := 0
			err := c.read(ctx, func(tx *txn) error {
				r, err := tx.QueryContext(ctx, query)
				if err != nil {
					return err
				}
				defer r.Close()
				for r.Next() {
					if err := r.Scan(dest...); err != nil {
						return err
					}
					rows++
				}
				return r.Err()
			})
			return rows, err
		}
	}
	var (
		id   string
		p    packedRow
		read = map[string]func() (int, error){
			"ids":    scan(`SELECT id FROM instances`, &id),
			"packed": scan(`SELECT `+packedCols+` FROM instances i`, p.dest()...),
			"snapshot": func() (int, error) {
				s, err := source{c}.Snapshot(ctx)
				return len(s.Instances), err
			},
		}
	)
	for _, name := range []string{"ids", "packed", "snapshot"} {
		b.Run(name, func(b *testing.B) {
			cpu0 := cputime.Process()
			for b.Loop() {
				if rows, err := read[name](); err != nil || rows != n {
					b.Fatalf("%d rows, %v", rows, err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/read")
			b.ReportMetric(float64((cputime.Process()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/read")
		})
	}
}

// BenchmarkResync100k measures one periodic resync (every poll_interval in
// every watching process) of a 100,000-row catalog whose content has not
// changed since the mirror read it (catalogtest.Resync): as the mirror
// holds it, and with every row renewed since.
func BenchmarkResync100k(b *testing.B) {
	const n = 100_000
	_, c := benchFleet(b, n)
	ctx := context.Background()
	catalogtest.Resync(b, c, n, func() {
		h, err := c.watchHub()
		if err != nil {
			b.Fatal(err)
		}
		h.Resync()
	}, func() error {
		_, err := c.d.wdb.ExecContext(ctx, `UPDATE instances SET last_seen = last_seen + 1000`)
		return err
	})
}
