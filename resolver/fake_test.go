package resolver_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	grpcresolver "google.golang.org/grpc/resolver"
	"google.golang.org/grpc/serviceconfig"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/discovery"
	"github.com/switchboard-io/switchboard/internal/testkit"
	"github.com/switchboard-io/switchboard/resolver"
)

var errDown = errors.New("catalog down")

// fakeCatalog has one watch stream, written by the test; it feeds a real
// discovery.Cache.
type fakeCatalog struct {
	switchboard.Catalog
	events chan switchboard.Event
}

func (c *fakeCatalog) Watch(ctx context.Context, q switchboard.Query) (<-chan switchboard.Event, error) {
	return c.events, nil
}

// newCache starts a cache on a fake catalog whose snapshot is the given
// instances.
func newCache(t *testing.T, snapshot ...switchboard.Instance) (*discovery.Cache, *fakeCatalog) {
	t.Helper()
	cat := &fakeCatalog{events: make(chan switchboard.Event, 64)}
	for _, in := range snapshot {
		cat.events <- switchboard.Event{Kind: switchboard.EventAdded, Instance: in}
	}
	cat.events <- switchboard.Event{Kind: switchboard.EventSynced}
	c, err := discovery.New(context.Background(), cat, discovery.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { close(cat.events); c.Close() })
	return c, cat
}

func (c *fakeCatalog) send(evs ...switchboard.Event) {
	for _, ev := range evs {
		c.events <- ev
	}
}

func added(in switchboard.Instance) switchboard.Event {
	return switchboard.Event{Kind: switchboard.EventAdded, Instance: in}
}

func removed(in switchboard.Instance) switchboard.Event {
	return switchboard.Event{Kind: switchboard.EventRemoved, Reason: switchboard.ReasonExpired, Instance: in}
}

func byCap(id, cp, addr string) switchboard.Instance {
	return switchboard.Instance{ID: id, Name: "svc-" + id, Type: "module", Address: addr, Capabilities: []string{cp}}
}

func byName(id, name, addr string) switchboard.Instance {
	return switchboard.Instance{ID: id, Name: name, Type: "module", Address: addr}
}

// fakeCC records what the resolver pushes and reports, in order. A push of
// the set already pushed fails the test.
type fakeCC struct {
	grpcresolver.ClientConn
	t      *testing.T
	states chan []string
	errs   chan error
	last   []string // owned by the resolver's goroutine
	pushed bool
	withSC atomic.Bool // the last push carried a service config
}

func newCC(t *testing.T) *fakeCC {
	return &fakeCC{t: t, states: make(chan []string, 64), errs: make(chan error, 64)}
}

// UpdateState records the endpoints as "addr", with "/w=<weight>" when the
// weight is not the default and "/z=<zone>" when there is one.
func (f *fakeCC) UpdateState(s grpcresolver.State) error {
	addrs := []string{}
	for _, e := range s.Endpoints {
		a := e.Addresses[0].Addr
		if w := resolver.EndpointWeight(e); w != switchboard.DefaultWeight {
			a += fmt.Sprintf("/w=%d", w)
		}
		if z := resolver.EndpointZone(e); z != "" {
			a += "/z=" + z
		}
		addrs = append(addrs, a)
	}
	f.withSC.Store(s.ServiceConfig != nil)
	if f.pushed && slices.Equal(addrs, f.last) {
		f.t.Errorf("pushed the unchanged set %v again", addrs)
	}
	f.last, f.pushed = addrs, true
	f.states <- addrs
	return nil
}

func (f *fakeCC) ReportError(err error) { f.errs <- err }

// ParseServiceConfig accepts the resolver's config (a real client parses
// it; TestServiceConfigParses checks it does).
func (f *fakeCC) ParseServiceConfig(string) *serviceconfig.ParseResult {
	return &serviceconfig.ParseResult{}
}

func build(t *testing.T, b *resolver.Builder, key string, cc *fakeCC) grpcresolver.Resolver {
	t.Helper()
	r, err := b.Build(grpcresolver.Target{URL: url.URL{Scheme: "switchboard", Path: "/" + key}}, cc, grpcresolver.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

// expect waits for the next pushed state and checks it is want.
func expect(t *testing.T, cc *fakeCC, what string, want ...string) {
	t.Helper()
	select {
	case s := <-cc.states:
		if !slices.Equal(s, want) {
			t.Fatalf("%s: pushed %v, want %v", what, s, want)
		}
	case err := <-cc.errs:
		t.Fatalf("%s: reported %v, want state %v", what, err, want)
	case <-time.After(waitFor):
		t.Fatalf("%s: no state pushed", what)
	}
}

func TestResolverPushesTheUnionOfCapabilityAndName(t *testing.T) {
	cache, cat := newCache(t,
		byCap("a", "storage", "10.0.0.1:1"),
		byCap("n", "storage", "nats://tinymodule.svc-n.msg"), // not dialable
		byName("b", "storage", "10.0.0.2:1"),
		byName("d", "storage", "10.0.0.1:1"), // same address as a
		byCap("x", "other", "10.0.0.9:1"),
		byName("y", "storage-2", "10.0.0.9:2"),
	)
	b := resolver.NewBuilder(cache, resolver.Options{Logger: quiet})
	cc := newCC(t)
	r := build(t, b, "storage", cc)
	// a and d share an address: its weight is theirs together.
	expect(t, cc, "initial", "10.0.0.1:1/w=200", "10.0.0.2:1")

	// A capability-only key ignores names, a name-only key capabilities.
	ccCap, ccName := newCC(t), newCC(t)
	build(t, b, "other", ccCap)
	expect(t, ccCap, "capability only", "10.0.0.9:1")
	build(t, b, "storage-2", ccName)
	expect(t, ccName, "name only", "10.0.0.9:2")

	// Changes elsewhere in the catalog, and recomputations ResolveNow asks
	// for, push nothing (fakeCC fails on a repeated set): the next state is
	// the one of the following relevant change.
	r.ResolveNow(grpcresolver.ResolveNowOptions{})
	cat.send(added(byCap("z", "unrelated", "10.0.0.8:1")))
	cat.send(added(byCap("n2", "storage", "nats://x.y")))
	r.ResolveNow(grpcresolver.ResolveNowOptions{})
	cat.send(added(byCap("c", "storage", "10.0.0.0:5")))
	expect(t, cc, "after an addition", "10.0.0.0:5", "10.0.0.1:1/w=200", "10.0.0.2:1")

	// A removal pushes the smaller set at once; an address still held by
	// another instance (d has a's) stays, with d's weight alone.
	cat.send(removed(byCap("a", "storage", "10.0.0.1:1")))
	expect(t, cc, "after removing a", "10.0.0.0:5", "10.0.0.1:1", "10.0.0.2:1")
	r.ResolveNow(grpcresolver.ResolveNowOptions{})
	cat.send(removed(byName("b", "storage", "10.0.0.2:1")))
	expect(t, cc, "after removals", "10.0.0.0:5", "10.0.0.1:1")
	cat.send(removed(byName("d", "storage", "10.0.0.1:1")))
	expect(t, cc, "after removing d", "10.0.0.0:5")

	// The last one leaves: the empty set is pushed, so RPCs fail instead
	// of reaching it.
	cat.send(removed(byCap("c", "storage", "10.0.0.0:5")))
	expect(t, cc, "after removing the last")
	if len(cc.errs) != 0 {
		t.Fatalf("reported %v on a fresh cache", <-cc.errs)
	}
}

func TestResolverKeepsTheLastSetWhileTheCacheIsStale(t *testing.T) {
	a, b := byCap("a", "storage", "10.0.0.1:1"), byCap("b", "storage", "10.0.0.2:1")
	cache, cat := newCache(t, a, b)
	cc := newCC(t)
	build(t, resolver.NewBuilder(cache, resolver.Options{Logger: quiet}), "storage", cc)
	expect(t, cc, "initial", "10.0.0.1:1", "10.0.0.2:1")

	// The catalog becomes unreachable, then the stale view loses both
	// instances: nothing is pushed (neither the smaller set nor the empty
	// one), and the empty stale view is reported instead.
	cat.send(switchboard.Event{Kind: switchboard.EventError, Err: errDown})
	cat.send(removed(a))
	cat.send(removed(b))
	select {
	case err := <-cc.errs:
		if len(cc.states) != 0 {
			t.Fatalf("pushed %v while stale", <-cc.states)
		}
		if !errors.Is(err, errDown) {
			t.Fatalf("reported %v, want it to wrap the cache's error", err)
		}
	case s := <-cc.states:
		t.Fatalf("pushed %v while stale", s)
	case <-time.After(waitFor):
		t.Fatal("the stale, empty view was not reported")
	}
	if stale, _ := cache.Stale(); !stale {
		t.Fatal("cache not stale")
	}

	// Reachable again, with a new snapshot: its set is pushed directly.
	cat.send(added(byCap("c", "storage", "10.0.0.3:1")), switchboard.Event{Kind: switchboard.EventSynced})
	expect(t, cc, "fresh again", "10.0.0.3:1")
}

func TestResolverOnAStaleCacheStartsWithItsLastKnownSet(t *testing.T) {
	cache, cat := newCache(t, byCap("a", "storage", "10.0.0.1:1"))
	cat.send(switchboard.Event{Kind: switchboard.EventError, Err: errDown})
	testkit.WaitUntil(t, "the cache to be stale", func() bool { stale, _ := cache.Stale(); return stale })
	b := resolver.NewBuilder(cache, resolver.Options{Logger: quiet})
	cc := newCC(t)
	build(t, b, "storage", cc)
	expect(t, cc, "initial on a stale cache", "10.0.0.1:1")
	none := newCC(t)
	build(t, b, "nothing", none)
	select {
	case err := <-none.errs:
		if err == nil {
			t.Fatal("nil error")
		}
	case s := <-none.states:
		t.Fatalf("pushed %v for a key the stale cache has nothing for", s)
	case <-time.After(waitFor):
		t.Fatal("the stale, empty view was not reported")
	}
}

func TestCloseStopsTheResolver(t *testing.T) {
	cache, cat := newCache(t, byCap("a", "storage", "10.0.0.1:1"))
	b := resolver.NewBuilder(cache, resolver.Options{Logger: quiet})
	closed, open := newCC(t), newCC(t)
	r := build(t, b, "storage", closed)
	build(t, b, "storage", open)
	expect(t, closed, "initial", "10.0.0.1:1")
	expect(t, open, "initial", "10.0.0.1:1")
	r.Close()
	r.ResolveNow(grpcresolver.ResolveNowOptions{}) // harmless after Close
	cat.send(added(byCap("b", "storage", "10.0.0.2:1")))
	expect(t, open, "after the addition", "10.0.0.1:1", "10.0.0.2:1")
	// Close waited for the closed resolver's goroutine: it cannot push.
	if len(closed.states) != 0 {
		t.Fatalf("a closed resolver pushed %v", <-closed.states)
	}
}

func TestBuildRejectsBadTargets(t *testing.T) {
	cache, _ := newCache(t)
	b := resolver.NewBuilder(cache, resolver.Options{Logger: quiet})
	for _, p := range []string{"/", "", "/a b", "/-x", "/x/y"} {
		if _, err := b.Build(grpcresolver.Target{URL: url.URL{Scheme: "switchboard", Path: p}}, newCC(t), grpcresolver.BuildOptions{}); err == nil {
			t.Errorf("Build accepted %q", p)
		}
	}
	// A query or fragment would be silently ignored (a filter such as
	// ?zone=eu balancing over every zone): refused.
	for _, u := range []url.URL{
		{Scheme: "switchboard", Path: "/storage", RawQuery: "zone=eu"},
		{Scheme: "switchboard", Path: "/storage", ForceQuery: true},
		{Scheme: "switchboard", Path: "/storage", Fragment: "x"},
		// An authority is ignored as well: switchboard://eu/storage would
		// balance over every zone, switchboard://storage/x resolve "x".
		{Scheme: "switchboard", Host: "eu", Path: "/storage"},
		{Scheme: "switchboard", Host: "storage", Path: "/x"},
		{Scheme: "switchboard", User: url.User("u"), Path: "/storage"},
	} {
		if _, err := b.Build(grpcresolver.Target{URL: u}, newCC(t), grpcresolver.BuildOptions{}); err == nil {
			t.Errorf("Build accepted %s", u.String())
		}
	}
	if _, err := resolver.NewBuilder(nil, resolver.Options{}).Build(grpcresolver.Target{URL: url.URL{Scheme: "switchboard", Path: "/x"}}, newCC(t), grpcresolver.BuildOptions{}); err == nil {
		t.Error("Build without a cache succeeded")
	}
	if b.Scheme() != "switchboard" || resolver.Target("x") != "switchboard:///x" {
		t.Fatal("scheme")
	}
}

// TestResolverFollowsRandomChanges applies random additions, updates and
// removals (addresses shared between instances, keys matched as capability
// and as name) and checks that the last pushed set always converges to the
// one computed from scratch from the cache.
func TestResolverFollowsRandomChanges(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 4))
	cache, cat := newCache(t)
	cc := newCC(t)
	build(t, resolver.NewBuilder(cache, resolver.Options{Logger: quiet}), "storage", cc)
	expect(t, cc, "initial")
	var last []string
	scratch := func() []string {
		out := []string{}
		for _, in := range cache.All() {
			if (in.HasCapability("storage") || in.Name == "storage") && switchboard.IsDialable(in.Address) {
				out = append(out, in.Address)
			}
		}
		slices.Sort(out)
		// Instances sharing an address add up their weights.
		var agg []string
		for i := 0; i < len(out); {
			j := i
			for j < len(out) && out[j] == out[i] {
				j++
			}
			if j-i == 1 {
				agg = append(agg, out[i])
			} else {
				agg = append(agg, fmt.Sprintf("%s/w=%d", out[i], 100*(j-i)))
			}
			i = j
		}
		if agg == nil {
			agg = []string{}
		}
		return agg
	}
	live := map[string]bool{}
	for round := 0; round < 30; round++ {
		for i := 0; i < 20; i++ {
			id := fmt.Sprintf("i%d", rng.IntN(40))
			if live[id] && rng.IntN(3) == 0 {
				cat.send(removed(switchboard.Instance{ID: id}))
				delete(live, id)
				continue
			}
			in := switchboard.Instance{ID: id, Name: []string{"storage", "other"}[rng.IntN(2)], Type: "module",
				Address: fmt.Sprintf("10.0.0.%d:1", rng.IntN(8))}
			if rng.IntN(2) == 0 {
				in.Capabilities = []string{"storage"}
			}
			if rng.IntN(10) == 0 {
				in.Address = "nats://x.y"
			}
			kind := switchboard.EventAdded
			if live[id] {
				kind = switchboard.EventUpdated
			}
			live[id] = true
			cat.send(switchboard.Event{Kind: kind, Instance: in})
		}
		// A marker: once the cache has it, it has every change before it.
		marker := fmt.Sprintf("marker-%d", round)
		cat.send(added(switchboard.Instance{ID: marker, Name: "marker", Type: "module", Address: "10.9.9.9:9"}))
		testkit.WaitUntil(t, "the cache to apply the round", func() bool { _, ok := cache.Get(marker); return ok })
		want := scratch()
		deadline := time.After(waitFor)
		for !slices.Equal(last, want) {
			select {
			case last = <-cc.states:
			case <-deadline:
				t.Fatalf("seed %d round %d: last pushed %v, want %v", seed, round, last, want)
			}
		}
	}
}
