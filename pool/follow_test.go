package pool

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/discovery"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

// fakeCatalog hands out watch channels the test feeds by hand. Only Watch
// is implemented; the pool needs nothing else.
type fakeCatalog struct {
	switchboard.Catalog
	watches chan chan switchboard.Event
}

func newFakeCatalog() *fakeCatalog {
	return &fakeCatalog{watches: make(chan chan switchboard.Event, 4)}
}

func (c *fakeCatalog) Watch(ctx context.Context, q switchboard.Query) (<-chan switchboard.Event, error) {
	ch := make(chan switchboard.Event, 64)
	c.watches <- ch
	return ch, nil
}

func (c *fakeCatalog) nextWatch(t *testing.T) chan switchboard.Event {
	t.Helper()
	select {
	case ch := <-c.watches:
		return ch
	case <-time.After(waitFor):
		t.Fatal("no watch started")
		return nil
	}
}

func inst(id, name, addr string) switchboard.Instance {
	return switchboard.Instance{ID: id, Name: name, Type: "module", Address: addr}
}

func TestFollowAppliesCatalogEvents(t *testing.T) {
	s1 := startServer(t, nil)
	s2 := startServer(t, nil)
	s3 := startServer(t, nil)
	cat := newFakeCatalog()
	p := newPool(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	followed := make(chan error, 1)
	go func() { followed <- p.Follow(ctx, cat, switchboard.Query{}) }()
	w := cat.nextWatch(t)
	w <- switchboard.Event{Kind: switchboard.EventAdded, Instance: inst("a1", "mod-a", s1.addr)}
	w <- switchboard.Event{Kind: switchboard.EventAdded, Instance: inst("a2", "mod-a", s2.addr)}
	w <- switchboard.Event{Kind: switchboard.EventAdded, Instance: inst("b1", "mod-b", s3.addr)}
	w <- switchboard.Event{Kind: switchboard.EventAdded, Instance: inst("n1", "mod-n", "nats://tinymodule.mod-n.msg")}
	select {
	case <-followed:
		t.Fatal("Follow returned before the snapshot was synced")
	case <-time.After(20 * time.Millisecond):
	}
	w <- switchboard.Event{Kind: switchboard.EventSynced}
	if err := <-followed; err != nil {
		t.Fatal(err)
	}
	// Follow returned after the snapshot: everything is there already.
	mods := p.Modules()
	if len(mods["mod-a"]) != 2 || len(mods["mod-b"]) != 1 || len(mods["mod-n"]) != 1 {
		t.Fatalf("modules: %v", mods)
	}
	if _, err := send(ctx, p, "f.mod-b.n", "x"); err != nil {
		t.Fatal(err)
	}

	// Removed (expired) replica stops receiving.
	w <- switchboard.Event{Kind: switchboard.EventRemoved, Reason: switchboard.ReasonExpired, Instance: inst("a1", "mod-a", s1.addr)}
	testkit.WaitUntil(t, "a1 removed", func() bool { return len(p.Modules()["mod-a"]) == 1 })
	before := s1.calls.Load()
	for i := 0; i < 4; i++ {
		if _, err := send(ctx, p, "f.mod-a.n", "x"); err != nil {
			t.Fatal(err)
		}
	}
	if s1.calls.Load() != before {
		t.Fatal("removed replica still received")
	}

	// Updated address moves the instance.
	w <- switchboard.Event{Kind: switchboard.EventUpdated, Instance: inst("b1", "mod-b", s1.addr)}
	testkit.WaitUntil(t, "b1 moved", func() bool { m := p.Modules()["mod-b"]; return len(m) == 1 && m[0] == s1.addr })
	testkit.WaitUntil(t, "old b1 connection closed", func() bool { return s3.lis.Open.Load() == 0 })

	// A catalog outage keeps the last known set.
	w <- switchboard.Event{Kind: switchboard.EventError, Err: errors.New("catalog unreachable")}
	w <- switchboard.Event{Kind: switchboard.EventError, Err: errors.New("catalog unreachable")}
	time.Sleep(20 * time.Millisecond)
	if mods := p.Modules(); len(mods) != 3 {
		t.Fatalf("outage dropped instances: %v", mods)
	}

	// The watch ends early: Follow watches again, and what vanished in
	// between is removed at the new sync.
	close(w)
	w2 := cat.nextWatch(t)
	w2 <- switchboard.Event{Kind: switchboard.EventAdded, Instance: inst("b1", "mod-b", s1.addr)}
	w2 <- switchboard.Event{Kind: switchboard.EventSynced}
	testkit.WaitUntil(t, "vanished instances removed after resync", func() bool {
		m := p.Modules()
		return len(m) == 1 && len(m["mod-b"]) == 1
	})

	// Stale instance (All watches) counts as gone.
	w2 <- switchboard.Event{Kind: switchboard.EventUpdated, Instance: func() switchboard.Instance {
		in := inst("b1", "mod-b", s1.addr)
		in.Stale = true
		return in
	}()}
	testkit.WaitUntil(t, "stale instance removed", func() bool { return len(p.Modules()) == 0 })
}

func TestFollowEvents(t *testing.T) {
	srv := startServer(t, nil)
	p := newPool(t, Options{})
	ch := make(chan switchboard.Event, 4)
	ch <- switchboard.Event{Kind: switchboard.EventAdded, Instance: inst("i", "mod-e", srv.addr)}
	ch <- switchboard.Event{Kind: switchboard.EventSynced}
	close(ch)
	p.FollowEvents(context.Background(), ch)
	if _, err := send(context.Background(), p, "f.mod-e.n", "x"); err != nil {
		t.Fatal(err)
	}
}

// Follow on a closed pool is refused: no watch is started and no goroutine
// is left behind (Close has already waited for the follow goroutines).
func TestFollowAfterCloseRefused(t *testing.T) {
	cat := newFakeCatalog()
	p := newPool(t, Options{})
	p.Close()
	err := p.Follow(context.Background(), cat, switchboard.Query{})
	if !errors.Is(err, ErrClosed) {
		t.Fatalf("Follow after Close: want ErrClosed, got %v", err)
	}
	select {
	case <-cat.watches:
		t.Fatal("Follow started a watch on a closed pool")
	default:
	}
}

// Follow racing Close: the follow goroutine's WaitGroup.Add must not run
// concurrently with Close's Wait (the race detector reports it), and every
// Follow either starts before Close (and is waited for) or is refused.
func TestFollowRacingClose(t *testing.T) {
	for i := 0; i < 500; i++ {
		cat := &syncedCatalog{}
		p := New(Options{Logger: quiet})
		errc := make(chan error, 1)
		go func() { errc <- p.Follow(context.Background(), cat, switchboard.Query{}) }()
		p.Close()
		if err := <-errc; err != nil && !errors.Is(err, ErrClosed) && !errors.Is(err, context.Canceled) {
			t.Fatalf("Follow: %v", err)
		}
	}
}

// syncedCatalog's watches report an empty synced set at once, then stay
// open until their context ends.
type syncedCatalog struct{ switchboard.Catalog }

func (syncedCatalog) Watch(ctx context.Context, q switchboard.Query) (<-chan switchboard.Event, error) {
	ch := make(chan switchboard.Event, 1)
	ch <- switchboard.Event{Kind: switchboard.EventSynced}
	go func() { <-ctx.Done(); close(ch) }()
	return ch, nil
}

// FollowCache follows a cache the process already has, which holds more
// than the pool wants: only the instances q selects are registered, an
// instance that stops matching q leaves, and the follow ends with the pool.
func TestFollowCache(t *testing.T) {
	srv := startServer(t, nil)
	cat := newFakeCatalog()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type made struct {
		c   *discovery.Cache
		err error
	}
	started := make(chan made, 1)
	go func() {
		c, err := discovery.New(ctx, cat, discovery.Options{Logger: quiet})
		started <- made{c, err}
	}()
	w := cat.nextWatch(t)
	svc := inst("s1", "svc", srv.addr)
	svc.Type = "service"
	w <- switchboard.Event{Kind: switchboard.EventAdded, Instance: inst("m1", "mod-a", srv.addr)}
	w <- switchboard.Event{Kind: switchboard.EventAdded, Instance: svc}
	w <- switchboard.Event{Kind: switchboard.EventSynced}
	m := <-started
	if m.err != nil {
		t.Fatal(m.err)
	}
	c := m.c
	defer c.Close()
	p := New(Options{Logger: quiet})
	p.Start(ctx)
	if err := p.FollowCache(ctx, c, switchboard.Query{Type: ModuleType}); err != nil {
		t.Fatal(err)
	}
	if mods := p.Modules(); len(mods) != 1 || len(mods["mod-a"]) != 1 {
		t.Fatalf("modules after FollowCache: %v", mods)
	}
	w <- switchboard.Event{Kind: switchboard.EventAdded, Instance: inst("m2", "mod-b", srv.addr)}
	testkit.WaitUntil(t, "m2 added", func() bool { return len(p.Modules()["mod-b"]) == 1 })
	moved := inst("m1", "mod-a", srv.addr)
	moved.Type = "service"
	w <- switchboard.Event{Kind: switchboard.EventUpdated, Instance: moved}
	testkit.WaitUntil(t, "m1 gone once it is no module", func() bool { _, ok := p.Modules()["mod-a"]; return !ok })
	if _, ok := p.Modules()["svc"]; ok {
		t.Fatal("an instance of another type was registered")
	}
	p.Close() // waits for the follow's goroutine
	if err := p.FollowCache(ctx, c, switchboard.Query{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("FollowCache on a closed pool: %v, want ErrClosed", err)
	}
}
