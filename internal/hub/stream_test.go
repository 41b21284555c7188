package hub

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
)

// streamSource streams memSource's snapshot in parts of size rows; while
// failAfter is positive, a read fails after that many parts. A digesting
// one hands over rows through Parts with a digest of their content, and
// leaves out the rows held says the hub holds.
type streamSource struct {
	*memSource
	size      int
	digesting bool
	failAfter atomic.Int32
	noParts   atomic.Bool
	streams   atomic.Int32
	// decoded and held count a digesting source's rows: handed over, and
	// left out because the hub held them.
	decoded, held atomic.Int32
}

var errMidStream = errors.New("connection reset mid-stream")

// contentDigest is a digest of everything of in but its LastSeen and
// Stale, never 0 (what the hub compares in Held).
func contentDigest(in switchboard.Instance) uint64 {
	in.LastSeen, in.Stale = time.Time{}, false
	f := fnv.New64a()
	fmt.Fprintf(f, "%#v", in)
	return f.Sum64() | 1
}

func (s *streamSource) StreamSnapshot(ctx context.Context, held Held, emit func(Part) error) error {
	s.streams.Add(1)
	snap, err := s.Snapshot(ctx)
	if err != nil {
		return err
	}
	if s.noParts.Load() {
		return nil
	}
	if s.digesting {
		parts := NewParts(Part{Rows: len(snap.Instances), Seq: snap.Seq, Epoch: snap.Epoch, Now: snap.Now}, held, emit)
		for _, in := range snap.Instances {
			var d uint64 // as the SQL sources: only a resync's rows
			if held != nil {
				d = contentDigest(in)
			}
			if parts.Held(in.ID, d, in.LastSeen) {
				s.held.Add(1)
				continue
			}
			p, err := parts.NextDigested(d)
			if err != nil {
				return err
			}
			*p = in
			s.decoded.Add(1)
		}
		return parts.Close()
	}
	fail := int(s.failAfter.Load())
	for i, n := 0, 0; i == 0 || i < len(snap.Instances); i, n = i+s.size, n+1 {
		if fail > 0 && n == fail {
			return errMidStream
		}
		p := Part{Rows: len(snap.Instances), Seq: snap.Seq, Epoch: snap.Epoch, Now: snap.Now}
		p.Instances = snap.Instances[i:min(i+s.size, len(snap.Instances))]
		if err := emit(p); err != nil {
			return err
		}
	}
	return nil
}

// initialSet watches q and returns the events before the first Synced.
func initialSet(t *testing.T, h *Hub, q switchboard.Query) (<-chan switchboard.Event, []switchboard.Event) {
	t.Helper()
	ch, err := h.Watch(t.Context(), q)
	if err != nil {
		t.Fatal(err)
	}
	var evs []switchboard.Event
	for ev := range ch {
		if ev.Kind == switchboard.EventSynced {
			return ch, evs
		}
		evs = append(evs, ev)
	}
	t.Fatal("watch closed before synced")
	return nil, nil
}

func TestStreamedFirstSnapshotIsTheSnapshot(t *testing.T) {
	m := newMem()
	for i := range 100 {
		in := inst(fmt.Sprintf("id-%03d", (i*37)%100), time.Minute)
		in.Name = fmt.Sprint("svc-", i%7)
		if i%10 == 0 {
			in.LastSeen = time.Now().Add(-time.Hour) // past its TTL: expired
		}
		m.put(in)
	}
	plain := New(m, Options{PollInterval: time.Hour})
	defer plain.Close()
	st := &streamSource{memSource: m, size: 7}
	streamed := New(st, Options{PollInterval: time.Hour})
	defer streamed.Close()

	for _, q := range []switchboard.Query{{}, {All: true}, {Name: "svc-3"}} {
		_, want := initialSet(t, plain, q)
		_, got := initialSet(t, streamed, q)
		if len(got) != len(want) {
			t.Fatalf("%+v: %d streamed, %d read whole", q, len(got), len(want))
		}
		for i := range got {
			if got[i].Kind != want[i].Kind || got[i].Instance.ID != want[i].Instance.ID || got[i].Instance.Stale != want[i].Instance.Stale {
				t.Fatalf("%+v: event %d streamed %v %s stale=%v, read whole %v %s stale=%v", q, i,
					got[i].Kind, got[i].Instance.ID, got[i].Instance.Stale, want[i].Kind, want[i].Instance.ID, want[i].Instance.Stale)
			}
		}
	}
	if st.streams.Load() != 1 {
		t.Fatalf("%d streamed reads, want 1 (the first Watch's)", st.streams.Load())
	}
	streamed.mu.Lock()
	ok, n := streamed.checkOrder(), len(streamed.dl)
	streamed.mu.Unlock()
	if !ok {
		t.Fatal("order does not hold the mirror sorted")
	}
	if n != 90 {
		t.Fatalf("%d deadlines, want one per live instance (90)", n)
	}
	if s := streamed.Stats(); s.Instances != 100 || s.Active != 90 {
		t.Fatalf("stats: %+v", s)
	}

	// The log goes on from the streamed snapshot's position.
	ch, _ := initialSet(t, streamed, switchboard.Query{Name: "new"})
	in := inst("id-new", time.Minute)
	in.Name = "new"
	m.put(in)
	streamed.Notify()
	if ev := next(t, ch); ev.Kind != switchboard.EventAdded || ev.Instance.ID != "id-new" {
		t.Fatalf("after the stream: %v %s", ev.Kind, ev.Instance.ID)
	}
}

func TestStreamFailingMidwayKeepsNothing(t *testing.T) {
	m := newMem()
	for i := range 50 {
		m.put(inst(fmt.Sprintf("id-%02d", i), time.Minute))
	}
	st := &streamSource{memSource: m, size: 10}
	st.failAfter.Store(3) // 30 rows applied, then the read fails
	h := New(st, Options{PollInterval: time.Hour})
	defer h.Close()
	if _, err := h.Watch(t.Context(), switchboard.Query{}); !errors.Is(err, errMidStream) {
		t.Fatalf("watch over a failing stream: %v", err)
	}
	if s := h.Stats(); s.Instances != 0 {
		t.Fatalf("a failed first read left %d instances in the mirror", s.Instances)
	}
	h.mu.Lock()
	left := len(h.dl) + len(h.moved) + len(h.order)
	h.mu.Unlock()
	if left != 0 {
		t.Fatalf("a failed first read left %d deadlines or order entries", left)
	}

	st.failAfter.Store(0)
	_, evs := initialSet(t, h, switchboard.Query{})
	ids := make([]string, len(evs))
	for i, ev := range evs {
		ids[i] = ev.Instance.ID
	}
	if len(ids) != 50 || !slices.IsSorted(ids) {
		t.Fatalf("after the failure, a Watch read %d instances (sorted: %v)", len(ids), slices.IsSorted(ids))
	}
}

func TestStreamWithoutAPartIsAnError(t *testing.T) {
	st := &streamSource{memSource: newMem(), size: 10}
	st.noParts.Store(true)
	h := New(st, Options{PollInterval: time.Hour})
	defer h.Close()
	if _, err := h.Watch(t.Context(), switchboard.Query{}); !errors.Is(err, errNoParts) {
		t.Fatalf("watch over a stream without a part: %v", err)
	}
	// An empty catalog streams one empty part: synced at once.
	st.noParts.Store(false)
	if _, evs := initialSet(t, h, switchboard.Query{}); len(evs) != 0 {
		t.Fatalf("empty catalog: %d events before synced", len(evs))
	}
}

func TestPartsHandsOverFullPartsThenTheRest(t *testing.T) {
	// estimate is the head's row count: exact, or off (a PostgreSQL
	// snapshot's comes from the planner's statistics).
	for _, c := range []struct{ rows, estimate int }{
		{0, 0}, {1, 1}, {PartSize, PartSize}, {PartSize + 1, PartSize + 1}, {2*PartSize + 5, 2*PartSize + 5},
		{PartSize + 20, 10}, {3, 0}, {5, 2 * PartSize},
	} {
		var sizes []int
		next := 0 // the next row expected, in order across parts
		head := Part{Rows: c.estimate, Seq: 7, Epoch: "e"}
		p := NewParts(head, nil, func(part Part) error {
			if part.Seq != 7 || part.Epoch != "e" || part.Rows != c.estimate {
				t.Fatalf("part without the head: %+v", part)
			}
			for _, in := range part.Instances {
				if in.ID != fmt.Sprint(next) {
					t.Fatalf("%+v: row %q where row %d belongs", c, in.ID, next)
				}
				next++
			}
			// With an exact estimate no part holds room for more rows
			// than it carries (the last one is not a full allocation).
			if c.estimate == c.rows && c.rows > 0 && cap(part.Instances) != len(part.Instances) {
				t.Fatalf("%+v: a part of %d rows holds room for %d", c, len(part.Instances), cap(part.Instances))
			}
			sizes = append(sizes, len(part.Instances))
			return nil
		})
		for i := range c.rows {
			in, err := p.Next()
			if err != nil {
				t.Fatal(err)
			}
			in.ID = fmt.Sprint(i)
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		want := []int{}
		for left := c.rows; left > 0; left -= PartSize {
			want = append(want, min(left, PartSize))
		}
		if c.rows == 0 {
			want = []int{0} // an empty catalog still has a position
		}
		if !slices.Equal(sizes, want) || next != c.rows {
			t.Fatalf("%+v: parts of %v (%d rows), want %v", c, sizes, next, want)
		}
	}
	stop := errors.New("the hub gave up")
	p := NewParts(Part{}, nil, func(Part) error { return stop })
	for range PartSize {
		if _, err := p.Next(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.Next(); !errors.Is(err, stop) {
		t.Fatalf("emit's error, at the part it ended: %v", err)
	}
}

// streamedWatch returns a hub over n rows (i0, i1, …, an hour's TTL each)
// that its source streams in parts of size, and a watch of everything
// that has received the first snapshot (closed when the test ends).
func streamedWatch(t *testing.T, n, size int) (*memSource, *streamSource, *Hub, <-chan switchboard.Event) {
	t.Helper()
	m := newMem()
	for i := range n {
		m.put(inst(fmt.Sprintf("i%d", i), time.Hour))
	}
	st := &streamSource{memSource: m, size: size}
	h := New(st, Options{PollInterval: time.Hour})
	t.Cleanup(h.Close)
	ch, evs := initialSet(t, h, switchboard.Query{})
	if len(evs) != n {
		t.Fatalf("first snapshot: %d instances, want %d", len(evs), n)
	}
	return m, st, h, ch
}

// A streamed resync whose read fails midway keeps what its parts repaired
// (each part is a consistent read's) but removes nothing: only a complete
// read can tell that a row is gone. The next resync completes the repair.
func TestStreamedResyncFailingMidwayRemovesNothing(t *testing.T) {
	m, st, h, ch := streamedWatch(t, 10, 3)
	// Behind the log's back: two rows deleted.
	m.mu.Lock()
	delete(m.rows, "i0")
	delete(m.rows, "i1")
	m.mu.Unlock()

	st.failAfter.Store(1)
	h.startResync()
	h.resyncs.Wait()
	quiet(t, ch, 100*time.Millisecond)
	h.mu.Lock()
	n := len(h.entries)
	h.mu.Unlock()
	if n != 10 {
		t.Fatalf("after a resync that failed midway the mirror holds %d entries, want all 10", n)
	}

	st.failAfter.Store(0)
	h.startResync()
	h.resyncs.Wait()
	got := map[string]switchboard.EventKind{}
	for range 2 {
		ev := next(t, ch)
		got[ev.Instance.ID] = ev.Kind
	}
	if got["i0"] != switchboard.EventRemoved || got["i1"] != switchboard.EventRemoved {
		t.Fatalf("after a complete resync: %v, want i0 and i1 removed", got)
	}
	quiet(t, ch, 100*time.Millisecond)
}

// A streamed resync that finds the catalog in another history (re-created
// or restored elsewhere) reads it again whole and applies it as a
// snapshot, as the loop does when its cursor is gone.
func TestStreamedResyncOfAnotherEpochAppliesTheSnapshot(t *testing.T) {
	m, _, h, ch := streamedWatch(t, 5, 2)
	// Restored from elsewhere: another history, without i0.
	m.mu.Lock()
	m.epoch = "restored"
	delete(m.rows, "i0")
	m.mu.Unlock()

	h.startResync()
	h.resyncs.Wait()
	if ev := next(t, ch); ev.Kind != switchboard.EventRemoved || ev.Instance.ID != "i0" {
		t.Fatalf("got %s %s, want i0 removed", ev.Kind, ev.Instance.ID)
	}
	quiet(t, ch, 100*time.Millisecond)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.epoch != "restored" || len(h.entries) != 4 {
		t.Fatalf("after the resync: epoch %q, %d entries; want restored, 4", h.epoch, len(h.entries))
	}
}

// digestingWatch returns a hub over memRows(n, expired...) that a
// digesting source streams, and a watch of the live ones that has received
// the first snapshot, after a first resync, which decodes every row to
// learn their digests; the source's counters start at 0.
func digestingWatch(t *testing.T, n int, expired ...string) (*memSource, *streamSource, *Hub, <-chan switchboard.Event) {
	t.Helper()
	m := memRows(n, expired...)
	st := &streamSource{memSource: m, size: 1, digesting: true}
	h := New(st, Options{PollInterval: time.Hour})
	t.Cleanup(h.Close)
	ch, evs := initialSet(t, h, switchboard.Query{})
	if len(evs) != n-len(expired) || st.decoded.Load() != int32(n) {
		t.Fatalf("first snapshot: %d live instances of %d decoded, want %d of %d", len(evs), st.decoded.Load(), n-len(expired), n)
	}
	st.decoded.Store(0)
	h.Resync()
	if d, held := st.decoded.Load(), st.held.Load(); d != int32(n) || held != 0 {
		t.Fatalf("first resync: %d rows decoded, %d held; want %d, 0 (the first snapshot carries no digests)", d, held, n)
	}
	quiet(t, ch, 50*time.Millisecond)
	st.decoded.Store(0)
	return m, st, h, ch
}

// memRows returns a memSource of rows i0 … i(n-1), an hour's TTL each,
// those in expired last seen two hours ago.
func memRows(n int, expired ...string) *memSource {
	m := newMem()
	for i := range n {
		in := inst(fmt.Sprintf("i%d", i), time.Hour)
		if slices.Contains(expired, in.ID) {
			in.LastSeen = time.Now().Add(-2 * time.Hour)
		}
		m.put(in)
	}
	return m
}

// behind changes row id of m as a writer would that the log does not tell
// of (the safety net's case), and returns it as it was.
func behind(m *memSource, id string, change func(*switchboard.Instance)) switchboard.Instance {
	m.mu.Lock()
	defer m.mu.Unlock()
	was := m.rows[id]
	in := was
	change(&in)
	m.rows[id] = in
	return was
}

// A resync leaves undecoded every row the mirror holds as stored (the same
// digest), takes such a row's newer last_seen only where that revives an
// expired entry (a live one's renewals are the renewal read's), and
// decodes only the rows that differ.
func TestResyncDecodesOnlyChangedRows(t *testing.T) {
	m, st, h, ch := digestingWatch(t, 50, "i6")
	h.Resync()
	quiet(t, ch, 50*time.Millisecond)
	if d, held := st.decoded.Load(), st.held.Load(); d != 0 || held != 50 {
		t.Fatalf("resync of an unchanged catalog: %d rows decoded, %d held; want 0, 50", d, held)
	}

	renewed := time.Now().Add(time.Minute).Truncate(time.Microsecond)
	behind(m, "i3", func(in *switchboard.Instance) { in.Address = "127.0.0.1:3" })
	behind(m, "i4", func(in *switchboard.Instance) { in.LastSeen = renewed })
	behind(m, "i6", func(in *switchboard.Instance) { in.LastSeen = renewed })
	m.mu.Lock()
	delete(m.rows, "i5")
	m.mu.Unlock()
	st.held.Store(0)
	h.Resync()
	got := map[string]switchboard.EventKind{}
	for range 3 {
		ev := next(t, ch)
		got[ev.Instance.ID] = ev.Kind
	}
	want := map[string]switchboard.EventKind{"i3": switchboard.EventUpdated, "i5": switchboard.EventRemoved, "i6": switchboard.EventAdded}
	if !maps.Equal(got, want) {
		t.Fatalf("events %v, want %v (i6 revived by its renewal)", got, want)
	}
	quiet(t, ch, 50*time.Millisecond)
	if d, held := st.decoded.Load(), st.held.Load(); d != 1 || held != 48 {
		t.Fatalf("%d rows decoded, %d held; want 1 (i3), 48", d, held)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if e := h.entries["i6"]; !e.inst.LastSeen.Equal(renewed) || e.expired {
		t.Fatalf("i6: last seen %v (expired %v), want revived by its renewal %v", e.inst.LastSeen, e.expired, renewed)
	}
	if e := h.entries["i4"]; e.inst.LastSeen.Equal(renewed) {
		t.Fatal("i4: a live entry's renewal taken by the resync, not left to the renewal read")
	}
	if e := h.entries["i3"]; e.inst.Address != "127.0.0.1:3" {
		t.Fatalf("i3 at %s after the resync", e.inst.Address)
	}
}

// A change the mirror takes from the log forgets the entry's digest: the
// digest described the row as it was, and a row changed back to that
// behind the log's back must be decoded, not held.
func TestChangeFromTheLogForgetsTheDigest(t *testing.T) {
	m, st, h, ch := digestingWatch(t, 5)
	was := behind(m, "i1", func(*switchboard.Instance) {})
	moved := was
	moved.Address = "127.0.0.1:9"
	m.put(moved)
	h.Notify()
	if ev := next(t, ch); ev.Kind != switchboard.EventUpdated || ev.Instance.Address != "127.0.0.1:9" {
		t.Fatalf("from the log: %s %s at %s", ev.Kind, ev.Instance.ID, ev.Instance.Address)
	}
	behind(m, "i1", func(in *switchboard.Instance) { *in = was })
	h.Resync()
	if ev := next(t, ch); ev.Kind != switchboard.EventUpdated || ev.Instance.Address != was.Address {
		t.Fatalf("after the resync: %s %s at %s, want i1 back at %s", ev.Kind, ev.Instance.ID, ev.Instance.Address, was.Address)
	}
	quiet(t, ch, 50*time.Millisecond)
	if d := st.decoded.Load(); d != 1 {
		t.Fatalf("%d rows decoded, want 1 (i1)", d)
	}
}

// A row the mirror holds expired, renewed behind the log's back (its
// revival's log entry missed), is revived by a resync, whether the source
// hands it over decoded or leaves it out as held.
func TestResyncRevivesWhatTheLogMissed(t *testing.T) {
	for _, digesting := range []bool{false, true} {
		t.Run(fmt.Sprintf("digesting=%v", digesting), func(t *testing.T) {
			m := memRows(2, "i1")
			st := &streamSource{memSource: m, size: 1, digesting: digesting}
			h := New(st, Options{PollInterval: time.Hour})
			t.Cleanup(h.Close)
			ch, evs := initialSet(t, h, switchboard.Query{})
			if len(evs) != 1 || evs[0].Instance.ID != "i0" {
				t.Fatalf("first snapshot: %v", evs)
			}
			h.Resync() // a digesting source's digests learned
			behind(m, "i1", func(in *switchboard.Instance) { in.LastSeen = time.Now() })
			h.Resync()
			if ev := next(t, ch); ev.Kind != switchboard.EventAdded || ev.Instance.ID != "i1" {
				t.Fatalf("got %s %s, want i1 revived", ev.Kind, ev.Instance.ID)
			}
			quiet(t, ch, 50*time.Millisecond)
			if digesting && st.held.Load() != 2 {
				t.Fatalf("%d rows held, want 2 (both, in the second resync)", st.held.Load())
			}
		})
	}
}
