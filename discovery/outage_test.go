package discovery_test

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/discovery"
	"github.com/switchboard-io/switchboard/internal/testkit"
	_ "github.com/switchboard-io/switchboard/postgres"
	"github.com/switchboard-io/switchboard/postgres/pgtest"
)

// heldWatch passes a catalog's watch through up to the end of its snapshot
// (synced) and holds back what follows until release is closed: whatever
// the catalog says right after synced has not reached the cache yet when
// New returns, as can happen with any catalog (the cache applies it on its
// own goroutine). WatchStats is the catalog's.
type heldWatch struct {
	switchboard.Catalog
	stats   switchboard.WatchStatser
	release chan struct{}
}

func (h *heldWatch) WatchStats() switchboard.WatchStats { return h.stats.WatchStats() }

func (h *heldWatch) Watch(ctx context.Context, q switchboard.Query) (<-chan switchboard.Event, error) {
	in, err := h.Catalog.Watch(ctx, q)
	if err != nil {
		return nil, err
	}
	out := make(chan switchboard.Event)
	go func() {
		defer close(out)
		synced := false
		for ev := range in {
			if synced {
				select {
				case <-h.release:
				case <-ctx.Done():
					return
				}
			}
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
			synced = synced || ev.Kind == switchboard.EventSynced
		}
	}()
	return out, nil
}

// TestNewDuringOutageIsStale: a cache created while the catalog's hub
// already knows it cannot read the catalog (PostgreSQL behind a cut proxy)
// is stale from the moment New returns, serving the snapshot the hub
// holds, not fresh until the watch's error event arrives; it stays stale
// when that event arrives, and is fresh again once the catalog is back.
func TestNewDuringOutageIsStale(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db, drop, err := pgtest.NewDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drop)
	dsn := pgtest.Schema(t, db)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testkit.NewProxy(t, u.Host)
	u.Host = proxy.Addr()
	quiet := slog.New(slog.DiscardHandler)
	open := func(dsn string) switchboard.Catalog {
		cat, err := switchboard.Open(ctx, dsn, switchboard.Options{Logger: quiet, PollInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cat.Close() })
		return cat
	}
	services := open(dsn)
	client := open(u.String())
	stats := client.(switchboard.WatchStatser)

	// A live, heartbeating instance: its renewals are due every TTL, and
	// the first read of them through the cut proxy tells the hub.
	in := inst("api", "storage", time.Second)
	in.ID = "a"
	reg, err := switchboard.Bootstrap(ctx, services, in, switchboard.BootstrapOptions{
		HeartbeatInterval: 200 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	// A first cache starts the client's hub, which mirrors the catalog.
	first, err := discovery.New(ctx, client, discovery.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	proxy.CutAll()
	testkit.WaitUntil(t, "the hub to know of the outage", func() bool { return !stats.WatchStats().Healthy })

	held := &heldWatch{Catalog: client, stats: stats, release: make(chan struct{})}
	events := make(chan switchboard.Event, 64)
	cache, err := discovery.New(ctx, held, discovery.Options{Logger: quiet, OnEvent: func(ev switchboard.Event) {
		if ev.Kind == switchboard.EventError || ev.Kind == switchboard.EventSynced {
			events <- ev
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	stale, staleErr := cache.Stale()
	if !stale || staleErr == nil {
		t.Fatalf("new cache during an outage the hub knows of: Stale() = %v, %v; want true and the hub's error", stale, staleErr)
	}
	if want := stats.WatchStats().LastError; want == nil || staleErr.Error() != want.Error() {
		t.Fatalf("stale error %q, want the hub's %v", staleErr, want)
	}
	if got := cache.ByCapability("storage"); len(got) != 1 || got[0].ID != "a" {
		t.Fatalf("new cache during an outage serves %+v, want the hub's last known set", got)
	}
	if ev := recv(t, "the snapshot's synced", events); ev.Kind != switchboard.EventSynced {
		t.Fatalf("first marker %v, want synced (the end of the snapshot)", ev.Kind)
	}

	// The watch's own word on the outage follows: the cache stays stale.
	close(held.release)
	if ev := recv(t, "the watch's error event", events); ev.Kind != switchboard.EventError {
		t.Fatalf("event after the snapshot: %v, want error", ev.Kind)
	}
	if stale, _ := cache.Stale(); !stale {
		t.Fatal("fresh after the watch reported the outage")
	}

	proxy.Restore()
	testkit.WaitUntil(t, "the cache to be fresh again", func() bool { s, _ := cache.Stale(); return !s })
	if got := cache.ByCapability("storage"); len(got) != 1 || got[0].ID != "a" {
		t.Fatalf("after the outage: %+v", got)
	}
}

// statsCatalog reports an outage in its WatchStats, without an error.
type statsCatalog struct {
	*chanCatalog
	st switchboard.WatchStats
}

func (s *statsCatalog) WatchStats() switchboard.WatchStats { return s.st }

// TestNewStaleFromStatsWithoutError: a catalog that reports itself
// unhealthy without saying why still makes a new cache stale, with an
// error that says so; a healthy one does not.
func TestNewStaleFromStatsWithoutError(t *testing.T) {
	for _, healthy := range []bool{false, true} {
		fc := &chanCatalog{ch: make(chan switchboard.Event, 4)}
		in := inst("a", "storage", time.Minute)
		in.ID = "a1"
		fc.ch <- switchboard.Event{Kind: switchboard.EventAdded, Instance: in}
		fc.ch <- switchboard.Event{Kind: switchboard.EventSynced}
		c, err := discovery.New(context.Background(), &statsCatalog{fc, switchboard.WatchStats{Healthy: healthy}},
			discovery.Options{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		stale, err := c.Stale()
		switch {
		case healthy && (stale || err != nil):
			t.Errorf("healthy catalog: Stale() = %v, %v", stale, err)
		case !healthy && (!stale || err == nil):
			t.Errorf("unhealthy catalog: Stale() = %v, %v; want true with an error", stale, err)
		}
		close(fc.ch)
		c.Close()
	}
}

// TestPresumedStaleClearedByWatch: stats that report an outage the watch
// does not (a remote handle's own stats request can fail while its stream
// is fine) make the cache stale only until the watch's first event after
// the snapshot: anything but an error means the catalog is being read.
func TestPresumedStaleClearedByWatch(t *testing.T) {
	for _, first := range []switchboard.EventKind{switchboard.EventAdded, switchboard.EventError} {
		fc := &chanCatalog{ch: make(chan switchboard.Event, 4)}
		fc.ch <- switchboard.Event{Kind: switchboard.EventSynced}
		c, err := discovery.New(context.Background(), &statsCatalog{fc, switchboard.WatchStats{Healthy: false}},
			discovery.Options{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		if stale, _ := c.Stale(); !stale {
			t.Fatal("not stale on unhealthy stats")
		}
		published := make(chan struct{}, 1)
		cancel := c.Subscribe(func() { published <- struct{}{} })
		in := inst("a", "storage", time.Minute)
		in.ID = "a1"
		ev := switchboard.Event{Kind: first, Instance: in, Err: errors.New("unreachable")}
		if first != switchboard.EventError {
			ev.Err = nil
		}
		fc.ch <- ev
		recv(t, "the first event's version", published)
		stale, _ := c.Stale()
		if want := first == switchboard.EventError; stale != want {
			t.Errorf("first event after the snapshot %v: Stale() = %v, want %v", first, stale, want)
		}
		cancel()
		close(fc.ch)
		c.Close()
	}
}

func recv[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		var zero T
		return zero
	}
}
