package hub

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
)

// The mirror's order, maintained lazily, always holds exactly the mirror's
// entries by name then id, through long random sequences of additions,
// renames, updates and deletions, and every new watcher's initial set
// follows it.
func TestOrderFollowsRandomChanges(t *testing.T) {
	h := New(newMem(), Options{PollInterval: time.Hour})
	defer h.Close()
	if _, err := h.Watch(t.Context(), switchboard.Query{}); err != nil { // starts the hub
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	now := time.Now()
	for step := range 20_000 {
		id := fmt.Sprintf("i%03d", rng.IntN(300))
		h.mu.Lock()
		switch rng.IntN(4) {
		case 0:
			h.delete(id, switchboard.ReasonDeregistered, 0)
		default:
			in := inst(id, time.Hour)
			in.Name = fmt.Sprintf("svc-%d", rng.IntN(7)) // a rename, often
			in.LastSeen = now
			h.upsert(&in, now)
		}
		ok := true
		if rng.IntN(50) == 0 {
			ok = h.checkOrder()
		}
		h.mu.Unlock()
		if !ok {
			t.Fatalf("step %d: the order does not hold exactly the mirror, sorted", step)
		}
		if step%2000 == 0 {
			checkInitialSet(t, h)
		}
	}
	checkInitialSet(t, h)
}

// checkInitialSet watches h and checks its initial set against the mirror
// sorted from scratch.
func checkInitialSet(t *testing.T, h *Hub) {
	t.Helper()
	h.mu.Lock()
	var want []string
	for _, e := range h.entries {
		want = append(want, e.inst.Name+"/"+e.inst.ID)
	}
	h.mu.Unlock()
	slices.Sort(want)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ch, err := h.Watch(ctx, switchboard.Query{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for ev := range ch {
		if ev.Kind == switchboard.EventSynced {
			break
		}
		got = append(got, ev.Instance.Name+"/"+ev.Instance.ID)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("initial set:\n%s\nwant (the mirror, sorted):\n%s", strings.Join(got, " "), strings.Join(want, " "))
	}
}

// blockingSource holds its Snapshot until released, having read the rows
// first: a full resync read that takes long.
type blockingSource struct {
	*memSource
	reading chan struct{} // receives once a Snapshot has read and waits
	release chan struct{}
	block   bool
}

func (b *blockingSource) Snapshot(ctx context.Context) (Snapshot, error) {
	s, err := b.memSource.Snapshot(ctx)
	b.mu.Lock()
	block := b.block
	b.mu.Unlock()
	if block {
		b.reading <- struct{}{}
		<-b.release
	}
	return s, err
}

// blockingStreamer streams blockingSource's snapshot in parts of two rows
// and, while blocking, waits after handing over the first part: a resync
// reconciling the parts as they come, held midway. It keeps the parts it
// handed over (handed).
type blockingStreamer struct {
	*blockingSource
	handed [][]switchboard.Instance
}

func (b *blockingStreamer) StreamSnapshot(ctx context.Context, _ Held, emit func(Part) error) error {
	s, err := b.memSource.Snapshot(ctx)
	if err != nil {
		return err
	}
	b.mu.Lock()
	block := b.block
	b.mu.Unlock()
	for i := 0; i == 0 || i < len(s.Instances); i += 2 {
		p := Part{Rows: len(s.Instances), Seq: s.Seq, Epoch: s.Epoch, Now: s.Now}
		p.Instances = s.Instances[i:min(i+2, len(s.Instances))]
		b.handed = append(b.handed, p.Instances)
		if err := emit(p); err != nil {
			return err
		}
		if block && i == 0 {
			b.reading <- struct{}{}
			<-b.release
		}
	}
	return nil
}

// The periodic full resync reads in the background;
// changes committed meanwhile reach watchers at once and are not undone
// when the older snapshot is reconciled; what the log missed (a row changed
// or deleted without an entry) is repaired. The same whether the resync
// reads whole or reconciles parts as a Streamer hands them over.
func TestResyncDoesNotHoldOrUndoLiveChanges(t *testing.T) {
	t.Run("whole", func(t *testing.T) {
		m := newMem()
		src := &blockingSource{memSource: m, reading: make(chan struct{}), release: make(chan struct{})}
		testResyncLive(t, src, src)
	})
	t.Run("streamed", func(t *testing.T) {
		m := newMem()
		b := &blockingSource{memSource: m, reading: make(chan struct{}), release: make(chan struct{})}
		st := &blockingStreamer{blockingSource: b}
		h := testResyncLive(t, b, st)
		// The mirror holds copies of what it took from the read, not the
		// read's rows (which would keep every row of the read alive).
		for _, part := range st.handed {
			for i := range part {
				part[i].Version = "scribbled"
			}
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if v := h.entries["i0"].inst.Version; v != "silently-changed" {
			t.Errorf("i0's version in the mirror after the read's rows changed: %q", v)
		}
	})
}

// testResyncLive runs the scenario on src, read through source (src
// itself, or a streamer of it), and returns the (closed) hub it used.
func testResyncLive(t *testing.T, src *blockingSource, source Source) *Hub {
	m := src.memSource
	for i := range 5 {
		m.put(inst(fmt.Sprintf("i%d", i), time.Hour))
	}
	h := New(source, Options{PollInterval: time.Hour})
	defer h.Close()
	ch, err := h.Watch(t.Context(), switchboard.Query{})
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if ev := next(t, ch); ev.Kind != switchboard.EventAdded {
			t.Fatalf("got %s, want added", ev.Kind)
		}
	}
	// Behind the log's back: i0 changed, i1 deleted (only a resync can tell).
	m.mu.Lock()
	ghost := m.rows["i0"]
	ghost.Version = "silently-changed"
	m.rows["i0"] = ghost
	delete(m.rows, "i1")
	m.mu.Unlock()

	src.mu.Lock()
	src.block = true
	src.mu.Unlock()
	h.startResync()
	<-src.reading // the snapshot is read; the resync now waits

	// Live changes while the resync is in flight: heard at once.
	live := inst("i2", time.Hour)
	live.Version = "live"
	m.put(live)
	m.put(inst("i9", time.Hour))
	m.del("i3", switchboard.ReasonDeregistered)
	h.Notify()
	// A streamed resync repairs what the parts it has reconciled show
	// (here the first part) before it is released, so the repairs may come
	// before, among or after the live changes; the live changes must all
	// come before the release.
	got := map[string]switchboard.EventKind{}
	live3 := func() bool { return got["i2"] != "" && got["i9"] != "" && got["i3"] != "" }
	record := func(ev switchboard.Event) {
		if _, dup := got[ev.Instance.ID]; dup {
			t.Errorf("a second event for %s: %s", ev.Instance.ID, ev.Kind)
		}
		got[ev.Instance.ID] = ev.Kind
		if ev.Instance.ID == "i0" && ev.Instance.Version != "silently-changed" {
			t.Errorf("i0 updated to version %q", ev.Instance.Version)
		}
	}
	for n := 0; !live3() && n < 5; n++ {
		record(next(t, ch))
	}
	if !live3() {
		close(src.release)
		t.Fatalf("live events during the resync: %v, want i2 updated, i9 added and i3 removed among them", got)
	}

	if _, streamed := source.(Streamer); !streamed && len(got) != 3 {
		t.Errorf("events before a whole read was released: %v, want only the live ones", got)
	}
	close(src.release)
	h.resyncs.Wait()
	// The older snapshot repairs what the log missed, and nothing else.
	for len(got) < 5 {
		record(next(t, ch))
	}
	want := map[string]switchboard.EventKind{
		"i0": switchboard.EventUpdated, "i1": switchboard.EventRemoved, // repaired
		"i2": switchboard.EventUpdated, "i9": switchboard.EventAdded, "i3": switchboard.EventRemoved, // live
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events: %v, want %v", got, want)
	}
	quiet(t, ch, 200*time.Millisecond)
	h.mu.Lock()
	defer h.mu.Unlock()
	if e := h.entries["i2"]; e == nil || e.inst.Version != "live" {
		t.Errorf("i2 in the mirror: %+v, want version live", e)
	}
	if h.entries["i3"] != nil || h.entries["i9"] == nil || len(h.entries) != 4 {
		t.Errorf("mirror holds %d entries (i3 %v, i9 %v), want i0 i2 i4 i9", len(h.entries), h.entries["i3"] != nil, h.entries["i9"] != nil)
	}
	if h.touched != nil {
		t.Error("resync still tracking changes after it finished")
	}
	return h
}
