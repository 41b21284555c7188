package hub

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
)

// streamSource streams memSource's snapshot in parts of size rows; while
// failAfter is positive, a read fails after that many parts.
type streamSource struct {
	*memSource
	size      int
	failAfter atomic.Int32
	noParts   atomic.Bool
	streams   atomic.Int32
}

var errMidStream = errors.New("connection reset mid-stream")

func (s *streamSource) StreamSnapshot(ctx context.Context, emit func(Part) error) error {
	s.streams.Add(1)
	snap, err := s.Snapshot(ctx)
	if err != nil {
		return err
	}
	if s.noParts.Load() {
		return nil
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
		p := NewParts(head, func(part Part) error {
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
	p := NewParts(Part{}, func(Part) error { return stop })
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
