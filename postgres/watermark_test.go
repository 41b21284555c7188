package postgres

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/hub"
	"github.com/switchboard-io/switchboard/postgres/pgtest"
)

// openWriter begins, on its own connection, a transaction that writes like
// Register does (row first, then the log entry) and stays open: it holds
// the seq it drew until end is called with commit or not.
func openWriter(t testing.TB, dsn, id string) (seq int64, end func(commit bool)) {
	t.Helper()
	ctx := ctxT(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO instances (id, name, type, address, ttl)
		VALUES ($1, 'svc', 'writer', 'h:1', interval '1 hour')`, id); err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRow(ctx, `INSERT INTO changes (id, op) VALUES ($1, 'upsert') RETURNING seq`, id).Scan(&seq); err != nil {
		t.Fatal(err)
	}
	return seq, func(commit bool) {
		t.Helper()
		var err error
		if commit {
			if _, err = tx.Exec(ctx, `SELECT pg_notify($1, '')`, Channel); err == nil {
				err = tx.Commit(ctx)
			}
		} else {
			err = tx.Rollback(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func seqs(b hub.Batch) []int64 {
	var out []int64
	for _, c := range b.Changes {
		out = append(out, c.Seq)
	}
	return out
}

// TestLogReadInVisibilityOrder pins the watermark at the source: a
// transaction holding a low seq open does not hold back the higher seqs
// that commit meanwhile (they are read; the cursor stays below the held
// seq and names it missing, so it is read once it commits), a snapshot
// taken meanwhile is consistent with its position, and a rolled-back
// writer's seq is a gap readers pass.
func TestLogReadInVisibilityOrder(t *testing.T) {
	c, _, dsn := newCatalog(t)
	ctx := ctxT(t)
	src := source{c}
	reg(t, c, "a", "h:1")
	base, err := src.ChangesSince(ctx, hub.Cursor{Seq: 0})
	if err != nil || len(base.Changes) != 1 {
		t.Fatalf("first entry: %+v %v", base, err)
	}

	held, commit := openWriter(t, dsn, "held")
	reg(t, c, "b", "h:2") // commits a higher seq first
	got, err := src.ChangesSince(ctx, hub.Cursor{Seq: base.Seq})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(seqs(got), []int64{held + 1}) || got.Seq != base.Seq || got.Read != held+1 ||
		!slices.Equal(got.Missing, []int64{held}) {
		t.Fatalf("with seq %d in flight, read seqs %v, cursor %d/%d missing %v; want the later entry %d read, "+
			"the cursor at %d with %d missing", held, seqs(got), got.Seq, got.Read, got.Missing, held+1, base.Seq, held)
	}
	cur := hub.Cursor{Seq: got.Seq, Read: got.Read, Missing: got.Missing}
	// A snapshot meanwhile waits for the writer (or its context): it never
	// returns a position past a seq that may still commit.
	type result struct {
		snap hub.Snapshot
		err  error
	}
	snapped := make(chan result, 1)
	go func() {
		s, err := src.Snapshot(ctx)
		snapped <- result{s, err}
	}()
	commit(true)
	r := <-snapped
	if r.err != nil {
		t.Fatal(r.err)
	}
	ids := make([]string, 0, len(r.snap.Instances))
	for _, in := range r.snap.Instances {
		ids = append(ids, in.ID)
	}
	slices.Sort(ids)
	if r.snap.Seq < held && slices.Contains(ids, "held") || r.snap.Seq >= held && !slices.Contains(ids, "held") {
		t.Fatalf("snapshot at seq %d holds %v: inconsistent with the entry at %d", r.snap.Seq, ids, held)
	}
	got, err = src.ChangesSince(ctx, cur)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{held}; !slices.Equal(seqs(got), want) || got.Seq != held+1 || len(got.Missing) != 0 {
		t.Fatalf("after the commit: seqs %v up to %d (missing %v), want %v up to %d", seqs(got), got.Seq, got.Missing, want, held+1)
	}

	gap, rollback := openWriter(t, dsn, "rolled-back")
	rollback(false)
	reg(t, c, "c", "h:3")
	after, err := src.ChangesSince(ctx, hub.Cursor{Seq: got.Seq})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{gap + 1}; !slices.Equal(seqs(after), want) || after.Seq != gap+1 {
		t.Fatalf("past the rolled-back seq %d: seqs %v up to %d, want %v", gap, seqs(after), after.Seq, want)
	}
	snap, err := src.Snapshot(ctx)
	if err != nil || snap.Seq != gap+1 {
		t.Fatalf("snapshot after the gap: seq %d, %v; want %d", snap.Seq, err, gap+1)
	}
}

// TestWatchExactlyOnceUnderConcurrentWriters: several handles (pools, as
// processes) write concurrently while a transaction holds a low seq open
// and another rolls back; watchers in another handle, one started before
// and one during the writes, must each see a valid history (added only
// when absent, updated and removed only when present: a duplicate or a
// missed change breaks it) that ends exactly at the catalog's rows, and
// the held instance exactly once.
func TestWatchExactlyOnceUnderConcurrentWriters(t *testing.T) {
	dsn := pgtest.Schema(t, testDSN)
	watcher := openDSN(t, dsn, switchboard.Options{PollInterval: time.Hour})
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	first, err := watcher.Watch(ctx, switchboard.Query{})
	if err != nil {
		t.Fatal(err)
	}
	h1 := newHistory(first)

	const handles, rounds = 4, 80
	writers := make([]*Catalog, handles)
	for i := range writers {
		writers[i] = openDSN(t, dsn, switchboard.Options{})
	}
	held, commit := openWriter(t, dsn, "held")
	quarter := make(chan struct{}) // writer 0 is a quarter through
	var wg sync.WaitGroup
	errs := make(chan error, handles)
	for w, c := range writers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for i := range rounds {
				if w == 0 && i == rounds/4 {
					close(quarter)
				}
				id := fmt.Sprintf("w%d-%d", w, rng.IntN(8))
				in := inst("svc", fmt.Sprintf("h:%d", i+1))
				in.ID, in.TTL = id, time.Hour
				var err error
				if rng.IntN(3) == 0 {
					if err = c.Deregister(ctx, id); errors.Is(err, switchboard.ErrNotFound) {
						err = nil
					}
				} else {
					_, err = c.Register(ctx, in)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	// While they write, a writer rolls back (its seq is a gap for ever),
	// and the held one commits a quarter of the way through, behind
	// higher seqs.
	gap, rollback := openWriter(t, dsn, "rolled-back")
	rollback(false)
	<-quarter
	var top int64
	if err := writers[0].pool.QueryRow(ctx, `SELECT max(seq) FROM changes`).Scan(&top); err != nil {
		t.Fatal(err)
	}
	commit(true)
	t.Logf("rolled back seq %d; held seq %d committed after seqs up to %d", gap, held, top)
	// A second watcher starts while the writers go on: its snapshot may
	// reflect entries after its position.
	other := openDSN(t, dsn, switchboard.Options{PollInterval: time.Hour})
	ch2, err := other.Watch(ctx, switchboard.Query{})
	if err != nil {
		t.Fatal(err)
	}
	h2 := newHistory(ch2)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	reg(t, writers[0], "marker", "h:9")

	rows, err := writers[0].List(ctx, switchboard.Query{All: true})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, in := range rows {
		want[in.ID] = in.Address
	}
	for name, h := range map[string]*history{"first": h1, "second": h2} {
		h.waitFor(t, name, want)
		if n := h.added("held"); n != 1 {
			t.Errorf("%s watcher: held instance added %d times, want 1", name, n)
		}
	}
}

// history replays a watch's events against the state they describe and
// records every inconsistency.
type history struct {
	mu     sync.Mutex
	state  map[string]string // id → address
	adds   map[string]int
	errs   []string
	synced bool
	wake   chan struct{}
}

func newHistory(ch <-chan switchboard.Event) *history {
	h := &history{state: map[string]string{}, adds: map[string]int{}, wake: make(chan struct{}, 1)}
	go func() {
		for ev := range ch {
			h.mu.Lock()
			id := ev.Instance.ID
			_, present := h.state[id]
			switch ev.Kind {
			case switchboard.EventAdded:
				if present {
					h.errs = append(h.errs, "added while present: "+id)
				}
				h.state[id] = ev.Instance.Address
				h.adds[id]++
			case switchboard.EventUpdated:
				if !present {
					h.errs = append(h.errs, "updated while absent: "+id)
				}
				h.state[id] = ev.Instance.Address
			case switchboard.EventRemoved:
				if !present {
					h.errs = append(h.errs, "removed while absent: "+id)
				}
				delete(h.state, id)
			case switchboard.EventSynced:
				h.synced = true
			case switchboard.EventError:
				h.errs = append(h.errs, fmt.Sprintf("error event: %v", ev.Err))
			}
			h.mu.Unlock()
			select {
			case h.wake <- struct{}{}:
			default:
			}
		}
	}()
	return h
}

func (h *history) added(id string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.adds[id]
}

// waitFor waits until the replayed state is want (generous bound: a
// failure, not a speed assertion) and fails on any inconsistency.
func (h *history) waitFor(t *testing.T, name string, want map[string]string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		h.mu.Lock()
		done := h.synced && mapsEqual(h.state, want)
		errs := slices.Clone(h.errs)
		state := fmt.Sprint(h.state)
		h.mu.Unlock()
		if len(errs) > 0 {
			t.Fatalf("%s watcher: %s", name, strings.Join(errs, "; "))
		}
		if done {
			return
		}
		select {
		case <-h.wake:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("%s watcher: state %s, want %v", name, state, want)
		}
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
