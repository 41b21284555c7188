package hub

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

// modelSource is a versioned catalog whose writers draw their numbers
// first and commit later, in any order, or roll back: what PostgreSQL's
// log looks like to a reader. Rows carry their revision; the log is read
// as the PostgreSQL source reads it (visible entries handed on, numbers in
// flight missing).
type modelSource struct {
	mu       sync.Mutex
	rows     map[string]switchboard.Instance
	log      map[int64]Change // committed entries, by seq (Instance unset)
	next     int64            // the last number drawn
	inFlight map[int64]bool   // drawn, not committed or rolled back
	// during, when set, runs inside Snapshot after the rows were captured:
	// what happens while a resync's read is in flight.
	during func()
	// gone makes the next ChangesSince answer ErrCursorGone (a trimmed
	// log): the hub then applies a snapshot in its loop.
	gone bool
}

func newModelSource() *modelSource {
	return &modelSource{rows: map[string]switchboard.Instance{}, log: map[int64]Change{}, inFlight: map[int64]bool{}}
}

// draw starts a write: its number.
func (m *modelSource) draw() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.next++
	m.inFlight[m.next] = true
	return m.next
}

// commit commits write seq: an upsert of in (nil: a deletion of id). It
// returns the change as the writer would publish it.
func (m *modelSource) commit(seq int64, id string, in *switchboard.Instance) Change {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.inFlight, seq)
	ch := Change{Seq: seq, ID: id}
	if in == nil {
		delete(m.rows, id)
		ch.Deleted, ch.Reason = true, switchboard.ReasonDeregistered
	} else {
		r := *in
		r.Revision = seq
		r.LastSeen = time.Now() // alive: expiry plays no part here
		m.rows[id] = r
		ch.Found, ch.Instance = true, r
	}
	e := ch
	e.Instance = switchboard.Instance{}
	m.log[seq] = e
	return ch
}

func (m *modelSource) rollback(seq int64) {
	m.mu.Lock()
	delete(m.inFlight, seq)
	m.mu.Unlock()
}

// cursorNow is the position of what is committed now (m.mu held).
func (m *modelSource) cursorNow() (seq, read int64, missing []int64) {
	for n := m.next; n > 0; n-- {
		if _, ok := m.log[n]; ok {
			read = n
			break
		}
	}
	seq = read
	for n := int64(1); n <= read; n++ {
		if m.inFlight[n] {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		seq = missing[0] - 1
	}
	return seq, read, missing
}

func (m *modelSource) Snapshot(context.Context) (Snapshot, error) {
	m.mu.Lock()
	s := Snapshot{Now: time.Now()}
	s.Seq, s.Read, s.Missing = m.cursorNow()
	for _, in := range m.rows {
		s.Instances = append(s.Instances, in.Clone())
	}
	during := m.during
	m.during = nil
	m.mu.Unlock()
	if during != nil {
		during()
	}
	return s, nil
}

func (m *modelSource) ChangesSince(_ context.Context, cur Cursor) (Batch, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gone {
		m.gone = false
		return Batch{}, ErrCursorGone
	}
	read := max(cur.Read, cur.Seq)
	want := map[int64]bool{}
	for _, n := range cur.Missing {
		want[n] = true
	}
	for n := read + 1; n <= m.next; n++ {
		want[n] = true
	}
	nums := slices.Sorted(maps.Keys(want))
	b := Batch{Now: time.Now()}
	top := read
	for _, n := range nums {
		c, ok := m.log[n]
		if !ok {
			continue
		}
		if !c.Deleted {
			c.Instance, c.Found = m.rows[c.ID]
			c.Instance = c.Instance.Clone()
		}
		b.Changes = append(b.Changes, c)
		top = max(top, n)
	}
	for _, n := range nums {
		if n <= top && m.inFlight[n] {
			b.Missing = append(b.Missing, n)
		}
	}
	b.Read, b.Seq = top, top
	if len(b.Missing) > 0 {
		b.Seq = b.Missing[0] - 1
	}
	b.Seq = max(b.Seq, cur.Seq)
	return b, nil
}

func (m *modelSource) RenewedSince(context.Context, time.Time) ([]Renewal, time.Time, error) {
	return nil, time.Now(), nil
}

// versionWatcher records one watcher's view and fails the test when an
// instance's revision goes back.
type versionWatcher struct {
	mu   sync.Mutex
	set  map[string]int64 // id → revision
	errs []string
}

func watchVersions(t *testing.T, h *Hub) *versionWatcher {
	ch, err := h.Watch(context.Background(), switchboard.Query{})
	if err != nil {
		t.Fatal(err)
	}
	w := &versionWatcher{set: map[string]int64{}}
	last := map[string]int64{}
	go func() {
		for ev := range ch {
			w.mu.Lock()
			id := ev.Instance.ID
			switch ev.Kind {
			case switchboard.EventAdded, switchboard.EventUpdated, switchboard.EventRemoved:
				if ev.Revision < last[id] {
					w.errs = append(w.errs, fmt.Sprintf("%s %s at revision %d after revision %d", id, ev.Kind, ev.Revision, last[id]))
				}
				if ev.Kind != switchboard.EventRemoved && ev.Revision != ev.Instance.Revision {
					w.errs = append(w.errs, fmt.Sprintf("%s %s: event revision %d, instance %d", id, ev.Kind, ev.Revision, ev.Instance.Revision))
				}
				last[id] = ev.Revision
			}
			switch ev.Kind {
			case switchboard.EventAdded, switchboard.EventUpdated:
				w.set[id] = ev.Instance.Revision
			case switchboard.EventRemoved:
				delete(w.set, id)
			}
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *versionWatcher) state() (map[string]int64, []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.set), slices.Clone(w.errs)
}

// TestVersionsModel interleaves, at random, writers that draw a number and
// commit later in any order or roll back, their own publishes delivered at
// once, late or long after (as a slow NOTIFY), log reads, and full resyncs
// whose read runs while all of that goes on. Every watcher must see each
// instance's revision only grow, and end with exactly the catalog's rows
// at their revisions.
func TestVersionsModel(t *testing.T) {
	for seed := range uint64(200) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runVersionsModel(t, seed) })
	}
}

func runVersionsModel(t *testing.T, seed uint64) {
	rnd := rand.New(rand.NewPCG(seed, 7))
	m := newModelSource()
	h := New(m, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), SelfPreservationThreshold: -1})
	// Driven by hand, one step at a time: no loop of its own.
	snap, _ := m.Snapshot(context.Background())
	h.mu.Lock()
	h.applySnapshot(snap)
	h.renewedAt = snap.Now
	h.mu.Unlock()
	h.started.Store(true)
	close(h.stopped)
	t.Cleanup(h.Close)
	watchers := []*versionWatcher{watchVersions(t, h)}

	type pending struct {
		seq int64
		id  string
		del bool
	}
	var (
		inFlight []pending
		late     []Change // committed, publish not delivered yet
		ids      = []string{"a", "b", "c", "d", "e"}
		version  int
	)
	publish := func(c Change) {
		h.Publish(Batch{Changes: []Change{c}, Seq: c.Seq, Now: time.Now()})
	}
	step := func() {
		if err := h.step(); err != nil {
			t.Fatal(err)
		}
	}
	var op func()
	// writes runs n operations that write and publish, no log read: what
	// happens while a snapshot the loop reads is in flight.
	writes := func(n int) func() {
		return func() {
			for range n {
				if r := rnd.IntN(3); r == 0 {
					op() // may draw, commit, publish late
				}
			}
		}
	}
	op = func() {
		switch r := rnd.IntN(10); {
		case r < 3: // a writer draws its number
			id := ids[rnd.IntN(len(ids))]
			// It holds the row's lock from its row work to its commit:
			// writes of one instance commit in the order they drew.
			if slices.ContainsFunc(inFlight, func(p pending) bool { return p.id == id }) {
				return
			}
			inFlight = append(inFlight, pending{seq: m.draw(), id: id, del: rnd.IntN(4) == 0})
		case r < 5 && len(inFlight) > 0: // one commits (or, rarely, rolls back)
			i := rnd.IntN(len(inFlight))
			p := inFlight[i]
			inFlight = slices.Delete(inFlight, i, i+1)
			if rnd.IntN(8) == 0 {
				m.rollback(p.seq)
				return
			}
			var in *switchboard.Instance
			if !p.del {
				version++
				x := inst(p.id, time.Hour)
				x.Version = fmt.Sprint(version)
				in = &x
			}
			c := m.commit(p.seq, p.id, in)
			if rnd.IntN(2) == 0 {
				publish(c)
			} else {
				late = append(late, c)
			}
		case r < 7 && len(late) > 0: // a late publish arrives
			i := rnd.IntN(len(late))
			c := late[i]
			late = slices.Delete(late, i, i+1)
			publish(c)
		case r < 9:
			step()
		default:
			if len(watchers) < 3 && rnd.IntN(3) == 0 {
				watchers = append(watchers, watchVersions(t, h))
			}
		}
	}
	for i := 0; i < 400; i++ {
		if rnd.IntN(30) == 0 {
			// The log no longer holds the cursor: the loop reads a snapshot,
			// and writes commit and publish while it is in flight.
			m.mu.Lock()
			m.gone, m.during = true, writes(1+rnd.IntN(8))
			m.mu.Unlock()
			step()
			continue
		}
		if rnd.IntN(25) == 0 {
			// A resync whose read is in flight while more happens.
			m.mu.Lock()
			m.during = func() {
				for range 1 + rnd.IntN(12) {
					op()
				}
			}
			m.mu.Unlock()
			h.Resync()
			m.mu.Lock()
			m.during = nil
			m.mu.Unlock()
			continue
		}
		op()
	}
	// Everything in flight ends; every late publish arrives; the log is
	// read to its end.
	for _, p := range inFlight {
		if p.del {
			m.commit(p.seq, p.id, nil)
		} else {
			x := inst(p.id, time.Hour)
			m.commit(p.seq, p.id, &x)
		}
	}
	for _, c := range late {
		publish(c)
	}
	step()
	step()
	m.mu.Lock()
	want := map[string]int64{}
	for id, in := range m.rows {
		want[id] = in.Revision
	}
	m.mu.Unlock()
	if s := h.Stats(); s.WaitingFor != 0 {
		t.Fatalf("still waiting for change %d after every writer ended", s.WaitingFor)
	}
	for i, w := range watchers {
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			got, errs := w.state()
			if len(errs) > 0 {
				sort.Strings(errs)
				t.Fatalf("watcher %d went back in time:\n%v", i, errs)
			}
			if maps.Equal(got, want) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("watcher %d ends with %v, the catalog holds %v (hub: %+v, cursor %+v)", i, got, want, h.Stats(), h.cursor())
			}
		}
	}
}

// TestStalledWriterDelaysOnlyItsOwnChange: a number drawn and not
// committed does not hold back the changes after it, and Stats names it.
func TestStalledWriterDelaysOnlyItsOwnChange(t *testing.T) {
	m := newModelSource()
	h := New(m, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer h.Close()
	w := watchVersions(t, h)
	stalled := m.draw()
	x := inst("after", time.Hour)
	m.commit(m.draw(), "after", &x)
	h.Notify()
	testkit.WaitUntil(t, "the change after the stalled one to be delivered", func() bool {
		got, _ := w.state()
		return got["after"] != 0
	})
	if s := h.Stats(); s.WaitingFor != stalled {
		t.Fatalf("Stats waiting for %d, want %d", s.WaitingFor, stalled)
	}
	y := inst("stalled", time.Hour)
	m.commit(stalled, "stalled", &y)
	h.Notify()
	testkit.WaitUntil(t, "the stalled change once committed", func() bool {
		got, _ := w.state()
		return got["stalled"] == stalled && h.Stats().WaitingFor == 0
	})
}
