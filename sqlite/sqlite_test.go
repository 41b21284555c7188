package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/hub"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

// quiet discards logs; its long default TTL keeps rows of a slow run under
// -race on a loaded machine from going stale mid-test.
var quiet = switchboard.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), DefaultTTL: time.Hour}

func tctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func fileDSN(path string) switchboard.DSN {
	return switchboard.DSN{Scheme: "sqlite", Path: path, Raw: "sqlite://" + path}
}

func openFile(t *testing.T, path string) *Catalog {
	t.Helper()
	return openPolling(t, path, 0)
}

// openPolling opens path as openFile does, with the hub's full resync every
// poll (0: the default).
func openPolling(t *testing.T, path string, poll time.Duration) *Catalog {
	t.Helper()
	opts := quiet
	opts.PollInterval = poll
	c, err := Open(tctx(t), fileDSN(path), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func newFile(t *testing.T) (*Catalog, string) {
	path := filepath.Join(t.TempDir(), "sub", "dir", "catalog.db")
	return openFile(t, path), path
}

func sample(id string) switchboard.Instance {
	return switchboard.Instance{
		ID: id, Name: "svc", Type: switchboard.TypeWriter, Address: "127.0.0.1:4317",
		Capabilities: []string{switchboard.CapStorage, "custom.cap"}, Version: "1",
		Metadata: map[string]string{"zone": "a"},
	}
}

// rawDB opens the file at path as another program would: plain
// database/sql with the driver, no catalog, the pragmas given as the DSN's
// query (e.g. "_pragma=busy_timeout(5000)"). It is closed when the test
// ends.
func rawDB(t testing.TB, path, pragmas string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?"+pragmas)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// catalogDB opens a database/sql handle of its own on c's file, with c's
// DSN and pragmas, for statements the catalog does not make. It is closed
// when the test ends.
func catalogDB(t testing.TB, c *Catalog) *sql.DB {
	t.Helper()
	d, done := c.use()
	db, err := sql.Open("sqlite", d.dsn)
	done()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// registerInterleaved registers procs × each instances on c as a fleet
// of procs processes starting at once does: round after round, one
// instance of every process, inst(p, i) being the i-th of process p. It
// returns each process's ids in the order registered. Each call has a
// minute, as with tctx.
func registerInterleaved(t testing.TB, c *Catalog, procs, each int, inst func(p, i int) switchboard.Instance) [][]string {
	t.Helper()
	ids := make([][]string, procs)
	for i := range each {
		for p := range procs {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			out, err := c.Register(ctx, inst(p, i))
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			ids[p] = append(ids[p], out.ID)
		}
	}
	return ids
}

// walCheckpoint runs PRAGMA wal_checkpoint(mode) on db until it is not
// busy (a writer's automatic checkpoint may hold the WAL meanwhile) and,
// for TRUNCATE, has emptied the WAL; it returns the WAL's length in
// frames. It gives up after 5 s.
func walCheckpoint(t testing.TB, db *sql.DB, mode string) int {
	t.Helper()
	for range 500 {
		var busy, log, moved int
		if err := db.QueryRow(`PRAGMA wal_checkpoint(`+mode+`)`).Scan(&busy, &log, &moved); err != nil {
			t.Fatal(err)
		}
		if busy == 0 && log >= 0 && (mode != "TRUNCATE" || log == 0) {
			return log
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("wal_checkpoint(%s): busy for 5 s", mode)
	return 0
}

func mustRegister(t *testing.T, c *Catalog, in switchboard.Instance) switchboard.Instance {
	t.Helper()
	out, err := c.Register(tctx(t), in)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// changeLog returns the change log as "op:id:reason" strings.
func changeLog(t *testing.T, c *Catalog) []string {
	t.Helper()
	rows, err := c.d.rdb.QueryContext(tctx(t), `SELECT op, id, reason FROM changes ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var op, id, reason string
		if err := rows.Scan(&op, &id, &reason); err != nil {
			t.Fatal(err)
		}
		out = append(out, op+":"+id+":"+reason)
	}
	return out
}

// waitClock waits until the catalog clock passes t.
func waitClock(t *testing.T, c *Catalog, until time.Time) {
	t.Helper()
	for {
		now, err := c.Now(tctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if now.After(until) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestPragmasOnEveryConnection(t *testing.T) {
	c, _ := newFile(t)
	ctx := tctx(t)
	check := func(name string, db *sql.DB, n int, memory bool) {
		// Hold n connections at once, so the pool must open n distinct ones.
		conns := make([]*sql.Conn, n)
		for i := range conns {
			conn, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conns[i] = conn
		}
		for i, conn := range conns {
			var busy, sync, fk int
			var mode string
			for _, p := range []struct {
				pragma string
				dst    any
			}{{"busy_timeout", &busy}, {"synchronous", &sync}, {"foreign_keys", &fk}, {"journal_mode", &mode}} {
				if err := conn.QueryRowContext(ctx, "PRAGMA "+p.pragma).Scan(p.dst); err != nil {
					t.Fatal(err)
				}
			}
			wantMode, wantSync := "wal", 1
			if memory {
				wantMode, wantSync = "memory", sync
			}
			if busy != busyTimeout || fk != 1 || sync != wantSync || mode != wantMode {
				t.Errorf("%s conn %d: busy_timeout=%d synchronous=%d foreign_keys=%d journal_mode=%s", name, i, busy, sync, fk, mode)
			}
		}
	}
	check("read pool", c.d.rdb, maxReadConns, false)
	check("write pool", c.d.wdb, 1, false)

	m, err := Open(ctx, switchboard.DSN{Scheme: "sqlite", Memory: true}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	check("memory", m.d.rdb, 1, true)
}

func TestMemoryIsOneDatabase(t *testing.T) {
	ctx := tctx(t)
	a, err := Open(ctx, switchboard.DSN{Scheme: "sqlite", Memory: true}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(ctx, switchboard.DSN{Scheme: "sqlite", Memory: true}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	mustRegister(t, a, sample("x"))
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := a.Get(ctx, "x"); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if _, err := b.Get(ctx, "x"); !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("two :memory: catalogs share rows: %v", err)
	}
}

func TestMigrationsConcurrentAndIdempotent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "new", "catalog.db")
	ctx := tctx(t)
	const n = 6
	cats := make([]*Catalog, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cats[i], errs[i] = Open(ctx, fileDSN(path), quiet)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		defer cats[i].Close()
	}
	c := openFile(t, path) // once more, on an up-to-date schema
	var rows, top int
	if err := c.d.rdb.QueryRowContext(ctx, `SELECT count(*), max(version) FROM schema_migrations`).Scan(&rows, &top); err != nil {
		t.Fatal(err)
	}
	if rows != len(migrations) || top != len(migrations) {
		t.Fatalf("schema_migrations: %d rows, top %d; want %d", rows, top, len(migrations))
	}
	// The catalogs of every goroutine work on the one schema.
	for i, cat := range cats {
		mustRegister(t, cat, sample(fmt.Sprint("m", i)))
	}
	if all, err := c.List(ctx, switchboard.Query{All: true}); err != nil || len(all) != n {
		t.Fatalf("list: %d, %v", len(all), err)
	}

	// A database from a newer program that older ones may not use (its
	// compat version above this program's) is refused, not modified.
	if _, err := c.d.wdb.ExecContext(ctx, `INSERT INTO schema_migrations VALUES (?, 0)`, len(migrations)+1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.d.wdb.ExecContext(ctx, `UPDATE meta SET value = ? WHERE key = 'compat_version'`, len(migrations)+1); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, fileDSN(path), quiet); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("open of a newer schema: %v", err)
	}
}

func TestRegisterUpsertLogsOnlyRealChanges(t *testing.T) {
	c, _ := newFile(t)
	ctx := tctx(t)
	in := sample("")
	in.TTL = time.Hour
	a := mustRegister(t, c, in)
	if a.ID == "" || !a.RegisteredAt.Equal(a.LastSeen) || a.Stale {
		t.Fatalf("first register: %+v", a)
	}
	waitClock(t, c, a.LastSeen)
	same := in
	same.ID = a.ID
	b := mustRegister(t, c, same)
	if !b.RegisteredAt.Equal(a.RegisteredAt) || !b.LastSeen.After(a.LastSeen) {
		t.Fatalf("re-register: registered_at %v→%v, last_seen %v→%v", a.RegisteredAt, b.RegisteredAt, a.LastSeen, b.LastSeen)
	}
	if got := changeLog(t, c); len(got) != 1 {
		t.Fatalf("identical re-register logged a change: %v", got)
	}
	if _, err := c.Heartbeat(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if got := changeLog(t, c); len(got) != 1 {
		t.Fatalf("heartbeat logged a change: %v", got)
	}
	changed := same
	changed.Metadata = map[string]string{"zone": "b"}
	d := mustRegister(t, c, changed)
	if !d.RegisteredAt.Equal(a.RegisteredAt) || d.Metadata["zone"] != "b" {
		t.Fatalf("update: %+v", d)
	}
	want := []string{"upsert:" + a.ID + ":", "upsert:" + a.ID + ":"}
	if got := changeLog(t, c); !slices.Equal(got, want) {
		t.Fatalf("change log %v, want %v", got, want)
	}
	// Capabilities follow the row in the join table.
	changed.Capabilities = []string{"other"}
	mustRegister(t, c, changed)
	if hits, err := c.List(ctx, switchboard.Query{Capability: switchboard.CapStorage}); err != nil || len(hits) != 0 {
		t.Fatalf("old capability still found: %v %v", hits, err)
	}
	if hits, err := c.List(ctx, switchboard.Query{Capability: "other"}); err != nil || len(hits) != 1 {
		t.Fatalf("new capability not found: %v %v", hits, err)
	}
}

func TestStaleRevivalIsLogged(t *testing.T) {
	c, _ := newFile(t)
	ctx := tctx(t)
	in := sample("r")
	// Long enough that a heartbeat right after another lands well before
	// 0.8 × TTL (which would count as a late renewal) on a loaded machine.
	in.TTL = 500 * time.Millisecond
	a := mustRegister(t, c, in)
	waitClock(t, c, a.LastSeen.Add(in.TTL))
	if got, err := c.Get(ctx, "r"); err != nil || !got.Stale {
		t.Fatalf("not stale: %+v %v", got, err)
	}
	if active, _ := c.List(ctx, switchboard.Query{}); len(active) != 0 {
		t.Fatalf("stale row listed as active: %+v", active)
	}
	if _, err := c.Heartbeat(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	if got := changeLog(t, c); len(got) != 2 {
		t.Fatalf("revival by heartbeat not logged: %v", got)
	}
	if _, err := c.Heartbeat(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	if got := changeLog(t, c); len(got) != 2 {
		t.Fatalf("renewal of an active row logged: %v", got)
	}
	// Revival by an identical re-registration: one entry.
	b := mustRegister(t, c, in)
	waitClock(t, c, b.LastSeen.Add(in.TTL))
	mustRegister(t, c, in)
	if got := changeLog(t, c); len(got) != 3 {
		t.Fatalf("revival by re-registration: %v", got)
	}
	// Revival with new content: still one entry.
	waitClock(t, c, b.LastSeen.Add(3*in.TTL))
	in.Version = "2"
	if got := mustRegister(t, c, in); got.Version != "2" || got.Stale {
		t.Fatalf("revived: %+v", got)
	}
	if got := changeLog(t, c); len(got) != 4 {
		t.Fatalf("revival with a change: %v", got)
	}
}

func TestHeartbeat(t *testing.T) {
	c, _ := newFile(t)
	ctx := tctx(t)
	if missing, err := c.Heartbeat(ctx); err != nil || missing != nil {
		t.Fatalf("empty heartbeat: %v %v", missing, err)
	}
	mustRegister(t, c, sample("a"))
	mustRegister(t, c, sample("b"))
	missing, err := c.Heartbeat(ctx, "zz", "a", "gone", "b", "a", "zz")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(missing, []string{"zz", "gone"}) {
		t.Fatalf("missing %v", missing)
	}
}

func TestDeregisterAndReapReasons(t *testing.T) {
	c, _ := newFile(t)
	ctx := tctx(t)
	mustRegister(t, c, sample("d"))
	if err := c.Deregister(ctx, "d"); err != nil {
		t.Fatal(err)
	}
	err := c.Deregister(ctx, "d")
	if !errors.Is(err, switchboard.ErrNotFound) || !strings.Contains(err.Error(), "d") {
		t.Fatalf("second deregister: %v", err)
	}

	short := sample("short")
	short.TTL = 10 * time.Millisecond
	s := mustRegister(t, c, short)
	long := sample("long")
	long.TTL = time.Hour
	mustRegister(t, c, long)
	// Past 2×TTL of "short" only.
	waitClock(t, c, s.LastSeen.Add(2*short.TTL))
	if n, err := c.Reap(ctx, 0); err != nil || n != 1 {
		t.Fatalf("reap(0): %d %v", n, err)
	}
	if n, err := c.Reap(ctx, 0); err != nil || n != 0 {
		t.Fatalf("reap again: %d %v", n, err)
	}
	if n, err := c.Reap(ctx, time.Microsecond); err != nil || n != 1 {
		t.Fatalf("reap(1µs): %d %v", n, err)
	}
	want := []string{"upsert:d:", "delete:d:deregistered", "upsert:short:", "upsert:long:", "delete:short:expired", "delete:long:expired"}
	if got := changeLog(t, c); !slices.Equal(got, want) {
		t.Fatalf("change log %v, want %v", got, want)
	}
	var caps int
	if err := c.d.rdb.QueryRowContext(ctx, `SELECT count(*) FROM instance_capabilities`).Scan(&caps); err != nil || caps != 0 {
		t.Fatalf("capabilities of deleted rows left: %d %v", caps, err)
	}
}

func TestBadInputWritesNothing(t *testing.T) {
	c, _ := newFile(t)
	ctx := tctx(t)
	good := mustRegister(t, c, sample("good"))
	bad := good
	bad.Address = "nope"
	if _, err := c.Register(ctx, bad); !errors.Is(err, switchboard.ErrInvalid) || strings.HasPrefix(err.Error(), "sqlite:") {
		t.Fatalf("want the Normalize error unchanged, got %v", err)
	}
	bad = sample("")
	bad.Name = "!!"
	if _, err := c.Register(ctx, bad); !errors.Is(err, switchboard.ErrInvalidName) {
		t.Fatalf("bad name: %v", err)
	}
	if got := changeLog(t, c); len(got) != 1 {
		t.Fatalf("invalid input wrote to the change log: %v", got)
	}
	if got, err := c.Get(ctx, "good"); err != nil || got.Address != good.Address {
		t.Fatalf("row changed: %+v %v", got, err)
	}
}

func TestChangeLogTrimAndCursor(t *testing.T) {
	c, _ := newFile(t)
	ctx := tctx(t)
	src := source{c}
	b, err := src.ChangesSince(ctx, hub.Cursor{Seq: 0})
	if err != nil || len(b.Changes) != 0 || b.Seq != 0 {
		t.Fatalf("empty log: %+v %v", b, err)
	}
	c.keepChanges, c.keepChangesAge, c.trimEvery = 5, 0, 0
	for i := range 20 {
		in := sample("t")
		in.Version = fmt.Sprint(i)
		mustRegister(t, c, in)
	}
	if err := c.Deregister(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	snap, err := src.Snapshot(ctx)
	if err != nil || snap.Seq != 21 || len(snap.Instances) != 0 {
		t.Fatalf("snapshot: seq %d, %d rows, %v", snap.Seq, len(snap.Instances), err)
	}
	if _, err := src.ChangesSince(ctx, hub.Cursor{Seq: 0}); !errors.Is(err, hub.ErrCursorGone) {
		t.Fatalf("trimmed position: %v", err)
	}
	if _, err := src.ChangesSince(ctx, hub.Cursor{Seq: 22}); !errors.Is(err, hub.ErrCursorGone) {
		t.Fatalf("position ahead of the log: %v", err)
	}
	b, err = src.ChangesSince(ctx, hub.Cursor{Seq: 16})
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Changes) != 5 || b.Seq != 21 {
		t.Fatalf("batch: %d changes, seq %d", len(b.Changes), b.Seq)
	}
	last := b.Changes[4]
	if !last.Deleted || last.Reason != switchboard.ReasonDeregistered || last.ID != "t" || last.Found {
		t.Fatalf("last change: %+v", last)
	}
	if first := b.Changes[0]; first.Deleted || first.Found || first.Seq != 17 {
		t.Fatalf("upsert of a deleted row: %+v", first)
	}
	if b, err = src.ChangesSince(ctx, hub.Cursor{Seq: 21}); err != nil || len(b.Changes) != 0 || b.Seq != 21 {
		t.Fatalf("at head: %+v %v", b, err)
	}

	// Young entries are kept even beyond keepChanges.
	c.keepChangesAge = time.Hour
	for i := range 10 {
		in := sample("y")
		in.Version = fmt.Sprint(i)
		mustRegister(t, c, in)
	}
	b, err = src.ChangesSince(ctx, hub.Cursor{Seq: 21})
	if err != nil || len(b.Changes) != 10 || !b.Changes[9].Found || b.Changes[9].Instance.Version != "9" {
		t.Fatalf("young entries: %+v %v", b, err)
	}
}

func TestRenewedSince(t *testing.T) {
	c, _ := newFile(t)
	ctx := tctx(t)
	a := mustRegister(t, c, sample("a"))
	waitClock(t, c, a.LastSeen)
	mustRegister(t, c, sample("b"))
	got, now, err := source{c}.RenewedSince(ctx, a.LastSeen)
	if err != nil || len(got) != 1 || got[0].ID != "b" || now.Before(got[0].LastSeen) {
		t.Fatalf("renewed: %+v at %v, %v", got, now, err)
	}
}

func TestRetryOnBusy(t *testing.T) {
	c, path := newFile(t)
	ctx := tctx(t)
	// A real SQLITE_BUSY: a second connection that does not wait.
	other := rawDB(t, path, "_pragma=busy_timeout(0)")
	tx, err := c.d.wdb.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, busy := other.ExecContext(ctx, `BEGIN IMMEDIATE`)
	tx.Rollback()
	if !retryable(busy) {
		t.Fatalf("not classified as retryable: %v", busy)
	}
	if retryable(errors.New("other")) || retryable(switchboard.ErrNotFound) {
		t.Fatal("non-SQLite error classified as retryable")
	}
	calls := 0
	err = c.retry(ctx, func() error {
		if calls++; calls < 4 {
			return fmt.Errorf("wrapped: %w", busy)
		}
		return nil
	})
	if err != nil || calls != 4 {
		t.Fatalf("retry: %v after %d calls", err, calls)
	}
	calls = 0
	err = c.retry(ctx, func() error { calls++; return switchboard.ErrNotFound })
	if !errors.Is(err, switchboard.ErrNotFound) || calls != 1 {
		t.Fatalf("non-retryable error retried: %v, %d calls", err, calls)
	}
}

func TestTwoHandlesHammering(t *testing.T) {
	a, path := newFile(t)
	b := openFile(t, path)
	ctx := tctx(t)
	const goroutines, each = 16, 30
	var wg sync.WaitGroup
	var failures atomic.Int64
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := []*Catalog{a, b}[g%2]
			for i := range each {
				id := fmt.Sprintf("h%d-%d", g, i)
				fail := func(err error) {
					failures.Add(1)
					t.Error(err)
				}
				if _, err := c.Register(ctx, sample(id)); err != nil {
					fail(err)
					continue
				}
				if _, err := c.Heartbeat(ctx, id, fmt.Sprintf("h%d-%d", g, i/2)); err != nil {
					fail(err)
				}
				if i%3 == 0 {
					if err := c.Deregister(ctx, id); err != nil {
						fail(err)
					}
				}
				if i%10 == 0 {
					if _, err := c.Reap(ctx, 0); err != nil {
						fail(err)
					}
				}
			}
		}()
	}
	wg.Wait()
	if failures.Load() != 0 {
		t.Fatalf("%d failed writes", failures.Load())
	}
	all, err := a.List(ctx, switchboard.Query{All: true})
	if err != nil || len(all) != goroutines*(each-each/3) {
		t.Fatalf("rows: %d, %v", len(all), err)
	}
}

func TestWatchSeesOtherHandle(t *testing.T) {
	a, path := newFile(t)
	b := openFile(t, path)
	ctx := tctx(t)
	w, err := b.Watch(ctx, switchboard.Query{})
	if err != nil {
		t.Fatal(err)
	}
	if ev := <-w; ev.Kind != switchboard.EventSynced {
		t.Fatalf("first event %+v", ev)
	}
	start := time.Now()
	mustRegister(t, a, sample("x")) // written by a; b's hub learns of it by file change
	select {
	case ev := <-w:
		if ev.Kind != switchboard.EventAdded || ev.Instance.ID != "x" {
			t.Fatalf("event %+v", ev)
		}
		t.Logf("cross-handle event after %v", time.Since(start))
	case <-ctx.Done():
		t.Fatal("no event from the other handle")
	}
}

func TestDetectorNotifiesOnForeignWrite(t *testing.T) {
	a, path := newFile(t)
	b := openFile(t, path)
	kicks := make(chan struct{}, 1000)
	d := b.detect(func() { kicks <- struct{}{} })
	defer d.stop()
	for range 3 {
		mustRegister(t, a, sample("n"))
		select {
		case <-kicks:
		case <-tctx(t).Done():
			t.Fatal("no notification")
		}
	}
}

// The detector watches the sidecar itself; when the sidecar is removed it
// watches the directory until a handle creates it again, then the new
// sidecar, and notifies of every step (the data_version poll would too,
// within 100 ms; here the watch's own state is checked).
func TestDetectorFollowsAReplacedSidecar(t *testing.T) {
	a, path := newFile(t)
	kicks := make(chan struct{}, 1000)
	d := a.detect(func() { kicks <- struct{}{} })
	defer d.stop()
	if !d.onFile.Load() {
		t.Fatal("not watching the sidecar itself")
	}
	if err := os.Remove(path + "-wlock"); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "the watch to fall back to the directory", func() bool { return !d.onFile.Load() })
	b := openFile(t, path) // creates the sidecar again
	testkit.WaitUntil(t, "the watch to follow the new sidecar", func() bool { return d.onFile.Load() })
	for len(kicks) > 0 {
		<-kicks
	}
	mustRegister(t, b, sample("after"))
	select {
	case <-kicks:
	case <-tctx(t).Done():
		t.Fatal("no notification from the new sidecar")
	}
}

func TestLeases(t *testing.T) {
	c, _ := newFile(t)
	ctx := tctx(t)
	l1, err := c.Acquire(ctx, "compactor", "pod-a", time.Hour)
	if err != nil || l1.Token != 1 || l1.Holder != "pod-a" {
		t.Fatalf("acquire: %+v %v", l1, err)
	}
	again, err := c.Acquire(ctx, "compactor", "pod-a", time.Hour)
	if err != nil || again.Token != 1 {
		t.Fatalf("re-acquire by the holder: %+v %v", again, err)
	}
	if _, err := c.Acquire(ctx, "compactor", "pod-b", time.Hour); !errors.Is(err, switchboard.ErrLeaseHeld) {
		t.Fatalf("second holder: %v", err)
	}
	if r, err := c.Renew(ctx, l1); err != nil || r.Token != 1 || r.ExpiresAt.Before(l1.ExpiresAt) {
		t.Fatalf("renew: %+v %v", r, err)
	}
	if err := c.Release(ctx, l1); err != nil {
		t.Fatal(err)
	}
	if err := c.Release(ctx, l1); err != nil {
		t.Fatalf("second release: %v", err)
	}
	if _, err := c.Renew(ctx, l1); !errors.Is(err, switchboard.ErrLeaseLost) {
		t.Fatalf("renew after release: %v", err)
	}
	ls, err := c.Leases(ctx)
	if err != nil || len(ls) != 1 || ls[0].Holder != "" || ls[0].Token != 1 {
		t.Fatalf("released lease row: %+v %v", ls, err)
	}
	l2, err := c.Acquire(ctx, "compactor", "pod-b", 30*time.Millisecond)
	if err != nil || l2.Token != 2 {
		t.Fatalf("acquire after release: %+v %v", l2, err)
	}
	waitClock(t, c, l2.ExpiresAt)
	if _, err := c.Renew(ctx, l2); !errors.Is(err, switchboard.ErrLeaseLost) {
		t.Fatalf("renew after expiry: %v", err)
	}
	l3, err := c.Acquire(ctx, "compactor", "pod-c", time.Hour)
	if err != nil || l3.Token != 3 {
		t.Fatalf("acquire after expiry: %+v %v", l3, err)
	}
	if err := c.Release(ctx, l2); !errors.Is(err, switchboard.ErrLeaseLost) {
		t.Fatalf("release of a lost lease: %v", err)
	}
	if _, err := c.Acquire(ctx, "", "x", time.Second); !errors.Is(err, switchboard.ErrInvalid) {
		t.Fatalf("empty name: %v", err)
	}
}

func TestLeaseMutualExclusion(t *testing.T) {
	a, path := newFile(t)
	b := openFile(t, path)
	ctx := tctx(t)
	const contenders, rounds = 8, 10
	var (
		inside atomic.Int32
		mu     sync.Mutex
		tokens []int64
		wg     sync.WaitGroup
	)
	for g := range contenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := []*Catalog{a, b}[g%2]
			holder := fmt.Sprint("pod-", g)
			for won := 0; won < rounds; {
				l, err := c.Acquire(ctx, "leader", holder, time.Hour)
				if errors.Is(err, switchboard.ErrLeaseHeld) {
					time.Sleep(time.Millisecond)
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				if n := inside.Add(1); n != 1 {
					t.Errorf("%d holders at once", n)
				}
				mu.Lock()
				tokens = append(tokens, l.Token)
				mu.Unlock()
				inside.Add(-1)
				if err := c.Release(ctx, l); err != nil {
					t.Error(err)
					return
				}
				won++
			}
		}()
	}
	wg.Wait()
	if len(tokens) != contenders*rounds {
		t.Fatalf("%d acquisitions", len(tokens))
	}
	// Every acquisition got a new token, in order.
	for i, tok := range tokens {
		if tok != int64(i+1) {
			t.Fatalf("tokens %v", tokens)
		}
	}
}

func TestClose(t *testing.T) {
	c, _ := newFile(t)
	ctx := tctx(t)
	if _, err := c.Watch(ctx, switchboard.Query{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	_, err := c.Register(ctx, sample("x"))
	for _, err := range []error{
		err,
		func() error { _, err := c.Heartbeat(ctx, "x"); return err }(),
		c.Deregister(ctx, "x"),
		func() error { _, err := c.List(ctx, switchboard.Query{}); return err }(),
		func() error { _, err := c.Watch(ctx, switchboard.Query{}); return err }(),
		func() error { _, err := c.Now(ctx); return err }(),
		func() error { _, err := c.Acquire(ctx, "l", "h", time.Second); return err }(),
		func() error { _, err := source{c}.Snapshot(ctx); return err }(),
	} {
		if !errors.Is(err, switchboard.ErrClosed) {
			t.Errorf("after close: %v", err)
		}
	}
}

func TestOpenViaRegistry(t *testing.T) {
	path := filepath.Join(t.TempDir(), "reg.db")
	c, err := switchboard.Open(tctx(t), "sqlite://"+path, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, ok := c.(switchboard.Leaser); !ok {
		t.Fatal("sqlite catalog is not a Leaser")
	}
	if _, err := Open(tctx(t), switchboard.DSN{Scheme: "postgres"}, quiet); err == nil {
		t.Fatal("opened a postgres DSN")
	}
}

// Writes keep the WAL small: SQLite's automatic checkpoint copies it back
// as it passes 1,000 pages, the next writer starts it over, and the file
// stays the size of one stretch between checkpoints instead of growing
// with every round of writes (each round writes about 3,000).
func TestWALStaysSmall(t *testing.T) {
	c, path := newFile(t)
	var first int64
	for round := range 2 {
		for i := range 300 {
			in := switchboard.Instance{ID: fmt.Sprintf("ck-%d-%d", round, i), Name: "ck", Type: "svc",
				Address: fmt.Sprintf("10.0.%d.%d:80", i/250, i%250), Capabilities: []string{"a", fmt.Sprintf("c%d", i%50)}}
			mustRegister(t, c, in)
		}
		st, err := os.Stat(path + "-wal")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: WAL %d bytes", round, st.Size())
		if round == 0 {
			first = st.Size()
			continue
		}
		if st.Size() > first*3/2 {
			t.Fatalf("round %d: WAL %d bytes, %d after the first round: not started over", round, st.Size(), first)
		}
	}
}
