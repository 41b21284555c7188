package postgres

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/hub"
)

// BenchmarkSnapshotFloor breaks BenchmarkWatchSnapshot100k down into what
// bounds it: the server's own time for the read (EXPLAIN ANALYZE, no
// output conversion), a bare read of the same rows that decodes nothing,
// the backend's Snapshot (read and decode), and the hub's part alone (a
// Watch until synced over a snapshot already in memory).
func BenchmarkSnapshotFloor(b *testing.B) {
	const n = 100_000
	c, _ := benchCatalog(b, n)
	ctx := context.Background()
	var pid int
	if err := c.pool.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		b.Fatal(err)
	}
	cpu := func(b *testing.B, f func()) { cpuPerRound(b, pid, func(int) { f() }) }
	b.Run("server", func(b *testing.B) {
		serverTime(b, ctx, c, func(int) (string, []any) { return snapshotQuery, nil })
	})
	b.Run("bare", func(b *testing.B) {
		cpu(b, func() {
			err := pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
				rows, err := tx.Query(ctx, snapshotQuery, binaryResults)
				if err != nil {
					return err
				}
				got := 0
				for rows.Next() {
					got++
				}
				if got != n {
					b.Fatalf("%d rows", got)
				}
				return rows.Err()
			})
			if err != nil {
				b.Fatal(err)
			}
		})
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/read")
	})
	b.Run("snapshot", func(b *testing.B) {
		cpu(b, func() {
			s, err := source{c}.Snapshot(ctx)
			if err != nil || len(s.Instances) != n {
				b.Fatal(len(s.Instances), err)
			}
		})
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/snapshot")
	})
	b.Run("hub", func(b *testing.B) {
		snap, err := source{c}.Snapshot(ctx)
		if err != nil {
			b.Fatal(err)
		}
		var total time.Duration
		for b.Loop() {
			s := snap
			s.Instances = make([]switchboard.Instance, len(snap.Instances))
			copy(s.Instances, snap.Instances)
			h := hub.New(memSource{s}, hub.Options{Logger: quietLogger()})
			t0 := time.Now()
			ch, err := h.Watch(ctx, switchboard.Query{})
			if err != nil {
				b.Fatal(err)
			}
			for ev := range ch {
				if ev.Kind == switchboard.EventSynced {
					break
				}
			}
			total += time.Since(t0)
			h.Close()
		}
		b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/watch")
	})
}

// memSource serves one snapshot and an empty log.
type memSource struct{ s hub.Snapshot }

func (m memSource) Snapshot(context.Context) (hub.Snapshot, error) { return m.s, nil }
func (m memSource) ChangesSince(_ context.Context, cur hub.Cursor) (hub.Batch, error) {
	seq := cur.Seq
	return hub.Batch{Seq: seq, Epoch: m.s.Epoch, Now: m.s.Now}, nil
}
func (m memSource) RenewedSince(context.Context, time.Time) ([]hub.Renewal, time.Time, error) {
	return nil, m.s.Now, nil
}

// BenchmarkListFloor breaks BenchmarkListByCapability1pct down the same
// way: the server's time (EXPLAIN ANALYZE), a bare read of the rows, and
// List (read and decode).
func BenchmarkListFloor(b *testing.B) {
	c, ctx, pid := pctCatalog(b)
	query := func(i int) (string, []any) {
		return listSQL(switchboard.Query{Capability: "pct" + strconv.Itoa(i%100)})
	}
	b.Run("server", func(b *testing.B) { serverTime(b, ctx, c, query) })
	b.Run("bare", func(b *testing.B) {
		cpuPerRound(b, pid, func(i int) {
			s, args := query(i)
			rows, err := c.pool.Query(ctx, s, append([]any{binaryResults}, args...)...)
			if err != nil {
				b.Fatal(err)
			}
			got := 0
			for rows.Next() {
				got++
			}
			if rows.Err() != nil || got != 1000 {
				b.Fatal(got, rows.Err())
			}
		})
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/read")
	})
	// The same rows through pgx's Scan (the decoding List used before).
	b.Run("scan", func(b *testing.B) {
		cpuPerRound(b, pid, func(i int) {
			s, args := query(i)
			rows, err := c.pool.Query(ctx, s, args...)
			if err != nil {
				b.Fatal(err)
			}
			l, err := scanInstances(rows)
			if err != nil || len(l) != 1000 {
				b.Fatal(len(l), err)
			}
		})
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/list")
	})
	b.Run("list", func(b *testing.B) {
		cpuPerRound(b, pid, func(i int) {
			l, err := c.List(ctx, switchboard.Query{Capability: "pct" + strconv.Itoa(i%100)})
			if err != nil || len(l) != 1000 {
				b.Fatal(len(l), err)
			}
		})
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/list")
	})
}

// scanInstances reads rows through pgx's Scan, as List and Snapshot did
// before readAll.
func scanInstances(rows pgx.Rows) ([]switchboard.Instance, error) {
	defer rows.Close()
	var out []switchboard.Instance
	for rows.Next() {
		in, err := scanInstance(rows, nil)
		if err != nil {
			return nil, err
		}
		out = append(out, in)
	}
	return out, rows.Err()
}

// serverTime reports the server's execution time of query(i) per round
// (EXPLAIN ANALYZE, without per-node timing), as server-ms.
func serverTime(b *testing.B, ctx context.Context, c *Catalog, query func(i int) (string, []any)) {
	var total float64
	for i := 0; b.Loop(); i++ {
		s, args := query(i)
		var plan []map[string]any
		var raw []byte
		if err := c.pool.QueryRow(ctx, `EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) `+s, args...).Scan(&raw); err != nil {
			b.Fatal(err)
		}
		if err := json.Unmarshal(raw, &plan); err != nil {
			b.Fatal(err)
		}
		total += plan[0]["Execution Time"].(float64)
	}
	b.ReportMetric(total/float64(b.N), "server-ms")
}
