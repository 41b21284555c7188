package hub

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

// trimmedSource is a catalog whose change log keeps only its last
// keepLog entries (older cursors get ErrCursorGone), written through apply,
// which also publishes to the hub as a backend does after commit.
type trimmedSource struct {
	mu   sync.Mutex
	rows map[string]switchboard.Instance
	log  []Change
	seq  int64
}

const keepLog = 1000

func (m *trimmedSource) apply(h *Hub, id string, in *switchboard.Instance) {
	m.mu.Lock()
	m.seq++
	c := Change{Seq: m.seq, ID: id}
	if in == nil {
		delete(m.rows, id)
		c.Deleted, c.Reason = true, switchboard.ReasonDeregistered
	} else {
		in.LastSeen = time.Now()
		m.rows[id] = *in
		c.Instance, c.Found = *in, true
	}
	m.log = append(m.log, Change{Seq: c.Seq, ID: id, Deleted: c.Deleted, Reason: c.Reason})
	if len(m.log) > 2*keepLog {
		m.log = append([]Change(nil), m.log[len(m.log)-keepLog:]...)
	}
	m.mu.Unlock()
	h.Publish(Batch{Changes: []Change{c}, Seq: c.Seq, Now: time.Now()})
}

func (m *trimmedSource) Snapshot(context.Context) (Snapshot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := Snapshot{Seq: m.seq, Now: time.Now()}
	for _, in := range m.rows {
		s.Instances = append(s.Instances, in.Clone())
	}
	return s, nil
}

func (m *trimmedSource) ChangesSince(_ context.Context, cur Cursor) (Batch, error) {
	seq := cur.Seq
	m.mu.Lock()
	defer m.mu.Unlock()
	b := Batch{Seq: seq, Now: time.Now()}
	if seq == m.seq {
		return b, nil
	}
	if len(m.log) == 0 || m.log[0].Seq > seq+1 {
		return Batch{}, ErrCursorGone
	}
	for _, c := range m.log {
		if c.Seq <= seq {
			continue
		}
		if !c.Deleted {
			var in switchboard.Instance
			in, c.Found = m.rows[c.ID]
			c.Instance = in.Clone()
		}
		b.Changes = append(b.Changes, c)
		b.Seq = c.Seq
	}
	return b, nil
}

func (m *trimmedSource) RenewedSince(context.Context, time.Time) ([]Renewal, time.Time, error) {
	return nil, time.Now(), nil
}

// view is what one watcher's reader has been told, checked for protocol
// violations as events arrive.
type watcherView struct {
	mu     sync.Mutex
	set    map[string]string // id -> metadata "n"
	err    error
	synced int
}

func (v *watcherView) read(ch <-chan switchboard.Event) {
	for ev := range ch {
		v.mu.Lock()
		id := ev.Instance.ID
		_, has := v.set[id]
		switch ev.Kind {
		case switchboard.EventAdded:
			if has && v.err == nil {
				v.err = fmt.Errorf("added %s, already present", id)
			}
			v.set[id] = ev.Instance.Metadata["n"]
		case switchboard.EventUpdated:
			if !has && v.err == nil {
				v.err = fmt.Errorf("updated %s, never added", id)
			}
			v.set[id] = ev.Instance.Metadata["n"]
		case switchboard.EventRemoved:
			if !has && v.err == nil {
				v.err = fmt.Errorf("removed %s, never added", id)
			}
			delete(v.set, id)
		case switchboard.EventSynced:
			v.synced++
		}
		v.mu.Unlock()
	}
}

func (v *watcherView) equals(rows map[string]switchboard.Instance) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.set) != len(rows) {
		return false
	}
	for id, in := range rows {
		if n, ok := v.set[id]; !ok || n != in.Metadata["n"] {
			return false
		}
	}
	return true
}

func heapNow() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// A watcher that stops reading through 100,000 changes
// keeps the heap bounded (its queue is coalesced per instance), other
// watchers go on, and once it reads again it ends with exactly the
// catalog's state.
func TestStalledWatcherIsBoundedAndCatchesUp(t *testing.T) {
	src := &trimmedSource{rows: map[string]switchboard.Instance{}}
	h := New(src, Options{PollInterval: time.Hour})
	defer h.Close()
	comp := []byte(`{"blob":"` + strings.Repeat("x", 1024) + `"}`)
	mk := func(id string, n int) *switchboard.Instance {
		in := inst(id, time.Hour)
		in.Metadata = map[string]string{"n": fmt.Sprint(n)}
		in.Components = comp
		return &in
	}
	const live = 100
	for i := range live {
		src.apply(h, fmt.Sprintf("i%d", i), mk(fmt.Sprintf("i%d", i), 0))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stalled, err := h.Watch(ctx, switchboard.Query{})
	if err != nil {
		t.Fatal(err)
	}
	reading, err := h.Watch(ctx, switchboard.Query{})
	if err != nil {
		t.Fatal(err)
	}
	other := &watcherView{set: map[string]string{}}
	go other.read(reading)

	base := heapNow()
	var peak uint64
	const changes = 100_000
	ids := make([]string, 0, live)
	for i := range live {
		ids = append(ids, fmt.Sprintf("i%d", i))
	}
	next := live
	for n := 1; n <= changes; n++ {
		k := n % len(ids)
		if n%10 == 0 {
			// Churn: an instance leaves and a new one takes its place.
			src.apply(h, ids[k], nil)
			ids[k] = fmt.Sprintf("i%d", next)
			next++
		}
		src.apply(h, ids[k], mk(ids[k], n))
		if n%10_000 == 0 {
			peak = max(peak, heapNow())
		}
	}
	// Generous: the stalled watcher may hold two full queues (one being
	// handed over) and its channel buffer; the catalog itself is ~100 KiB.
	bound := base + 4*queueBytes
	t.Logf("heap: base %d KiB, peak %d KiB during %d changes, bound %d KiB",
		base>>10, peak>>10, changes, bound>>10)
	if peak > bound {
		t.Fatalf("heap grew to %d KiB with a stalled watcher (base %d KiB, bound %d KiB)", peak>>10, base>>10, bound>>10)
	}

	src.mu.Lock()
	rows := make(map[string]switchboard.Instance, len(src.rows))
	for id, in := range src.rows {
		rows[id] = in
	}
	src.mu.Unlock()
	testkit.WaitUntil(t, "the reading watcher to match the catalog", func() bool { return other.equals(rows) })
	late := &watcherView{set: map[string]string{}}
	go late.read(stalled)
	testkit.WaitUntil(t, "the stalled watcher to match the catalog", func() bool { return late.equals(rows) })
	for name, v := range map[string]*watcherView{"reading": other, "stalled": late} {
		v.mu.Lock()
		if v.err != nil {
			t.Errorf("%s watcher: %v", name, v.err)
		}
		v.mu.Unlock()
	}
	testkit.WaitUntil(t, "a synced marker after the catch-up", func() bool {
		late.mu.Lock()
		defer late.mu.Unlock()
		return late.synced >= 2
	})
}

// A watcher that fell behind while an instance it saw expired and was then
// reaped hears of its removal, as expired, once it reads again.
func TestBehindWatcherSeesExpiredThenReaped(t *testing.T) {
	m := newMem()
	h := New(m, Options{PollInterval: time.Hour})
	defer h.Close()
	m.put(inst("a", 300*time.Millisecond))
	m.put(inst("b", time.Hour))
	ch, err := h.Watch(context.Background(), switchboard.Query{})
	if err != nil {
		t.Fatal(err)
	}
	// More new instances than the queue, the reader's channel and the batch
	// in hand hold together (each an added event).
	for i := range 3 * queueCap {
		m.put(inst(fmt.Sprintf("c%d", i), time.Hour))
		h.Notify()
	}
	testkit.WaitUntil(t, "the mirror to hold them", func() bool { return h.Stats().Instances == 3*queueCap+2 })
	behind := false
	h.mu.Lock()
	for s := range h.subs {
		s.mu.Lock()
		behind = s.behind
		s.mu.Unlock()
	}
	h.mu.Unlock()
	if !behind {
		t.Fatal("the watcher did not fall behind")
	}
	testkit.WaitUntil(t, "a to expire", func() bool { return h.Stats().Active == 3*queueCap+1 })
	m.del("a", switchboard.ReasonExpired)
	h.Notify()
	testkit.WaitUntil(t, "a to leave the mirror", func() bool { return h.Stats().Instances == 3*queueCap+1 })
	v := &watcherView{set: map[string]string{}}
	var reasons []switchboard.Reason
	var mu sync.Mutex
	go func() {
		for ev := range ch {
			if ev.Kind == switchboard.EventRemoved {
				mu.Lock()
				reasons = append(reasons, ev.Reason)
				mu.Unlock()
			}
			v.mu.Lock()
			switch ev.Kind {
			case switchboard.EventAdded, switchboard.EventUpdated:
				v.set[ev.Instance.ID] = ev.Instance.Metadata["n"]
			case switchboard.EventRemoved:
				delete(v.set, ev.Instance.ID)
			}
			v.mu.Unlock()
		}
	}()
	testkit.WaitUntil(t, "the view to be exactly the catalog (b and the c's, not a)", func() bool {
		v.mu.Lock()
		defer v.mu.Unlock()
		_, hasA := v.set["a"]
		_, hasB := v.set["b"]
		return len(v.set) == 3*queueCap+1 && hasB && !hasA
	})
	mu.Lock()
	defer mu.Unlock()
	if len(reasons) != 1 || reasons[0] != switchboard.ReasonExpired {
		t.Fatalf("removals of a: %v, want one expired", reasons)
	}
}
