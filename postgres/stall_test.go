package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/hub"
	"github.com/switchboard-io/switchboard/internal/testkit"
	"github.com/switchboard-io/switchboard/postgres/pgtest"
)

// watchedPair opens, on a new schema, a watcher handle (which only the
// change log can reach: it never polls) and a writer handle, as two
// processes, and a watch of everything synced on the empty catalog.
func watchedPair(t *testing.T) (dsn string, watcher, writer *Catalog, set *testkit.WatchSet) {
	t.Helper()
	dsn = pgtest.Schema(t, testDSN)
	watcher = openDSN(t, dsn, switchboard.Options{PollInterval: time.Hour})
	writer = openDSN(t, dsn, switchboard.Options{})
	w, err := watcher.Watch(ctxT(t), switchboard.Query{})
	if err != nil {
		t.Fatal(err)
	}
	set = testkit.NewWatchSet(w)
	set.WaitForSet(t, "the empty catalog", func() string { return "" })
	return dsn, watcher, writer, set
}

// TestStalledWriterFreezesNoWatcher: a transaction that drew its seq and
// stays open (a paused or cut-off writer) holds back only its own change.
// Registrations other handles (as other processes) make meanwhile reach a
// watcher in a third handle while that transaction is still open, and the
// watcher's WatchStats names the change it waits for; once the writer
// commits, its change arrives too.
func TestStalledWriterFreezesNoWatcher(t *testing.T) {
	dsn, watcher, writer, set := watchedPair(t)

	held, commit := openWriter(t, dsn, "held")
	for _, id := range []string{"a", "b", "c"} {
		reg(t, writer, id, "h:1")
	}
	set.WaitForSet(t, "registrations made while a writer holds an earlier seq", func() string { return "a b c" })
	// Still open: the watcher got there without it, and says what it
	// waits for (once its log read has seen the gap: notifications may
	// have brought the others first).
	testkit.WaitUntil(t, "WatchStats to name the held seq", func() bool {
		st := watcher.WatchStats()
		return st.WaitingFor == held && st.Healthy
	})
	commit(true)
	set.WaitForSet(t, "the held writer's change once it commits", func() string { return "a b c held" })
	testkit.WaitUntil(t, "the watch to wait for nothing", func() bool { return watcher.WatchStats().WaitingFor == 0 })
}

// TestRawWriterBeforeTransactionID: a client of its own (a repair script,
// another tool) that draws a number from the log's sequence before its
// transaction has an id, and inserts its entry with it later, is not
// skipped: the log's trigger gives the entry a seq drawn after the id, so
// readers wait for it like any writer's.
func TestRawWriterBeforeTransactionID(t *testing.T) {
	dsn, _, writer, set := watchedPair(t)

	ctx := ctxT(t)
	raw, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close(context.Background()) })
	// The number is drawn before the writing transaction exists, so before
	// it has an id (a transaction that draws it itself may or may not get
	// one: the sequence's WAL decides).
	var drawn int64
	if err := raw.QueryRow(ctx, `SELECT nextval('changes_seq_seq')`).Scan(&drawn); err != nil {
		t.Fatal(err)
	}
	tx, err := raw.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Others write past the drawn number, and the watcher reads past it.
	reg(t, writer, "after", "h:1")
	set.WaitForSet(t, "a registration after the drawn number", func() string { return "after" })

	if _, err := tx.Exec(ctx, `INSERT INTO instances (id, name, type, address, ttl)
		VALUES ('raw', 'svc', 'writer', 'h:2', interval '1 hour')`); err != nil {
		t.Fatal(err)
	}
	var seq int64
	if err := tx.QueryRow(ctx, `INSERT INTO changes (seq, id, op) VALUES ($1, 'raw', 'upsert') RETURNING seq`, drawn).Scan(&seq); err != nil {
		t.Fatal(err)
	}
	if seq <= drawn {
		t.Fatalf("the entry kept seq %d, drawn before the transaction had an id; want a new one", seq)
	}
	if _, err := tx.Exec(ctx, `SELECT pg_notify($1, '')`, Channel); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	set.WaitForSet(t, "the raw writer's entry", func() string { return "after raw" })
	if in, _ := set.Get("raw"); in.Revision != seq {
		t.Fatalf("the raw row arrived at revision %d, want its entry's seq %d", in.Revision, seq)
	}
}

// TestRestoreUnderSameEpoch: a log replaced under a watcher by another
// history that keeps the epoch and runs past the watcher's cursor (a
// restore that loads rows and entries with the triggers off, as a
// data-only pg_restore does) is noticed by the entry the watcher read
// last, and the watcher ends with exactly the catalog's rows.
func TestRestoreUnderSameEpoch(t *testing.T) {
	dsn, _, writer, set := watchedPair(t)
	for _, id := range []string{"x1", "x2", "x3"} {
		reg(t, writer, id, "h:1")
	}
	set.WaitForSet(t, "the first history", func() string { return "x1 x2 x3" })

	ctx := ctxT(t)
	raw, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close(context.Background()) })
	err = pgx.BeginFunc(ctx, raw, func(tx pgx.Tx) error {
		stmts := []string{
			`SET LOCAL session_replication_role = replica`,
			`DELETE FROM instances`, `DELETE FROM changes`,
		}
		for i := 1; i <= 5; i++ {
			id := fmt.Sprintf("'y%d'", i)
			stmts = append(stmts,
				`INSERT INTO instances (id, name, type, address, ttl, revision) VALUES (`+id+`, 'svc', 'writer', 'h:2', interval '1 hour', `+fmt.Sprint(i)+`)`,
				`INSERT INTO changes (seq, id, op, at) VALUES (`+fmt.Sprint(i)+`, `+id+`, 'upsert', clock_timestamp())`)
		}
		stmts = append(stmts, `SELECT setval('changes_seq_seq', 5)`, `SELECT pg_notify('`+Channel+`', '')`)
		for _, s := range stmts {
			if _, err := tx.Exec(ctx, s); err != nil {
				return fmt.Errorf("%s: %w", s, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	set.WaitForSet(t, "exactly the restored catalog's rows", func() string {
		ins, err := writer.List(ctx, switchboard.Query{})
		if err != nil {
			t.Fatal(err)
		}
		return testkit.JoinIDs(ins)
	})
}

// TestNewWatcherBesideStalledWriter: a process that starts watching while
// a writer holds its transaction open after drawing its seq gets its first
// snapshot at once (it does not wait for the writer), with every committed
// row, names the held seq as awaited, and gets the held change once it
// commits.
func TestNewWatcherBesideStalledWriter(t *testing.T) {
	dsn := pgtest.Schema(t, testDSN)
	writer := openDSN(t, dsn, switchboard.Options{})
	reg(t, writer, "before", "h:1")
	held, commit := openWriter(t, dsn, "held")
	reg(t, writer, "after", "h:1")

	watcher := openDSN(t, dsn, switchboard.Options{PollInterval: time.Hour})
	w, err := watcher.Watch(ctxT(t), switchboard.Query{})
	if err != nil {
		t.Fatalf("a first watch beside a stalled writer: %v", err)
	}
	set := testkit.NewWatchSet(w)
	set.WaitForSet(t, "the committed rows", func() string { return "after before" })
	testkit.WaitUntil(t, "WatchStats to name the held seq", func() bool { return watcher.WatchStats().WaitingFor == held })
	commit(true)
	set.WaitForSet(t, "the held writer's change once it commits", func() string { return "after before held" })
}

// TestLockHolderWithoutIDIsInFlight: a transaction that holds the change
// log's lock without a transaction id (it has written nothing yet) counts
// as in flight when the writers are observed: no seq is settled while it
// holds the lock, and the observation settles again once it has ended.
func TestLockHolderWithoutIDIsInFlight(t *testing.T) {
	c, _, dsn := newCatalog(t)
	ctx := ctxT(t)
	reg(t, c, "a", "h:1")
	raw, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close(context.Background()) })
	tx, err := raw.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE changes IN ROW EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	settled := func() bool {
		t.Helper()
		w, err := c.observeWriters(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var s string
		if err := c.pool.QueryRow(ctx, `SELECT `+snapshotSQL).Scan(&s); err != nil {
			t.Fatal(err)
		}
		ms, err := parseSnapshot(s)
		if err != nil {
			t.Fatal(err)
		}
		return w.settledIn(ms)
	}
	if settled() {
		t.Fatal("settled while a transaction holds the log's lock without an id")
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if !settled() {
		t.Fatal("not settled once the holder has ended")
	}
}

// TestSequenceMovedFarAhead: a log sequence moved far ahead (setval by an
// operator or a restore script) leaves a gap of millions of numbers that
// will never be used; a watcher still delivers the next change at once,
// and what it carries as missing stays bounded.
func TestSequenceMovedFarAhead(t *testing.T) {
	dsn, watcher, writer, set := watchedPair(t)
	ctx := ctxT(t)
	raw, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close(context.Background()) })
	if _, err := raw.Exec(ctx, `SELECT setval('changes_seq_seq', 50000000)`); err != nil {
		t.Fatal(err)
	}
	reg(t, writer, "after", "h:1")
	set.WaitForSet(t, "the change after the jump", func() string { return "after" })
	testkit.WaitUntil(t, "the watch to wait for nothing", func() bool { return watcher.WatchStats().WaitingFor == 0 })
}

// TestMissingAfterBounded: a read whose range spans a jump of the sequence
// names at most the last missingWindow numbers missing, not millions.
func TestMissingAfterBounded(t *testing.T) {
	got := missingAfter([]int64{3}, 10, 50_000_000, []hub.Change{{Seq: 50_000_000}}, 0)
	if len(got) > missingWindow+1 || got[0] != 3 || got[len(got)-1] != 49_999_999 {
		t.Fatalf("%d missing from %d to %d; want at most %d, ending below the last read", len(got), got[0], got[len(got)-1], missingWindow+1)
	}
}
