package discovery_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/discovery"
	"github.com/switchboard-io/switchboard/internal/testkit"
	_ "github.com/switchboard-io/switchboard/sqlite"
)

func inst(name, cp string, ttl time.Duration) switchboard.Instance {
	return switchboard.Instance{Name: name, Type: "writer", Address: "127.0.0.1:1", Capabilities: []string{cp}, TTL: ttl}
}

func TestCacheFollowsCatalog(t *testing.T) {
	cat := testkit.OpenSQLite(t)
	ctx := context.Background()
	a, _ := cat.Register(ctx, inst("a", "storage", time.Minute))
	c, err := discovery.New(ctx, cat, discovery.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The snapshot is in place when New returns.
	if got := c.ByCapability("storage"); len(got) != 1 || got[0].ID != a.ID {
		t.Fatalf("snapshot: %+v", got)
	}
	b, _ := cat.Register(ctx, inst("b", "storage", 300*time.Millisecond))
	testkit.WaitUntil(t, "b in cache", func() bool { return len(c.ByCapability("storage")) == 2 })
	if _, ok := c.Get(b.ID); !ok {
		t.Fatal("Get(b) missing")
	}
	if got := c.Lookup(switchboard.Query{Name: "b"}); len(got) != 1 || got[0].ID != b.ID {
		t.Fatalf("Lookup by name: %+v", got)
	}
	// b stops heartbeating: the cache drops it by itself, no poll, no reap.
	testkit.WaitUntil(t, "b to expire", func() bool { return len(c.ByCapability("storage")) == 1 })
	if _, ok := c.Get(b.ID); ok {
		t.Fatal("expired instance still served")
	}
	if err := cat.Deregister(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "a to leave", func() bool { return len(c.ByCapability("storage")) == 0 })
	if _, ok := c.PickRoundRobin("storage"); ok {
		t.Fatal("picked from an empty set")
	}
}

func TestPicks(t *testing.T) {
	cat := testkit.OpenSQLite(t)
	ctx := context.Background()
	want := map[string]bool{}
	for i := 0; i < 3; i++ {
		in, _ := cat.Register(ctx, inst(fmt.Sprintf("q%d", i), "query", time.Minute))
		want[in.ID] = true
	}
	c, err := discovery.New(ctx, cat, discovery.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	counts := map[string]int{}
	for i := 0; i < 30; i++ {
		in, ok := c.PickRoundRobin("query")
		if !ok {
			t.Fatal("no pick")
		}
		counts[in.ID]++
	}
	for id := range want {
		if counts[id] != 10 {
			t.Fatalf("round robin uneven: %v", counts)
		}
	}
	seen := map[string]bool{}
	for i := 0; i < 300; i++ {
		in, _ := c.PickRandom("query")
		if !want[in.ID] {
			t.Fatalf("random pick outside the set: %s", in.ID)
		}
		seen[in.ID] = true
	}
	if len(seen) != 3 {
		t.Fatalf("random never picked some instances: %v", seen)
	}
}

// chanCatalog is a Catalog whose Watch stream the test writes: a fake for
// the cache's own logic (stale marking), where no real outage is needed.
// It has one stream: a watch after the first finds the catalog closed.
type chanCatalog struct {
	switchboard.Catalog
	ch      chan switchboard.Event
	watched atomic.Bool
}

func (c *chanCatalog) Watch(ctx context.Context, q switchboard.Query) (<-chan switchboard.Event, error) {
	if c.watched.Swap(true) {
		return nil, switchboard.ErrClosed
	}
	return c.ch, nil
}

func TestCacheServesLastKnownSetWhenCatalogFails(t *testing.T) {
	fc := &chanCatalog{ch: make(chan switchboard.Event, 16)}
	in := inst("a", "storage", time.Minute)
	in.ID = "a1"
	fc.ch <- switchboard.Event{Kind: switchboard.EventAdded, Instance: in}
	fc.ch <- switchboard.Event{Kind: switchboard.EventSynced}
	c, err := discovery.New(context.Background(), fc, discovery.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer close(fc.ch)
	boom := errors.New("dial tcp: connection refused")
	fc.ch <- switchboard.Event{Kind: switchboard.EventError, Err: boom}
	testkit.WaitUntil(t, "stale", func() bool { s, _ := c.Stale(); return s })
	if _, err := c.Stale(); !errors.Is(err, boom) {
		t.Fatalf("stale error = %v", err)
	}
	if got := c.ByCapability("storage"); len(got) != 1 {
		t.Fatalf("last known set not served during the outage: %+v", got)
	}
	fc.ch <- switchboard.Event{Kind: switchboard.EventSynced}
	testkit.WaitUntil(t, "fresh", func() bool { s, _ := c.Stale(); return !s })
}

// BenchmarkLookupByCapability measures cached lookups and picks among
// 10,000 and 100,000 instances: each has one of 20 capabilities (a bucket
// of n/20) and the capability "all" (a bucket of n).
//
// The fleet arrives in id order, which scatters the members of a
// capability across memory (each is in a different cache line, and mostly
// a different page, from the one before); "/snapshot-order" sends it as a
// catalog's snapshot comes, by name then id, so that the replicas of a
// service, which share their capabilities, are allocated side by side.
func BenchmarkLookupByCapability(b *testing.B) {
	for _, n := range []int{10000, 100000, -100000} {
		name := fmt.Sprintf("n=%d", n)
		if n < 0 {
			n = -n
			name = fmt.Sprintf("n=%d/snapshot-order", n)
		}
		sorted := strings.HasSuffix(name, "snapshot-order")
		b.Run(name, func(b *testing.B) {
			c := bigCache(b, n, sorted)
			for _, cp := range []string{"cap-7", "all"} {
				b.Run("ByCapability/"+cp, func(b *testing.B) {
					b.ReportAllocs()
					c.ByCapability(cp) // the listing is built on first use per version
					defer discovery.ReportCPU(b)()
					k := 0
					for b.Loop() {
						k += len(c.ByCapability(cp))
					}
					if k == 0 {
						b.Fatal("no instances")
					}
				})
				b.Run("Count/"+cp, func(b *testing.B) {
					b.ReportAllocs()
					defer discovery.ReportCPU(b)()
					q := switchboard.Query{Capability: cp}
					for b.Loop() {
						if c.Count(q) == 0 {
							b.Fatal("no instances")
						}
					}
				})
				b.Run("PickRoundRobin/"+cp, func(b *testing.B) {
					b.ReportAllocs()
					defer discovery.ReportCPU(b)()
					for b.Loop() {
						if _, ok := c.PickRoundRobin(cp); !ok {
							b.Fatal("no pick")
						}
					}
				})
				b.Run("PickRandom/"+cp, func(b *testing.B) {
					b.ReportAllocs()
					defer discovery.ReportCPU(b)()
					for b.Loop() {
						if _, ok := c.PickRandom(cp); !ok {
							b.Fatal("no pick")
						}
					}
				})
			}
			b.Run("Get", func(b *testing.B) {
				b.ReportAllocs()
				ids := make([]string, 4096)
				for k := range ids {
					ids[k] = fmt.Sprintf("id-%06d", k*7919%n)
				}
				i := 0
				defer discovery.ReportCPU(b)()
				for b.Loop() {
					if _, ok := c.Get(ids[i%len(ids)]); !ok {
						b.Fatal("no instance")
					}
					i++
				}
			})
			b.Run("PickRoundRobinParallel/cap-7", func(b *testing.B) {
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						c.PickRoundRobin("cap-7")
					}
				})
			})
			// Random picks from every core at once.
			b.Run("PickRandomParallel/all", func(b *testing.B) {
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						c.PickRandom("all")
					}
				})
			})
		})
	}
}

// bigCache is a cache of n instances over a fake catalog, sent in id
// order or, sorted, by name then id.
func bigCache(b *testing.B, n int, sorted bool) *discovery.Cache {
	fleet := make([]switchboard.Instance, n)
	for i := range fleet {
		fleet[i] = discovery.FleetInstance(i)
	}
	if sorted {
		slices.SortFunc(fleet, func(x, y switchboard.Instance) int {
			return cmp.Or(strings.Compare(x.Name, y.Name), strings.Compare(x.ID, y.ID))
		})
	}
	fc := &chanCatalog{ch: make(chan switchboard.Event, 1024)}
	go func() {
		for _, in := range fleet {
			fc.ch <- switchboard.Event{Kind: switchboard.EventAdded, Instance: in}
		}
		fc.ch <- switchboard.Event{Kind: switchboard.EventSynced}
	}()
	c, err := discovery.New(context.Background(), fc, discovery.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { close(fc.ch); c.Close() })
	return c
}

// BenchmarkExpiryLag measures how late the cache drops a crashed instance:
// the time from the end of its TTL (last heartbeat + TTL, on the catalog's
// clock, which for SQLite is this host's) to its removal from the cache.
// Instances are registered a few milliseconds apart and never heartbeat.
func BenchmarkExpiryLag(b *testing.B) {
	cat := testkit.OpenSQLite(b)
	ctx := context.Background()
	const ttl = 300 * time.Millisecond
	var mu sync.Mutex
	deadline := map[string]time.Time{}
	var lags []time.Duration
	done := make(chan struct{})
	c, err := discovery.New(ctx, cat, discovery.Options{OnEvent: func(ev switchboard.Event) {
		if ev.Kind != switchboard.EventRemoved {
			return
		}
		at := time.Now()
		mu.Lock()
		defer mu.Unlock()
		if d, ok := deadline[ev.Instance.ID]; ok {
			lags = append(lags, at.Sub(d))
			delete(deadline, ev.Instance.ID)
			if len(deadline) == 0 {
				close(done)
			}
		}
	}})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		in, err := cat.Register(ctx, inst(fmt.Sprintf("crash-%d", i), "x", ttl))
		if err != nil {
			b.Fatal(err)
		}
		mu.Lock()
		deadline[in.ID] = in.LastSeen.Add(ttl)
		mu.Unlock()
		time.Sleep(3 * time.Millisecond)
	}
	select {
	case <-done:
	case <-time.After(time.Minute):
		b.Fatal("not every instance expired")
	}
	b.StopTimer()
	slices.Sort(lags)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(lags[len(lags)/2]), "p50-lag-ms")
	b.ReportMetric(ms(lags[min(len(lags)-1, len(lags)*99/100)]), "p99-lag-ms")
	b.ReportMetric(ms(lags[len(lags)-1]), "max-lag-ms")
	if lags[0] < 0 {
		b.Fatalf("an instance was removed %v before its TTL was up", -lags[0])
	}
}

// OnEvent runs once lookups reflect the event (or a later change of the
// same burst), never before.
func TestOnEventSeesItsOwnChange(t *testing.T) {
	fc := &chanCatalog{ch: make(chan switchboard.Event, 64)}
	fc.ch <- switchboard.Event{Kind: switchboard.EventSynced}
	var c *discovery.Cache
	ready := make(chan struct{})
	bad := make(chan string, 64)
	seen := make(chan struct{}, 64)
	c, err := discovery.New(context.Background(), fc, discovery.Options{OnEvent: func(ev switchboard.Event) {
		if ev.Kind == switchboard.EventSynced {
			return // the snapshot's, delivered before New returns
		}
		<-ready
		_, ok := c.Get(ev.Instance.ID)
		switch {
		case ev.Kind == switchboard.EventAdded && !ok && ev.Instance.ID != "b3": // b3 leaves later in the burst
			bad <- "added but not in the cache: " + ev.Instance.ID
		case ev.Kind == switchboard.EventRemoved && ok:
			bad <- "removed but still in the cache: " + ev.Instance.ID
		}
		seen <- struct{}{}
	}})
	if err != nil {
		t.Fatal(err)
	}
	close(ready)
	defer close(fc.ch)
	// A burst: all queued before the cache reads any of them.
	for i := 0; i < 10; i++ {
		in := inst(fmt.Sprintf("b%d", i), "x", time.Minute)
		in.ID = in.Name
		fc.ch <- switchboard.Event{Kind: switchboard.EventAdded, Instance: in}
	}
	fc.ch <- switchboard.Event{Kind: switchboard.EventRemoved, Instance: switchboard.Instance{ID: "b3"}}
	for i := 0; i < 11; i++ {
		<-seen
	}
	close(bad)
	for msg := range bad {
		t.Error(msg)
	}
}

func TestSubscribe(t *testing.T) {
	cat := testkit.OpenSQLite(t)
	ctx := context.Background()
	c, err := discovery.New(ctx, cat, discovery.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	kicks := make(chan int, 16)
	cancel := c.Subscribe(func() { kicks <- len(c.ByCapability("storage")) })
	cat.Register(ctx, inst("a", "storage", time.Minute))
	select {
	case n := <-kicks:
		if n != 1 {
			t.Fatalf("subscriber ran before the view had the change: %d instances", n)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no notification")
	}
	cancel()
	cat.Register(ctx, inst("b", "storage", time.Minute))
	testkit.WaitUntil(t, "b", func() bool { return len(c.ByCapability("storage")) == 2 })
	select {
	case <-kicks:
		t.Fatal("notified after unsubscribing")
	default:
	}
}

// BenchmarkHeapPerInstance measures the heap a cache of 100,000 instances
// holds (the live heap after a collection, less the one before it was
// built), per instance. Each instance is FleetInstance's: two capabilities
// and two metadata keys; "pod-unique" gives each its own pod name (so its
// metadata map is its own), "shared-metadata" gives all of a zone the same
// metadata. The catalog is a fake that hands over events of their own,
// whose strings, slices and maps the cache holds as they come: this is the
// cache with nothing shared (BenchmarkViewHeapPerInstance measures it
// beside a catalog's mirror, whose instances it shares).
func BenchmarkHeapPerInstance(b *testing.B) {
	const n = 100000
	for _, shape := range []string{"pod-unique", "shared-metadata", "unique-capability"} {
		b.Run(shape, func(b *testing.B) {
			for b.Loop() {
				before := liveHeap()
				fc := &chanCatalog{ch: make(chan switchboard.Event, 64)}
				go func() {
					for i := 0; i < n; i++ {
						in := discovery.FleetInstance(i)
						switch shape {
						case "shared-metadata":
							delete(in.Metadata, "pod")
							in.Metadata["team"] = "storage"
						case "unique-capability": // a capability of its own, besides "all"
							in.Capabilities = []string{"instance-" + in.ID, "all"}
						}
						fc.ch <- switchboard.Event{Kind: switchboard.EventAdded, Instance: in}
					}
					fc.ch <- switchboard.Event{Kind: switchboard.EventSynced}
				}()
				c, err := discovery.New(context.Background(), fc, discovery.Options{})
				if err != nil {
					b.Fatal(err)
				}
				after := liveHeap()
				if c.Count(switchboard.Query{}) != n {
					b.Fatal("not every instance cached")
				}
				b.ReportMetric(float64(after-before)/n, "heap-B/instance")
				close(fc.ch)
				c.Close()
			}
		})
	}
}

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestReadersNeverSeeHalfAChange moves instances between two capabilities
// (and names) with single updates while readers take snapshots: in every
// snapshot each instance is in exactly one of the two buckets, under every
// index, and the picks agree. Run with -race, it also checks that readers
// and the writer share nothing unpublished.
func TestReadersNeverSeeHalfAChange(t *testing.T) {
	const n = 200
	fc := &chanCatalog{ch: make(chan switchboard.Event, n+1)}
	mk := func(i int, side string) switchboard.Instance {
		return switchboard.Instance{ID: fmt.Sprintf("m-%03d", i), Name: "svc-" + side, Type: side,
			Address: "10.0.0.1:1", Capabilities: []string{"cap-" + side, "both"}}
	}
	for i := 0; i < n; i++ {
		fc.ch <- switchboard.Event{Kind: switchboard.EventAdded, Instance: mk(i, "a")}
	}
	fc.ch <- switchboard.Event{Kind: switchboard.EventSynced}
	c, err := discovery.New(context.Background(), fc, discovery.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				s := c.Snapshot()
				a, b := s.ByCapability("cap-a"), s.ByCapability("cap-b")
				na, nb := s.ByName("svc-a"), s.ByName("svc-b")
				switch {
				case len(a)+len(b) != n, len(na)+len(nb) != n, s.Count(switchboard.Query{Capability: "both"}) != n:
					errs <- fmt.Sprintf("half a change: %d + %d by capability, %d + %d by name", len(a), len(b), len(na), len(nb))
					return
				case len(a) != len(na) || len(a) != s.Count(switchboard.Query{Type: "a"}):
					errs <- fmt.Sprintf("indexes disagree: %d by capability, %d by name", len(a), len(na))
					return
				}
				if in, ok := s.PickRandom("cap-a"); ok && in.Name != "svc-a" {
					errs <- "picked " + in.Name + " from cap-a"
					return
				}
				if in, ok := s.PickRoundRobin("cap-b"); ok && in.Name != "svc-b" {
					errs <- "round robin gave " + in.Name + " from cap-b"
					return
				}
			}
		}()
	}
	rng := rand.New(rand.NewPCG(1, 2))
	side := make([]string, n)
	for i := range side {
		side[i] = "a"
	}
	for k := 0; k < 5000; k++ {
		i := rng.IntN(n)
		side[i] = map[string]string{"a": "b", "b": "a"}[side[i]]
		fc.ch <- switchboard.Event{Kind: switchboard.EventUpdated, Instance: mk(i, side[i])}
	}
	marker := switchboard.Instance{ID: "marker", Name: "marker", Address: "10.0.0.1:1"}
	fc.ch <- switchboard.Event{Kind: switchboard.EventAdded, Instance: marker}
	testkit.WaitUntil(t, "the cache to apply every update", func() bool { _, ok := c.Get("marker"); return ok })
	close(stop)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	close(fc.ch)
}

// TestNewSaysWhatIsWrong: a nil catalog is an error, not a panic, and a
// context that ends before the snapshot is complete is named as the cause,
// not a closed catalog.
func TestNewSaysWhatIsWrong(t *testing.T) {
	if _, err := discovery.New(context.Background(), nil, discovery.Options{}); !errors.Is(err, switchboard.ErrInvalid) {
		t.Fatalf("nil catalog: %v, want ErrInvalid", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cat := &halfWatch{ch: make(chan switchboard.Event, 1), cancel: cancel}
	_, err := discovery.New(ctx, cat, discovery.Options{})
	if !errors.Is(err, context.Canceled) || errors.Is(err, switchboard.ErrClosed) {
		t.Fatalf("context cancelled during the snapshot: %v, want context.Canceled", err)
	}
}

// halfWatch is a catalog whose watch sends one added event, then ends as a
// hub's does when the watcher's context ends (here: ended by the watch
// itself, before synced).
type halfWatch struct {
	switchboard.Catalog
	ch     chan switchboard.Event
	cancel context.CancelFunc
}

func (h *halfWatch) Watch(ctx context.Context, q switchboard.Query) (<-chan switchboard.Event, error) {
	h.ch <- switchboard.Event{Kind: switchboard.EventAdded, Instance: inst("a", "storage", time.Minute)}
	h.cancel()
	go func() {
		<-ctx.Done()
		close(h.ch)
	}()
	return h.ch, nil
}

// seqCatalog's Watch takes its answers, a stream or an error, from watches,
// in order, as the test gives them.
type seqCatalog struct {
	switchboard.Catalog
	watches chan watchAnswer
}

type watchAnswer struct {
	ch  chan switchboard.Event
	err error
}

func (c *seqCatalog) Watch(ctx context.Context, q switchboard.Query) (<-chan switchboard.Event, error) {
	select {
	case a := <-c.watches:
		return a.ch, a.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// TestCacheWatchesAgainWhenTheWatchEnds: a watch that ends while the cache
// is open leaves the cache serving the last known set, stale; the cache
// watches again (through a failed attempt, whose error it reports), and at
// the new watch's synced drops what that watch did not send, telling
// OnEvent and the subscribers.
func TestCacheWatchesAgainWhenTheWatchEnds(t *testing.T) {
	cat := &seqCatalog{watches: make(chan watchAnswer, 4)}
	a1, a2 := inst("a", "storage", time.Minute), inst("a", "storage", time.Minute)
	a1.ID, a2.ID = "a1", "a2"
	w1 := make(chan switchboard.Event, 4)
	w1 <- switchboard.Event{Kind: switchboard.EventAdded, Instance: a1}
	w1 <- switchboard.Event{Kind: switchboard.EventAdded, Instance: a2}
	w1 <- switchboard.Event{Kind: switchboard.EventSynced}
	cat.watches <- watchAnswer{ch: w1}
	events := make(chan switchboard.Event, 16)
	c, err := discovery.New(context.Background(), cat, discovery.Options{
		Logger:  slog.New(slog.DiscardHandler),
		OnEvent: func(ev switchboard.Event) { events <- ev },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var mu sync.Mutex
	var removed []string
	_, cancel := c.SubscribeChanges(func(_ *discovery.Snapshot, changes []discovery.Change) {
		mu.Lock()
		defer mu.Unlock()
		for _, ch := range changes {
			if ch.New == nil {
				removed = append(removed, ch.Old.ID)
			}
		}
	})
	defer cancel()

	close(w1)
	testkit.WaitUntil(t, "stale after the watch ended", func() bool { s, _ := c.Stale(); return s })
	if _, err := c.Stale(); !errors.Is(err, switchboard.ErrClosed) {
		t.Fatalf("stale error after the watch ended = %v, want ErrClosed", err)
	}
	if n := len(c.ByCapability("storage")); n != 2 {
		t.Fatalf("the last known set is not served while watching again: %d instances", n)
	}
	refused := errors.New("dial tcp: connection refused")
	cat.watches <- watchAnswer{err: refused}
	testkit.WaitUntil(t, "the failed watch reported", func() bool { _, err := c.Stale(); return errors.Is(err, refused) })

	a1.Address = "127.0.0.1:2"
	w2 := make(chan switchboard.Event, 4)
	w2 <- switchboard.Event{Kind: switchboard.EventAdded, Instance: a1}
	w2 <- switchboard.Event{Kind: switchboard.EventSynced}
	cat.watches <- watchAnswer{ch: w2}
	testkit.WaitUntil(t, "fresh after the new watch's synced", func() bool { s, _ := c.Stale(); return !s })
	if got := c.ByCapability("storage"); len(got) != 1 || got[0].ID != "a1" || got[0].Address != "127.0.0.1:2" {
		t.Fatalf("after the resync: %+v, want a1 at its new address only", got)
	}
	mu.Lock()
	if !slices.Equal(removed, []string{"a2"}) {
		t.Errorf("subscribers were told of the removals %v, want [a2]", removed)
	}
	mu.Unlock()
	var kinds []string
	for len(events) > 0 {
		ev := <-events
		kinds = append(kinds, strings.TrimSpace(fmt.Sprint(ev.Kind, " ", ev.Reason, " ", ev.Instance.ID)))
	}
	want := []string{"added  a1", "added  a2", "synced", "added  a1", "removed unknown a2", "synced"}
	if !slices.Equal(kinds, want) {
		t.Errorf("OnEvent saw %q, want %q", kinds, want)
	}
}
