package hub

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

// memSource is an in-memory catalog with a change log: a fake for the
// hub's pure logic. Backends test the hub for real through catalogtest.
type memSource struct {
	mu    sync.Mutex
	rows  map[string]switchboard.Instance
	log   []Change
	seq   int64
	down  bool
	reads int
	epoch string // the history Snapshot and ChangesSince report
}

func newMem() *memSource { return &memSource{rows: map[string]switchboard.Instance{}} }

var errDown = errors.New("connection refused")

func (m *memSource) put(in switchboard.Instance) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if in.LastSeen.IsZero() {
		in.LastSeen = time.Now()
	}
	m.rows[in.ID] = in
	m.seq++
	m.log = append(m.log, Change{Seq: m.seq, ID: in.ID})
}

// beat renews a row; like the SQL backends, it logs a change only when
// the row had gone stale (a revival is news, a heartbeat is not).
func (m *memSource) beat(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	in := m.rows[id]
	now := time.Now()
	stale := now.Sub(in.LastSeen) > in.TTL
	in.LastSeen = now
	m.rows[id] = in
	if stale {
		m.seq++
		m.log = append(m.log, Change{Seq: m.seq, ID: id})
	}
}

func (m *memSource) del(id string, r switchboard.Reason) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.rows, id)
	m.seq++
	m.log = append(m.log, Change{Seq: m.seq, ID: id, Deleted: true, Reason: r})
}

func (m *memSource) setDown(d bool) {
	m.mu.Lock()
	m.down = d
	m.mu.Unlock()
}

func (m *memSource) Snapshot(context.Context) (Snapshot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reads++
	if m.down {
		return Snapshot{}, errDown
	}
	s := Snapshot{Seq: m.seq, Epoch: m.epoch, Now: time.Now()}
	for _, in := range m.rows {
		s.Instances = append(s.Instances, in)
	}
	return s, nil
}

func (m *memSource) ChangesSince(_ context.Context, cur Cursor) (Batch, error) {
	seq := cur.Seq
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reads++
	if m.down {
		return Batch{}, errDown
	}
	b := Batch{Seq: seq, Epoch: m.epoch, Now: time.Now()}
	for _, c := range m.log {
		if c.Seq <= seq {
			continue
		}
		if !c.Deleted {
			c.Instance, c.Found = m.rows[c.ID]
		}
		b.Changes = append(b.Changes, c)
		b.Seq = c.Seq
	}
	return b, nil
}

func (m *memSource) RenewedSince(_ context.Context, since time.Time) ([]Renewal, time.Time, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reads++
	if m.down {
		return nil, time.Time{}, errDown
	}
	var out []Renewal
	for _, in := range m.rows {
		if in.LastSeen.After(since) {
			out = append(out, Renewal{ID: in.ID, LastSeen: in.LastSeen})
		}
	}
	return out, time.Now(), nil
}

func inst(id string, ttl time.Duration) switchboard.Instance {
	return switchboard.Instance{ID: id, Name: "svc", Type: "writer", Address: "127.0.0.1:1", TTL: ttl}
}

// next returns the next event that is not a marker, failing after a
// generous deadline (a missing event, not a slow one, is the failure).
func next(t *testing.T, ch <-chan switchboard.Event) switchboard.Event {
	t.Helper()
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatal("watch channel closed")
			}
			if ev.Kind == switchboard.EventSynced {
				continue
			}
			return ev
		case <-time.After(10 * time.Second):
			t.Fatal("no event within 10s")
		}
	}
}

func quiet(t *testing.T, ch <-chan switchboard.Event, d time.Duration) {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case ev := <-ch:
			if ev.Kind != switchboard.EventSynced {
				t.Fatalf("unexpected event %s %s %s", ev.Kind, ev.Reason, ev.Instance.ID)
			}
		case <-deadline:
			return
		}
	}
}

func TestExpiryAndRevival(t *testing.T) {
	m := newMem()
	h := New(m, Options{})
	defer h.Close()
	m.put(inst("a", 200*time.Millisecond))
	ch, err := h.Watch(context.Background(), switchboard.Query{})
	if err != nil {
		t.Fatal(err)
	}
	if ev := next(t, ch); ev.Kind != switchboard.EventAdded || ev.Instance.ID != "a" {
		t.Fatalf("got %+v", ev)
	}
	ev := next(t, ch)
	if ev.Kind != switchboard.EventRemoved || ev.Reason != switchboard.ReasonExpired || !ev.Instance.Stale {
		t.Fatalf("want removed/expired, got %+v", ev)
	}
	m.beat("a")
	h.Notify()
	m.put(inst("b", time.Minute))
	h.Notify()
	seen := map[string]switchboard.EventKind{}
	for len(seen) < 2 {
		ev := next(t, ch)
		seen[ev.Instance.ID] = ev.Kind
	}
	if seen["a"] != switchboard.EventAdded || seen["b"] != switchboard.EventAdded {
		t.Fatalf("want a revived and b added, got %v", seen)
	}
	if s := h.Stats(); s.Active != 2 {
		t.Fatalf("stats after revival: %+v", s)
	}
}

func TestHeartbeatsAreNotEvents(t *testing.T) {
	m := newMem()
	h := New(m, Options{})
	defer h.Close()
	m.put(inst("a", 300*time.Millisecond))
	ch, err := h.Watch(context.Background(), switchboard.Query{})
	if err != nil {
		t.Fatal(err)
	}
	next(t, ch)
	stop := make(chan struct{})
	go func() {
		tk := time.NewTicker(50 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
				m.beat("a")
			}
		}
	}()
	quiet(t, ch, time.Second)
	close(stop)
	if ev := next(t, ch); ev.Kind != switchboard.EventRemoved {
		t.Fatalf("got %+v", ev)
	}
}

func TestOutageServesLastKnownAndHoldsExpiry(t *testing.T) {
	m := newMem()
	h := New(m, Options{})
	defer h.Close()
	m.put(inst("a", 400*time.Millisecond))
	ch, err := h.Watch(context.Background(), switchboard.Query{})
	if err != nil {
		t.Fatal(err)
	}
	next(t, ch)
	m.setDown(true)
	h.Notify()
	ev := next(t, ch)
	if ev.Kind != switchboard.EventError || !errors.Is(ev.Err, errDown) {
		t.Fatalf("want error event, got %+v", ev)
	}
	// Longer than the TTL: nothing expires while the catalog is unreachable.
	quiet(t, ch, 800*time.Millisecond)
	if s := h.Stats(); s.Healthy || s.Active != 1 {
		t.Fatalf("stats during outage: %+v", s)
	}
	m.setDown(false)
	testkit.WaitUntil(t, "recovery", func() bool { return h.Stats().Healthy })
	// The instance heartbeats again soon after recovery: never reported.
	time.Sleep(100 * time.Millisecond)
	m.beat("a")
	quiet(t, ch, 300*time.Millisecond)
	if s := h.Stats(); !s.Healthy || s.Active != 1 {
		t.Fatalf("stats after recovery: %+v", s)
	}
}

func TestSelfPreservation(t *testing.T) {
	m := newMem()
	h := New(m, Options{SelfPreservationMin: 4})
	defer h.Close()
	ids := []string{"a", "b", "c", "d"}
	seen := time.Now() // one crash takes three down at the same instant
	for _, id := range ids[:3] {
		in := inst(id, 300*time.Millisecond)
		in.LastSeen = seen
		m.put(in)
	}
	m.put(inst("d", time.Hour))
	ch, err := h.Watch(context.Background(), switchboard.Query{})
	if err != nil {
		t.Fatal(err)
	}
	for range ids {
		next(t, ch)
	}
	// Three of four would expire at once: held.
	quiet(t, ch, time.Second)
	if s := h.Stats(); !s.Preserving || s.HeldExpirations != 3 || s.SelfPreservationEvents != 1 {
		t.Fatalf("stats: %+v", s)
	}
	// The reaper's deletion is the truth: it gets through.
	m.del("a", switchboard.ReasonExpired)
	h.Notify()
	if ev := next(t, ch); ev.Kind != switchboard.EventRemoved || ev.Reason != switchboard.ReasonExpired {
		t.Fatalf("got %+v", ev)
	}
}

func TestQueryFiltersAndAll(t *testing.T) {
	m := newMem()
	h := New(m, Options{})
	defer h.Close()
	a := inst("a", 200*time.Millisecond)
	a.Capabilities = []string{"x"}
	m.put(a)
	all, err := h.Watch(context.Background(), switchboard.Query{All: true})
	if err != nil {
		t.Fatal(err)
	}
	byY, err := h.Watch(context.Background(), switchboard.Query{Capability: "y"})
	if err != nil {
		t.Fatal(err)
	}
	next(t, all)
	if ev := next(t, all); ev.Kind != switchboard.EventUpdated || !ev.Instance.Stale {
		t.Fatalf("All watcher: want updated stale, got %+v", ev)
	}
	a.Capabilities = []string{"x", "y"}
	m.put(a)
	h.Notify()
	if ev := next(t, byY); ev.Kind != switchboard.EventAdded || ev.Instance.Stale {
		t.Fatalf("y watcher: got %+v", ev)
	}
	m.del("a", switchboard.ReasonDeregistered)
	h.Notify()
	if ev := next(t, byY); ev.Kind != switchboard.EventRemoved || ev.Reason != switchboard.ReasonDeregistered {
		t.Fatalf("got %+v", ev)
	}
}

func TestCloseClosesWatchers(t *testing.T) {
	m := newMem()
	h := New(m, Options{})
	ch, err := h.Watch(context.Background(), switchboard.Query{})
	if err != nil {
		t.Fatal(err)
	}
	h.Close()
	h.Close()
	for {
		select {
		case _, ok := <-ch:
			if ok {
				continue
			}
		case <-time.After(10 * time.Second):
			t.Fatal("watch channel still open 10s after Close")
		}
		break
	}
	if _, err := h.Watch(context.Background(), switchboard.Query{}); !errors.Is(err, switchboard.ErrClosed) {
		t.Fatalf("watch after close: %v", err)
	}
}

func TestPublishAppliesContiguousWrites(t *testing.T) {
	m := newMem()
	h := New(m, Options{})
	defer h.Close()
	ch, err := h.Watch(context.Background(), switchboard.Query{})
	if err != nil {
		t.Fatal(err)
	}
	// Stop the loop from reading the log: a Publish that is applied must
	// not need it.
	m.setDown(true)
	in := inst("p", time.Minute)
	in.LastSeen = time.Now()
	m.mu.Lock()
	m.seq++
	seq := m.seq
	m.mu.Unlock()
	h.Publish(Batch{Changes: []Change{{Seq: seq, ID: "p", Instance: in, Found: true}}, Seq: seq, Now: time.Now()})
	if ev := next(t, ch); ev.Kind != switchboard.EventAdded || ev.Instance.ID != "p" {
		t.Fatalf("got %+v", ev)
	}
	// A gap (seq+2) is not applied: it waits for the log.
	in.ID = "q"
	h.Publish(Batch{Changes: []Change{{Seq: seq + 2, ID: "q", Instance: in, Found: true}}, Seq: seq + 2, Now: time.Now()})
	if ev := next(t, ch); ev.Kind != switchboard.EventError {
		t.Fatalf("a gapped publish was applied: %+v", ev)
	}
}

// gateSource holds the loop inside ChangesSince once it has read a
// non-empty batch, so a test can Publish newer writes meanwhile.
type gateSource struct {
	*memSource
	armed   atomic.Bool
	entered chan struct{}
	gate    chan struct{}
}

func (g *gateSource) ChangesSince(ctx context.Context, cur Cursor) (Batch, error) {
	b, err := g.memSource.ChangesSince(ctx, cur)
	if len(b.Changes) > 0 && g.armed.CompareAndSwap(true, false) {
		g.entered <- struct{}{}
		<-g.gate
	}
	return b, err
}

// A batch read from the log before Publish applied newer writes must not
// undo them (found in review: a deregistered instance came back).
func TestStaleBatchDoesNotUndoPublish(t *testing.T) {
	m := newMem()
	g := &gateSource{memSource: m, entered: make(chan struct{}), gate: make(chan struct{})}
	h := New(g, Options{})
	defer h.Close()
	ch, err := h.Watch(context.Background(), switchboard.Query{})
	if err != nil {
		t.Fatal(err)
	}
	g.armed.Store(true)
	x := inst("x", time.Minute)
	x.LastSeen = time.Now()
	m.put(x) // seq 1
	h.Notify()
	<-g.entered // the loop holds a batch with seq 1 (x found)
	h.Publish(Batch{Changes: []Change{{Seq: 1, ID: "x", Instance: x, Found: true}}, Seq: 1, Now: time.Now()})
	m.del("x", switchboard.ReasonDeregistered) // seq 2
	h.Publish(Batch{Changes: []Change{{Seq: 2, ID: "x", Deleted: true, Reason: switchboard.ReasonDeregistered}}, Seq: 2, Now: time.Now()})
	close(g.gate)
	if ev := next(t, ch); ev.Kind != switchboard.EventAdded {
		t.Fatalf("got %+v", ev)
	}
	if ev := next(t, ch); ev.Kind != switchboard.EventRemoved {
		t.Fatalf("got %+v", ev)
	}
	quiet(t, ch, 300*time.Millisecond)
	if s := h.Stats(); s.Instances != 0 {
		t.Fatalf("the mirror holds %d instances, the catalog none", s.Instances)
	}
}

// slowSnapshot holds every Snapshot read until gate is closed.
type slowSnapshot struct {
	*memSource
	entered chan struct{}
	gate    chan struct{}
}

func (s *slowSnapshot) Snapshot(ctx context.Context) (Snapshot, error) {
	select {
	case s.entered <- struct{}{}:
	default:
	}
	<-s.gate
	return s.memSource.Snapshot(ctx)
}

// A writer's Publish must not wait for the first watcher's
// snapshot read (up to 10 s on a slow catalog).
func TestPublishDoesNotWaitForFirstSnapshot(t *testing.T) {
	src := &slowSnapshot{memSource: newMem(), entered: make(chan struct{}, 1), gate: make(chan struct{})}
	h := New(src, Options{})
	t.Cleanup(h.Close)
	var once sync.Once
	release := func() { once.Do(func() { close(src.gate) }) }
	t.Cleanup(release) // before Close, which waits for the read
	watched := make(chan error, 1)
	go func() {
		_, err := h.Watch(context.Background(), switchboard.Query{})
		watched <- err
	}()
	select {
	case <-src.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the first Watch never read a snapshot")
	}
	published := make(chan struct{})
	go func() {
		in := inst("w", time.Minute)
		in.LastSeen = time.Now()
		src.put(in)
		h.Publish(Batch{Changes: []Change{{Seq: 1, ID: "w", Instance: in, Found: true}}, Seq: 1, Now: time.Now()})
		close(published)
	}()
	select {
	case <-published:
	case <-time.After(10 * time.Second):
		t.Fatal("Publish waited for the watcher's snapshot read")
	}
	release()
	select {
	case err := <-watched:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Watch did not return after its snapshot read")
	}
}

// beatAt renews a row with a given timestamp and logs nothing: a heartbeat
// whose commit lands after its timestamp.
func (m *memSource) beatAt(id string, at time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	in := m.rows[id]
	in.LastSeen = at
	m.rows[id] = in
}

// nextWithin is next with its own deadline.
func nextWithin(t *testing.T, ch <-chan switchboard.Event, d time.Duration) (switchboard.Event, bool) {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatal("watch channel closed")
			}
			if ev.Kind == switchboard.EventSynced {
				continue
			}
			return ev, true
		case <-timeout:
			return switchboard.Event{}, false
		}
	}
}

// An instance expired because its renewal committed after
// the hub read the renewals is re-checked on its own, not only when another
// instance comes due or at the next full resync.
func TestFalselyExpiredInstanceIsRechecked(t *testing.T) {
	m := newMem()
	h := New(m, Options{PollInterval: time.Hour})
	defer h.Close()
	m.put(inst("a", 500*time.Millisecond))
	ch, err := h.Watch(context.Background(), switchboard.Query{})
	if err != nil {
		t.Fatal(err)
	}
	next(t, ch)
	if ev := next(t, ch); ev.Kind != switchboard.EventRemoved || ev.Reason != switchboard.ReasonExpired {
		t.Fatalf("want removed/expired, got %+v", ev)
	}
	// The renewal that was in flight lands now, stamped before the expiry,
	// and the instance goes on heartbeating (unlogged: not stale then).
	m.beatAt("a", time.Now().Add(-200*time.Millisecond))
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tk := time.NewTicker(100 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
				m.beatAt("a", time.Now())
			}
		}
	}()
	ev, ok := nextWithin(t, ch, 10*time.Second)
	if !ok {
		t.Fatal("the falsely expired instance was not re-checked within 10 s (poll interval 1 h)")
	}
	if ev.Kind != switchboard.EventAdded || ev.Instance.ID != "a" {
		t.Fatalf("want a added back, got %+v", ev)
	}
}

// After an outage each instance gets its own TTL of grace,
// not the largest TTL in the catalog.
func TestPostOutageGraceIsPerInstance(t *testing.T) {
	m := newMem()
	h := New(m, Options{PollInterval: time.Hour})
	defer h.Close()
	m.put(inst("long", 24*time.Hour))
	m.put(inst("short", 300*time.Millisecond))
	ch := watchIntoOutage(t, h, m)
	quiet(t, ch, 600*time.Millisecond) // past short's TTL: nothing expires while unreachable
	m.setDown(false)
	recovered := time.Now()
	ev, ok := nextWithin(t, ch, 10*time.Second)
	if !ok {
		t.Fatal("short (ttl 300ms, never renewed) did not expire within 10 s of recovery")
	}
	if ev.Kind != switchboard.EventRemoved || ev.Instance.ID != "short" || ev.Reason != switchboard.ReasonExpired {
		t.Fatalf("want short removed/expired, got %+v", ev)
	}
	// Never before its own grace (a lower bound cannot flake).
	if since := time.Since(recovered); since < 300*time.Millisecond {
		t.Fatalf("expired %v after recovery, inside its grace of one TTL", since)
	}
	if s := h.Stats(); s.Active != 1 {
		t.Fatalf("stats: %+v", s)
	}
}

// beaters renews each id of a group every period, staggered as separate
// processes are, until its group is frozen or stopped.
type beaters struct {
	m      *memSource
	mu     sync.Mutex
	frozen map[string]bool
	stop   chan struct{}
	wg     sync.WaitGroup
}

func startBeaters(m *memSource, ids []string, every time.Duration) *beaters {
	b := &beaters{m: m, frozen: map[string]bool{}, stop: make(chan struct{})}
	for i, id := range ids {
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			time.Sleep(time.Duration(i) * every / time.Duration(len(ids)))
			tk := time.NewTicker(every)
			defer tk.Stop()
			for {
				select {
				case <-b.stop:
					return
				case <-tk.C:
					b.mu.Lock()
					f := b.frozen[id]
					b.mu.Unlock()
					if !f {
						m.beat(id)
					}
				}
			}
		}()
	}
	return b
}

func (b *beaters) freeze(ids []string, f bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, id := range ids {
		b.frozen[id] = f
	}
}

func (b *beaters) close() { close(b.stop); b.wg.Wait() }

// Instances renewed by separate processes have deadlines spread
// over a heartbeat interval; freezing them all must engage
// self-preservation (judged over a window), though each check sees only
// one or two due. A crash of a few expires on time, during a hold and
// outside one.
func TestSelfPreservationJudgesAWindow(t *testing.T) {
	const ttl, every = 800 * time.Millisecond, 200 * time.Millisecond
	m := newMem()
	h := New(m, Options{PollInterval: time.Hour})
	defer h.Close()
	var ids []string
	for i := range 20 {
		id := fmt.Sprintf("p%02d", i)
		ids = append(ids, id)
		m.put(inst(id, ttl))
	}
	m.put(inst("extra", ttl))
	b := startBeaters(m, append(slices.Clone(ids), "extra"), every)
	defer b.close()
	ch, err := h.Watch(context.Background(), switchboard.Query{})
	if err != nil {
		t.Fatal(err)
	}
	for range 21 {
		next(t, ch)
	}
	quiet(t, ch, 2*ttl) // steady heartbeats: no event

	// Freeze 18, and 2 crash at the same moment (they never come back).
	b.freeze(ids, true)
	testkit.WaitUntil(t, "self-preservation to engage", func() bool { return h.Stats().Preserving })
	quiet(t, ch, 2*ttl)
	if s := h.Stats(); !s.Preserving || s.HeldExpirations != 20 || s.SelfPreservationEvents != 1 {
		t.Fatalf("stats during the hold: %+v", s)
	}
	// A crash during the hold of others: not held, expires.
	b.freeze([]string{"extra"}, true)
	if ev := next(t, ch); ev.Kind != switchboard.EventRemoved || ev.Instance.ID != "extra" || ev.Reason != switchboard.ReasonExpired {
		t.Fatalf("want extra removed/expired during the hold, got %+v", ev)
	}
	b.freeze([]string{"extra"}, false)
	if ev := next(t, ch); ev.Kind != switchboard.EventAdded || ev.Instance.ID != "extra" {
		t.Fatalf("want extra added back, got %+v", ev)
	}
	// 18 resume: the hold is released and the 2 crashed expire, nobody else.
	b.freeze(ids[2:], false)
	removed := map[string]bool{}
	for len(removed) < 2 {
		ev := next(t, ch)
		if ev.Kind != switchboard.EventRemoved || ev.Reason != switchboard.ReasonExpired || (ev.Instance.ID != ids[0] && ev.Instance.ID != ids[1]) {
			t.Fatalf("after the release want %s and %s removed/expired, got %+v", ids[0], ids[1], ev)
		}
		removed[ev.Instance.ID] = true
	}
	quiet(t, ch, 2*ttl)
	if s := h.Stats(); s.Preserving || s.Active != 19 {
		t.Fatalf("stats after the release: %+v", s)
	}
}

// Each wait before a full resync is at most the period and at least four
// fifths of it, and the waits differ, so that hubs started together drift
// apart.
func TestResyncAfterStaysWithinThePeriod(t *testing.T) {
	const every = 30 * time.Second
	lo, hi := every, time.Duration(0)
	for range 1000 {
		d := resyncAfter(every)
		if d < every*4/5 || d > every {
			t.Fatalf("resyncAfter(%s) = %s, want within [%s, %s]", every, d, every*4/5, every)
		}
		lo, hi = min(lo, d), max(hi, d)
	}
	if hi-lo < every/10 {
		t.Fatalf("1,000 waits spread over %s only (%s to %s): they should drift over a fifth of %s", hi-lo, lo, hi, every)
	}
	for _, tiny := range []time.Duration{1, 4, 5} {
		if d := resyncAfter(tiny); d < tiny*4/5 || d > tiny {
			t.Fatalf("resyncAfter(%s) = %s", tiny, d)
		}
	}
}

// TestRenewalDuringOutageExpiresOnce: an instance that renewed during an
// outage of the watching process's connection (other processes still reach
// the catalog), then stopped, is renewed by the read after the recovery
// inside its post-outage grace. The renewal does not change when it is due
// (the grace's end), and must not schedule it a second time: it is removed
// once, not twice.
func TestRenewalDuringOutageExpiresOnce(t *testing.T) {
	m := newMem()
	h := New(m, Options{PollInterval: time.Hour})
	defer h.Close()
	const ttl = 300 * time.Millisecond
	m.put(inst("long", 24*time.Hour))
	m.put(inst("short", ttl))
	ch := watchIntoOutage(t, h, m)
	m.beat("short") // within its TTL: no log entry, a renewal only
	beat := time.Now()
	testkit.WaitUntil(t, "short's renewal to run out", func() bool { return time.Since(beat) > ttl })
	m.setDown(false)
	if ev := next(t, ch); ev.Kind != switchboard.EventRemoved || ev.Instance.ID != "short" || ev.Reason != switchboard.ReasonExpired {
		t.Fatalf("want short removed/expired, got %s %s %s", ev.Kind, ev.Reason, ev.Instance.ID)
	}
	// Any second removal was queued with the first, before this change.
	m.put(inst("z", time.Hour))
	h.Notify()
	if ev := next(t, ch); ev.Kind != switchboard.EventAdded || ev.Instance.ID != "z" {
		t.Fatalf("want z added, got %s %s %s", ev.Kind, ev.Reason, ev.Instance.ID)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if e := h.entries["long"]; e == nil || e.expired {
		t.Fatal("long expired")
	}
}

// watchIntoOutage watches h, reads the snapshot of m's two instances, then
// takes m down and waits for the error event.
func watchIntoOutage(t *testing.T, h *Hub, m *memSource) <-chan switchboard.Event {
	t.Helper()
	ch, err := h.Watch(context.Background(), switchboard.Query{})
	if err != nil {
		t.Fatal(err)
	}
	next(t, ch)
	next(t, ch)
	m.setDown(true)
	h.Notify()
	if ev := next(t, ch); ev.Kind != switchboard.EventError {
		t.Fatalf("want error, got %+v", ev)
	}
	return ch
}
