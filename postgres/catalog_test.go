package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/hub"
	"github.com/switchboard-io/switchboard/postgres/pgtest"
)

func TestOpenThroughRegistry(t *testing.T) {
	dsn := pgtest.Schema(t, testDSN)
	c, err := switchboard.Open(ctxT(t), dsn, switchboard.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, ok := c.(switchboard.Leaser); !ok {
		t.Fatal("postgres catalog is not a Leaser")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := c.List(ctxT(t), switchboard.Query{}); !errors.Is(err, switchboard.ErrClosed) {
		t.Fatalf("List after Close: %v, want ErrClosed", err)
	}
}

func TestConcurrentMigrations(t *testing.T) {
	dsn := pgtest.Schema(t, testDSN)
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for range 6 {
		wg.Go(func() {
			d, _ := switchboard.ParseDSN(dsn)
			c, err := Open(ctxT(t), d, switchboard.Options{Logger: quietLogger()})
			if err != nil {
				errs <- err
				return
			}
			c.Close()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent Open: %v", err)
	}
	check := openDSN(t, dsn, switchboard.Options{})
	var versions []int
	rows, err := check.pool.Query(ctxT(t), `SELECT version FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		versions = append(versions, v)
	}
	var want []int
	for v := 1; v < len(migrations); v++ {
		want = append(want, v)
	}
	if !slices.Equal(versions, want) {
		t.Fatalf("schema_migrations = %v, want %v", versions, want)
	}
}

func TestRegisterUpsert(t *testing.T) {
	c, conn, _ := newCatalog(t)
	ctx := ctxT(t)
	in := inst("Billing API", "10.0.0.1:8080", "storage", "custom_cap", "storage")
	in.Metadata = map[string]string{"zone": "a"}
	in.Components = json.RawMessage(`{"z": 1, "a": [1, 2]}`)
	got, err := c.Register(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := uuid.Parse(got.ID); err != nil {
		t.Fatalf("generated id %q is not a UUID: %v", got.ID, err)
	}
	if got.Name != "billing-api" || got.TTL != switchboard.DefaultTTL || !slices.Equal(got.Capabilities, []string{"storage", "custom_cap"}) {
		t.Fatalf("stored %+v", got)
	}
	if string(got.Components) != `{"z": 1, "a": [1, 2]}` {
		t.Fatalf("components not kept byte for byte: %s", got.Components)
	}
	if got.Metadata["zone"] != "a" || got.Stale || !got.RegisteredAt.Equal(got.LastSeen) {
		t.Fatalf("stored %+v", got)
	}
	if n := count(t, conn, `SELECT count(*) FROM changes WHERE id = $1 AND op = 'upsert'`, got.ID); n != 1 {
		t.Fatalf("%d upsert entries after first register, want 1", n)
	}

	// Unchanged: renewed, no log entry.
	in.ID = got.ID
	again, err := c.Register(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if !again.RegisteredAt.Equal(got.RegisteredAt) || again.LastSeen.Before(got.LastSeen) {
		t.Fatalf("re-register: registered_at %v → %v, last_seen %v → %v", got.RegisteredAt, again.RegisteredAt, got.LastSeen, again.LastSeen)
	}
	if n := count(t, conn, `SELECT count(*) FROM changes WHERE id = $1`, got.ID); n != 1 {
		t.Fatalf("%d entries after unchanged re-register, want 1", n)
	}

	// Each real change: one entry, registered_at kept.
	changes := []func(*switchboard.Instance){
		func(i *switchboard.Instance) { i.Address = "10.0.0.2:8080" },
		func(i *switchboard.Instance) { i.Capabilities = append(i.Capabilities, "routing") },
		func(i *switchboard.Instance) { i.Metadata = map[string]string{"zone": "b"} },
		func(i *switchboard.Instance) { i.Components = nil },
		func(i *switchboard.Instance) { i.TTL = 3 * time.Second },
		func(i *switchboard.Instance) { i.Version = "1.0.1" },
		func(i *switchboard.Instance) { i.Type = switchboard.TypeRouter },
	}
	for k, change := range changes {
		change(&in)
		out, err := c.Register(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		if !out.RegisteredAt.Equal(got.RegisteredAt) {
			t.Fatalf("change %d: registered_at changed", k)
		}
		if n := count(t, conn, `SELECT count(*) FROM changes WHERE id = $1`, got.ID); n != k+2 {
			t.Fatalf("change %d: %d log entries, want %d", k, n, k+2)
		}
		if _, err := c.Register(ctx, in); err != nil {
			t.Fatal(err)
		}
		if n := count(t, conn, `SELECT count(*) FROM changes WHERE id = $1`, got.ID); n != k+2 {
			t.Fatalf("change %d repeated: %d log entries, want %d", k, n, k+2)
		}
	}
	final, err := c.Get(ctx, got.ID)
	if err != nil {
		t.Fatal(err)
	}
	if final.Address != "10.0.0.2:8080" || final.TTL != 3*time.Second || final.Components != nil || final.Metadata["zone"] != "b" || final.Type != switchboard.TypeRouter {
		t.Fatalf("final %+v", final)
	}

	// Caller-chosen id, invalid input.
	fixed := inst("svc", "[::1]:9000")
	fixed.ID = "pod-7.ns:abc"
	if out, err := c.Register(ctx, fixed); err != nil || out.ID != fixed.ID {
		t.Fatalf("fixed id: %+v, %v", out, err)
	}
	for _, bad := range []switchboard.Instance{inst("", "a:1"), inst("x", "::1:80"), inst("x", "a:1", "bad cap")} {
		if _, err := c.Register(ctx, bad); !errors.Is(err, switchboard.ErrInvalid) {
			t.Errorf("Register(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
}

func TestConcurrentRegisterSameID(t *testing.T) {
	c, conn, _ := newCatalog(t)
	ctx := ctxT(t)
	in := inst("svc", "h:1")
	in.ID = "same"
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			if _, err := c.Register(ctx, in); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := count(t, conn, `SELECT count(*) FROM changes WHERE id = 'same'`); n != 1 {
		t.Fatalf("%d log entries for 16 identical registrations, want 1", n)
	}
}

func TestHeartbeat(t *testing.T) {
	c, conn, _ := newCatalog(t)
	ctx := ctxT(t)
	a, _ := c.Register(ctx, inst("a", "h:1"))
	b, _ := c.Register(ctx, inst("b", "h:2"))
	exec(t, conn, `UPDATE instances SET last_seen = now() - interval '5 seconds'`)
	before := count(t, conn, `SELECT count(*) FROM changes`)
	missing, err := c.Heartbeat(ctx, "zz", a.ID, "gone", b.ID, "zz")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(missing, []string{"zz", "gone"}) {
		t.Fatalf("missing = %v, want [zz gone]", missing)
	}
	if n := count(t, conn, `SELECT count(*) FROM instances WHERE now() - last_seen < interval '1 second'`); n != 2 {
		t.Fatalf("%d rows renewed, want 2", n)
	}
	if after := count(t, conn, `SELECT count(*) FROM changes`); after != before {
		t.Fatalf("heartbeat wrote %d log entries", after-before)
	}
	if missing, err := c.Heartbeat(ctx); err != nil || missing != nil {
		t.Fatalf("empty heartbeat: %v %v", missing, err)
	}
	// A stale row coming back is logged once, so watchers see it return.
	exec(t, conn, `UPDATE instances SET last_seen = now() - interval '11 seconds' WHERE id = $1`, a.ID)
	if _, err := c.Heartbeat(ctx, a.ID, b.ID); err != nil {
		t.Fatal(err)
	}
	if n := count(t, conn, `SELECT count(*) FROM changes WHERE id = $1`, a.ID); n != 2 {
		t.Fatalf("revived row: %d log entries, want 2 (register, revival)", n)
	}
	if n := count(t, conn, `SELECT count(*) FROM changes WHERE id = $1`, b.ID); n != 1 {
		t.Fatalf("live row: %d log entries, want 1", n)
	}
}

func TestDeregister(t *testing.T) {
	c, conn, _ := newCatalog(t)
	ctx := ctxT(t)
	a, _ := c.Register(ctx, inst("a", "h:1"))
	if err := c.Deregister(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if n := count(t, conn, `SELECT count(*) FROM changes WHERE id = $1 AND op = 'delete' AND reason = 'deregistered'`, a.ID); n != 1 {
		t.Fatalf("%d deregistered entries", n)
	}
	if err := c.Deregister(ctx, a.ID); !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("second Deregister = %v, want ErrNotFound", err)
	}
	if _, err := c.Get(ctx, a.ID); !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("Get after Deregister = %v, want ErrNotFound", err)
	}
}

func TestListAndStaleByDatabaseClock(t *testing.T) {
	c, conn, _ := newCatalog(t)
	ctx := ctxT(t)
	mk := func(name, typ string, caps ...string) switchboard.Instance {
		in := inst(name, "h:1", caps...)
		in.Type = typ
		out, err := c.Register(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	b1 := mk("b", "writer", "storage", "x-custom")
	a1 := mk("a", "router", "routing")
	b2 := mk("b", "querier", "query_execution", "x-custom")
	// Stale by the database clock: one second past a 10 s TTL.
	exec(t, conn, `UPDATE instances SET last_seen = now() - ttl - interval '1 second' WHERE id = $1`, b2.ID)

	ids := func(q switchboard.Query) []string {
		l, err := c.List(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, in := range l {
			out = append(out, in.ID)
		}
		return out
	}
	sortedB := []string{b1.ID, b2.ID}
	slices.Sort(sortedB)
	cases := []struct {
		q    switchboard.Query
		want []string
	}{
		{switchboard.Query{}, []string{a1.ID, b1.ID}},
		{switchboard.Query{All: true}, append([]string{a1.ID}, sortedB...)},
		{switchboard.Query{Capability: "x-custom"}, []string{b1.ID}},
		{switchboard.Query{Capability: "x-custom", All: true}, sortedB},
		{switchboard.Query{Name: "b", Type: "querier", All: true}, []string{b2.ID}},
		{switchboard.Query{Type: "router"}, []string{a1.ID}},
		{switchboard.Query{Capability: "nope"}, nil},
	}
	for _, tc := range cases {
		if got := ids(tc.q); !slices.Equal(got, tc.want) {
			t.Errorf("List(%+v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	got, err := c.Get(ctx, b2.ID)
	if err != nil || !got.Stale {
		t.Fatalf("Get stale row: %+v %v", got, err)
	}
}

func TestReap(t *testing.T) {
	c, conn, _ := newCatalog(t)
	ctx := ctxT(t)
	var ids []string
	for range 4 {
		in := inst("svc", "h:1")
		in.TTL = time.Minute
		out, err := c.Register(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, out.ID)
	}
	// ids[0]: past 2×TTL; ids[1]: stale but within 2×TTL; ids[2]: 30 min old
	// (a 10 min olderThan reaps it); ids[3]: fresh.
	exec(t, conn, `UPDATE instances SET last_seen = now() - interval '121 seconds' WHERE id = $1`, ids[0])
	exec(t, conn, `UPDATE instances SET last_seen = now() - interval '90 seconds' WHERE id = $1`, ids[1])
	exec(t, conn, `UPDATE instances SET last_seen = now() - interval '30 minutes', ttl = interval '1 hour' WHERE id = $1`, ids[2])
	n, err := c.Reap(ctx, 0)
	if err != nil || n != 1 {
		t.Fatalf("Reap(0) = %d, %v; want 1", n, err)
	}
	if n, err := c.Reap(ctx, 0); err != nil || n != 0 {
		t.Fatalf("Reap(0) again = %d, %v; want 0 (idempotent)", n, err)
	}
	n, err = c.Reap(ctx, 10*time.Minute)
	if err != nil || n != 1 {
		t.Fatalf("Reap(10m) = %d, %v; want 1", n, err)
	}
	n, err = c.Reap(ctx, 80*time.Second)
	if err != nil || n != 1 {
		t.Fatalf("Reap(80s) = %d, %v; want 1", n, err)
	}
	if n := count(t, conn, `SELECT count(*) FROM changes WHERE op = 'delete' AND reason = 'expired'`); n != 3 {
		t.Fatalf("%d expired entries, want 3", n)
	}
	if _, err := c.Get(ctx, ids[3]); err != nil {
		t.Fatalf("fresh row reaped: %v", err)
	}
	if _, err := c.Reap(ctx, -time.Second); !errors.Is(err, switchboard.ErrInvalid) {
		t.Fatalf("negative olderThan: %v", err)
	}
}

func TestNowIsDatabaseClock(t *testing.T) {
	c, _, _ := newCatalog(t)
	ctx := ctxT(t)
	t0, err := c.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	in, err := c.Register(ctx, inst("a", "h:1"))
	if err != nil {
		t.Fatal(err)
	}
	t1, _ := c.Now(ctx)
	if in.LastSeen.Before(t0) || in.LastSeen.After(t1) {
		t.Fatalf("last_seen %v outside database clock [%v, %v]", in.LastSeen, t0, t1)
	}
}

// TestNoProcessClock guards the rule that every timestamp and TTL
// comparison uses the database's now(): the catalog code never reads the
// process clock except to pace its own loops (listen.go's backoff).
func TestNoProcessClock(t *testing.T) {
	files, _ := filepath.Glob("*.go")
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		file, err := parser.ParseFile(fset, f, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == "time" && (sel.Sel.Name == "Now" || sel.Sel.Name == "Since" || sel.Sel.Name == "Until") {
				t.Errorf("%s: time.%s: the catalog must use the database clock", fset.Position(sel.Pos()), sel.Sel.Name)
			}
			return true
		})
	}
}

func TestChangeLog(t *testing.T) {
	c, conn, _ := newCatalog(t)
	ctx := ctxT(t)
	src := source{c}
	snap, err := src.Snapshot(ctx)
	if err != nil || snap.Seq != 0 || len(snap.Instances) != 0 {
		t.Fatalf("empty snapshot: %+v %v", snap, err)
	}
	a, _ := c.Register(ctx, inst("a", "h:1"))
	b, _ := c.Register(ctx, inst("b", "h:2"))
	if err := c.Deregister(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	batch, err := src.ChangesSince(ctx, hub.Cursor{Seq: snap.Seq})
	if err != nil {
		t.Fatal(err)
	}
	if len(batch.Changes) != 3 {
		t.Fatalf("%d changes, want 3: %+v", len(batch.Changes), batch.Changes)
	}
	ch := batch.Changes
	if ch[0].ID != a.ID || !ch[0].Found || ch[0].Deleted || ch[0].Instance.Address != "h:1" {
		t.Errorf("change 0: %+v", ch[0])
	}
	if ch[1].ID != b.ID || ch[1].Found || ch[1].Deleted {
		t.Errorf("change 1 (row gone since): %+v", ch[1])
	}
	if ch[2].ID != b.ID || !ch[2].Deleted || ch[2].Reason != switchboard.ReasonDeregistered {
		t.Errorf("change 2: %+v", ch[2])
	}
	if batch.Seq != ch[2].Seq || batch.Now.IsZero() {
		t.Errorf("batch seq %d now %v", batch.Seq, batch.Now)
	}
	empty, err := src.ChangesSince(ctx, hub.Cursor{Seq: batch.Seq})
	if err != nil || len(empty.Changes) != 0 || empty.Seq != batch.Seq {
		t.Fatalf("caught up: %+v %v", empty, err)
	}
	snap, err = src.Snapshot(ctx)
	if err != nil || snap.Seq != batch.Seq || len(snap.Instances) != 1 {
		t.Fatalf("snapshot: %+v %v", snap, err)
	}
	// A position from the future: the database was recreated or restored.
	if _, err := src.ChangesSince(ctx, hub.Cursor{Seq: batch.Seq + 1000}); !errors.Is(err, hub.ErrCursorGone) {
		t.Fatalf("future cursor: %v, want ErrCursorGone", err)
	}

	// Renewals: by last_seen, with the database clock.
	since := snap.Now
	exec(t, conn, `UPDATE instances SET last_seen = now() - interval '1 minute'`)
	if r, _, err := src.RenewedSince(ctx, since); err != nil || len(r) != 0 {
		t.Fatalf("renewals before heartbeat: %v %v", r, err)
	}
	if _, err := c.Heartbeat(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	r, now, err := src.RenewedSince(ctx, since)
	if err != nil || len(r) != 1 || r[0].ID != a.ID || r[0].LastSeen.After(now) {
		t.Fatalf("renewals: %v %v %v", r, now, err)
	}
}

func TestChangeLogTrim(t *testing.T) {
	c, conn, _ := newCatalog(t)
	ctx := ctxT(t)
	src := source{c}
	c.keepEntries, c.keepAge = 5, 0
	first, _ := src.Snapshot(ctx)
	for range 20 {
		if _, err := c.Register(ctx, inst("svc", "h:1")); err != nil {
			t.Fatal(err)
		}
	}
	mid, _ := src.Snapshot(ctx)
	// A reap that deletes nothing trims the log.
	if _, err := c.Reap(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if n := count(t, conn, `SELECT count(*) FROM changes`); n != 5 {
		t.Fatalf("%d entries kept, want 5", n)
	}
	if _, err := src.ChangesSince(ctx, hub.Cursor{Seq: first.Seq}); !errors.Is(err, hub.ErrCursorGone) {
		t.Fatalf("trimmed cursor: %v, want ErrCursorGone", err)
	}
	trimmed := int64(count(t, conn, `SELECT trimmed_to::int FROM change_log`))
	if b, err := src.ChangesSince(ctx, hub.Cursor{Seq: trimmed}); err != nil || len(b.Changes) != 5 {
		t.Fatalf("from trim point: %d changes, %v", len(b.Changes), err)
	}
	if b, err := src.ChangesSince(ctx, hub.Cursor{Seq: mid.Seq}); err != nil || len(b.Changes) != 0 {
		t.Fatalf("from head: %+v, %v", b, err)
	}
	// Age keeps entries too: nothing is trimmed while it is young.
	c.keepAge = time.Hour
	for range 10 {
		if _, err := c.Register(ctx, inst("svc", "h:1")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Reap(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if n := count(t, conn, `SELECT count(*) FROM changes`); n != 15 {
		t.Fatalf("%d entries after young writes, want 15", n)
	}
}

func TestCapabilityUsesGINIndex(t *testing.T) {
	_, conn, _ := newCatalog(t)
	exec(t, conn, `INSERT INTO instances (id, name, type, address, capabilities, ttl)
		SELECT 'i' || g, 'svc' || (g % 100), 'writer', 'h:1',
		       ARRAY['storage', 'cap' || (g % 500)], interval '10 seconds'
		FROM generate_series(1, 20000) g`)
	exec(t, conn, `ANALYZE instances`)
	for _, q := range []switchboard.Query{{Capability: "cap7"}, {Capability: "cap7", All: true}} {
		s, args := listSQL(q)
		rows, err := conn.Query(context.Background(), "EXPLAIN "+s, args...)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, line)
		}
		p := strings.Join(plan, "\n")
		if !strings.Contains(p, "instances_capabilities_idx") {
			t.Errorf("List(%+v) does not use the GIN index:\n%s", q, p)
		}
	}
}

// TestHeartbeatTouchesNoIndex guards the HOT heartbeat: no index may cover
// a column a heartbeat writes, or every heartbeat inserts into every index.
func TestHeartbeatTouchesNoIndex(t *testing.T) {
	_, conn, _ := newCatalog(t)
	n := count(t, conn, `SELECT count(*) FROM pg_index x
		JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = ANY(x.indkey)
		WHERE x.indrelid = 'instances'::regclass AND a.attname IN ('last_seen', 'revived')`)
	if n != 0 {
		t.Fatalf("%d indexes cover last_seen or revived", n)
	}
}
