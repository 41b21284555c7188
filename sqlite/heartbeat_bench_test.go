package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/cputime"
	"github.com/switchboard-io/switchboard/internal/idgen"
)

// BenchmarkFleetHeartbeat measures what one heartbeat of the benchmark's fleet
// (200 processes × 50 registrations, each process renewing its 50 once a
// second) costs the file, and how much of it is the expiry index. The
// 10,000 rows are registered as the fleet registers them: interleaved,
// each process's ids with its own handle's prefix (idgen), TTL 5 s. Then
// heartbeats of 50 ids go round the 200 processes, as they come in a
// second of the fleet; b.N is the number of heartbeats. It reports this
// process's CPU per heartbeat and, from 100 heartbeats before those, the
// WAL frames (pages) each heartbeat's commit adds.
//
// "expiry-index" is the schema as it is: each renewal also moves the row's
// entry in instances_expiry (ttl_ms, last_seen), from where the process's
// last heartbeat put it to the index's end. "index-not-renewed" replaces
// that index with one on (ttl_ms, registered_at), which no heartbeat
// touches: not a schema to ship (the reapers' look and the watchers'
// renewal reads select by last_seen through that index; without it each
// reads the whole table), but the measure of the index's share of a
// heartbeat.
func BenchmarkFleetHeartbeat(b *testing.B) {
	const procs, each = 200, 50
	for _, v := range []struct{ name, schema string }{
		{"expiry-index", ""},
		{"index-not-renewed", `DROP INDEX instances_expiry; CREATE INDEX instances_expiry ON instances(ttl_ms, registered_at)`},
	} {
		b.Run(v.name, func(b *testing.B) {
			ctx := context.Background()
			c, err := Open(ctx, fileDSN(filepath.Join(b.TempDir(), "fleet.db")), quiet)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			srcs := make([]idgen.Source, procs)
			for p := range srcs {
				srcs[p] = idgen.New()
			}
			ids := registerInterleaved(b, c, procs, each, func(p, i int) switchboard.Instance {
				return switchboard.Instance{ID: srcs[p].Next(), Name: fmt.Sprint("fleet-", p), Type: switchboard.TypeWriter,
					Address:      fmt.Sprintf("10.0.%d.%d:%d", p, i, 1024+i),
					Capabilities: []string{switchboard.CapStorage, switchboard.CapQueryExecution}, Version: "1.0.0",
					Metadata: map[string]string{"zone": "zone-a", "sent": "0"}, TTL: 5 * time.Second}
			})
			db := catalogDB(b, c)
			if v.schema != "" {
				if _, err := db.ExecContext(ctx, v.schema); err != nil {
					b.Fatal(err)
				}
			}
			next := 0
			beat := func(p int) {
				if missing, err := c.Heartbeat(ctx, ids[p]...); err != nil || len(missing) > 0 {
					b.Fatalf("heartbeat: %v, missing %v", err, missing)
				}
			}
			// Two rounds unmeasured: the first renewals of rows registered
			// seconds ago are logged as revivals, and they gather each
			// process's entries in the index as its heartbeats leave them.
			for range 2 {
				for p := range procs {
					beat(p)
				}
			}
			// The frames of 100 heartbeats in a row, as a WAL that many
			// commits fill between two checkpoints holds them: they start
			// on a WAL truncated to nothing, with SQLite's automatic
			// checkpoint off on the writer's connection meanwhile, and
			// their frames are read at the end.
			const window = 100
			wdb := c.d.wdb
			if _, err := wdb.ExecContext(ctx, `PRAGMA wal_autocheckpoint(0)`); err != nil {
				b.Fatal(err)
			}
			walCheckpoint(b, db, "TRUNCATE")
			for range window {
				beat(next)
				next = (next + 1) % procs
			}
			frames := walCheckpoint(b, db, "PASSIVE")
			if _, err := wdb.ExecContext(ctx, `PRAGMA wal_autocheckpoint(1000)`); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			cpu0 := cputime.Process()
			for b.Loop() {
				beat(next)
				next = (next + 1) % procs
			}
			b.ReportMetric(float64((cputime.Process()-cpu0).Microseconds())/float64(b.N), "cpu-us/heartbeat")
			b.ReportMetric(float64(frames)/window, "frames/heartbeat")
		})
	}
}
