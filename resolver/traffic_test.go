package resolver_test

import (
	"context"
	"math"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/discovery"
	"github.com/switchboard-io/switchboard/grpcwire/modulepb"
	"github.com/switchboard-io/switchboard/internal/testkit"
	"github.com/switchboard-io/switchboard/resolver"
)

// rawServer is a plain gRPC module server: it echoes, holds calls whose
// payload is "hold" until release closes, and fails every call with
// UNAVAILABLE while fail is set (with NOT_FOUND, an application's answer,
// while notFound is).
type rawServer struct {
	modulepb.UnimplementedModuleServiceServer
	addr     string
	calls    atomic.Int64
	fail     atomic.Bool
	notFound atomic.Bool
	entered  chan struct{}
	release  chan struct{}
}

func (s *rawServer) Message(ctx context.Context, req *modulepb.MessageRequest) (*modulepb.MessageResponse, error) {
	s.calls.Add(1)
	if string(req.Payload) == "hold" {
		s.entered <- struct{}{}
		select {
		case <-s.release:
		case <-ctx.Done():
		}
	}
	if s.fail.Load() {
		return nil, status.Error(codes.Unavailable, "no healthy upstream")
	}
	if s.notFound.Load() {
		return nil, status.Error(codes.NotFound, "no such key")
	}
	return &modulepb.MessageResponse{Data: req.Payload}, nil
}

func startRaw(t *testing.T) *rawServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{addr: l.Addr().String(), entered: make(chan struct{}, 8), release: make(chan struct{})}
	gs := grpc.NewServer()
	modulepb.RegisterModuleServiceServer(gs, s)
	go gs.Serve(l)
	t.Cleanup(gs.Stop)
	return s
}

// dialREADME sets a client up as the README shows (the resolver and
// RoundRobin as default service config), with the Builder's options.
func dialREADME(t *testing.T, cache *discovery.Cache, key string, opts resolver.Options) modulepb.ModuleServiceClient {
	t.Helper()
	opts.Logger = quiet
	cc, err := grpc.NewClient(resolver.Target(key),
		grpc.WithResolvers(resolver.NewBuilder(cache, opts)),
		grpc.WithDefaultServiceConfig(resolver.RoundRobin),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return modulepb.NewModuleServiceClient(cc)
}

func call(ctx context.Context, c modulepb.ModuleServiceClient, payload string) error {
	_, err := c.Message(ctx, &modulepb.MessageRequest{To: "f.m.n:in", Payload: []byte(payload)})
	return err
}

func weighted(id, addr string, w int) switchboard.Instance {
	in := byCap(id, "wstore", addr)
	in.Weight = w
	in.TTL = time.Hour
	return in
}

// sqliteCache registers ins in a new SQLite catalog and returns the catalog
// and a discovery cache of it.
func sqliteCache(t *testing.T, ins ...switchboard.Instance) (switchboard.Catalog, *discovery.Cache) {
	t.Helper()
	cat := testkit.OpenSQLite(t)
	for _, in := range ins {
		if _, err := cat.Register(context.Background(), in); err != nil {
			t.Fatal(err)
		}
	}
	cache, err := discovery.New(context.Background(), cat, discovery.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cache.Close)
	return cat, cache
}

// warm calls until every server has had a call (every endpoint READY in
// the picker) and returns the servers' counts then.
func warm(t *testing.T, c modulepb.ModuleServiceClient, srvs ...*rawServer) []int64 {
	t.Helper()
	testkit.WaitUntil(t, "every endpoint to take calls", func() bool {
		if err := call(context.Background(), c, "x"); err != nil {
			t.Fatal(err)
		}
		for _, s := range srvs {
			if s.calls.Load() == 0 {
				return false
			}
		}
		return true
	})
	base := make([]int64, len(srvs))
	for i, s := range srvs {
		base[i] = s.calls.Load()
	}
	return base
}

// TestWeightsSpreadPlainClientCalls: three servers weighted 100/100/200 in
// a SQLite catalog, behind the resolver, get 25/25/50 % of 20,000 calls of
// a client set up as the README shows.
func TestWeightsSpreadPlainClientCalls(t *testing.T) {
	srvs := []*rawServer{startRaw(t), startRaw(t), startRaw(t)}
	_, cache := sqliteCache(t, weighted("a", srvs[0].addr, 100), weighted("b", srvs[1].addr, 0), weighted("c", srvs[2].addr, 200))
	c := dialREADME(t, cache, "wstore", resolver.Options{})
	base := warm(t, c, srvs...)
	const n, senders = 20000, 4
	var g errgroup.Group
	for s := 0; s < senders; s++ {
		g.Go(func() error {
			for i := 0; i < n/senders; i++ {
				if err := call(context.Background(), c, "x"); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	got := make([]float64, len(srvs))
	for i, s := range srvs {
		got[i] = 100 * float64(s.calls.Load()-base[i]) / n
	}
	for i, want := range []float64{25, 25, 50} {
		if math.Abs(got[i]-want) > 3 {
			t.Fatalf("shares %.1f %%, want 25/25/50 %% (± 3 points)", got)
		}
	}
	t.Logf("shares over %d calls: %.2f %%", n, got)
}

// TestDrainedEndpointGetsNoNewCalls: once the client has the state without
// the instance drained in the SQLite catalog, it gets no new call, and the
// call in flight on it finishes.
func TestDrainedEndpointGetsNoNewCalls(t *testing.T) {
	d, a := startRaw(t), startRaw(t)
	cat, cache := sqliteCache(t, weighted("d", d.addr, 100))
	c := dialREADME(t, cache, "wstore", resolver.Options{})
	warm(t, c, d)
	held := make(chan error, 1)
	go func() { held <- call(context.Background(), c, "hold") }()
	select {
	case <-d.entered:
	case <-time.After(waitFor):
		t.Fatal("the held call never reached d")
	}
	if _, err := cat.Register(context.Background(), weighted("a", a.addr, 100)); err != nil {
		t.Fatal(err)
	}
	if _, err := cat.(switchboard.Drainer).Drain(context.Background(), "d", true); err != nil {
		t.Fatal(err)
	}
	// The client has seen the drain once a's calls are all the calls.
	testkit.WaitUntil(t, "the drain to reach the client", func() bool {
		n := d.calls.Load()
		for i := 0; i < 20; i++ {
			if err := call(context.Background(), c, "x"); err != nil {
				t.Fatal(err)
			}
		}
		return d.calls.Load() == n
	})
	n := d.calls.Load()
	for i := 0; i < 500; i++ {
		if err := call(context.Background(), c, "x"); err != nil {
			t.Fatal(err)
		}
	}
	if got := d.calls.Load() - n; got != 0 {
		t.Fatalf("the drained endpoint got %d new calls", got)
	}
	select {
	case err := <-held:
		t.Fatalf("the held call ended before its release: %v", err)
	default:
	}
	close(d.release)
	select {
	case err := <-held:
		if err != nil {
			t.Fatalf("the call in flight on the drained endpoint: %v", err)
		}
	case <-time.After(waitFor):
		t.Fatal("the call in flight never finished")
	}
}

// TestFailingEndpointIsEjectedAndReturns: grpc-go's outlier detection, in
// the resolver's service config, ejects an endpoint whose calls fail with
// UNAVAILABLE, and lets it back on its own once its ejection time is up.
func TestFailingEndpointIsEjectedAndReturns(t *testing.T) {
	a, b, f := startRaw(t), startRaw(t), startRaw(t)
	cache, _ := newCache(t, weighted("a", a.addr, 100), weighted("b", b.addr, 100), weighted("f", f.addr, 100))
	c := dialREADME(t, cache, "wstore", resolver.Options{Ejection: resolver.Ejection{Interval: 100 * time.Millisecond, BaseTime: time.Second}})
	warm(t, c, a, b, f)
	f.fail.Store(true)
	// Without ejection f takes a third of the calls: a batch of 60 with
	// none for f means it is ejected.
	testkit.WaitUntil(t, "the failing endpoint to be ejected", func() bool {
		n := f.calls.Load()
		for i := 0; i < 60; i++ {
			_ = call(context.Background(), c, "x")
		}
		return f.calls.Load() == n
	})
	f.fail.Store(false)
	n := f.calls.Load()
	testkit.WaitUntil(t, "the ejected endpoint to take calls again", func() bool {
		if err := call(context.Background(), c, "x"); err != nil {
			t.Fatal(err)
		}
		return f.calls.Load() > n
	})
}

// TestApplicationErrorsDoNotEject: an endpoint whose every call ends with
// an application error (NOT_FOUND) keeps its share through many analysis
// intervals; the same endpoint failing with UNAVAILABLE is then ejected.
func TestApplicationErrorsDoNotEject(t *testing.T) {
	a, b, f := startRaw(t), startRaw(t), startRaw(t)
	cache, _ := newCache(t, weighted("a", a.addr, 100), weighted("b", b.addr, 100), weighted("f", f.addr, 100))
	const interval = 50 * time.Millisecond
	c := dialREADME(t, cache, "wstore", resolver.Options{Ejection: resolver.Ejection{Interval: interval, BaseTime: time.Hour}})
	warm(t, c, a, b, f)
	f.notFound.Store(true)
	// At least twenty intervals and 1,200 calls: f gets calls in every
	// batch of 60 (a third of them, were it not ejected).
	start := time.Now()
	for batch := 0; batch < 20 || time.Since(start) < 20*interval; batch++ {
		n := f.calls.Load()
		for i := 0; i < 60; i++ {
			_ = call(context.Background(), c, "x")
		}
		if f.calls.Load() == n {
			t.Fatalf("an endpoint answering NOT_FOUND was ejected (batch %d)", batch)
		}
	}
	f.notFound.Store(false)
	f.fail.Store(true)
	testkit.WaitUntil(t, "the endpoint failing with UNAVAILABLE to be ejected", func() bool {
		n := f.calls.Load()
		for i := 0; i < 60; i++ {
			_ = call(context.Background(), c, "x")
		}
		return f.calls.Load() == n
	})
}

// TestZonePreference: a client in zone z1 calls the target's z1 endpoints
// once there are two of them; with one (a zone with a single instance) it
// falls back to all.
func TestZonePreference(t *testing.T) {
	a, b, c, d := startRaw(t), startRaw(t), startRaw(t), startRaw(t)
	zoned := func(id, addr, zone string) switchboard.Instance {
		in := weighted(id, addr, 100)
		in.Zone = zone
		return in
	}
	cat, cache := sqliteCache(t, zoned("a", a.addr, "z1"), zoned("b", b.addr, "z2"), zoned("c", c.addr, "z2"))
	cl := dialREADME(t, cache, "wstore", resolver.Options{Zone: "z1"})
	warm(t, cl, a, b, c) // every endpoint takes calls: the zone's one is not enough

	if _, err := cat.Register(context.Background(), zoned("d", d.addr, "z1")); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "the calls to stay in the zone", func() bool {
		nb, nc := b.calls.Load(), c.calls.Load()
		for i := 0; i < 30; i++ {
			if err := call(context.Background(), cl, "x"); err != nil {
				t.Fatal(err)
			}
		}
		return b.calls.Load() == nb && c.calls.Load() == nc && d.calls.Load() > 0
	})
	na, nd := a.calls.Load(), d.calls.Load()
	for i := 0; i < 100; i++ {
		if err := call(context.Background(), cl, "x"); err != nil {
			t.Fatal(err)
		}
	}
	if a.calls.Load()-na != 50 || d.calls.Load()-nd != 50 {
		t.Fatalf("the zone's two endpoints got %d and %d of 100 calls", a.calls.Load()-na, d.calls.Load()-nd)
	}
}

// TestServiceConfigOptions: the resolver pushes its service config, a
// config of the caller's, or none.
func TestServiceConfigOptions(t *testing.T) {
	cache, _ := newCache(t, byCap("a", "storage", "10.0.0.1:1"))
	for _, tc := range []struct {
		opts resolver.Options
		want bool
	}{
		{resolver.Options{}, true},
		{resolver.Options{ServiceConfig: `{"loadBalancingConfig":[{"round_robin":{}}]}`}, true},
		{resolver.Options{NoServiceConfig: true}, false},
	} {
		tc.opts.Logger = quiet
		cc := newCC(t)
		build(t, resolver.NewBuilder(cache, tc.opts), "storage", cc)
		expect(t, cc, "initial", "10.0.0.1:1")
		if cc.withSC.Load() != tc.want {
			t.Errorf("%+v: pushed a service config: %v, want %v", tc.opts, cc.withSC.Load(), tc.want)
		}
	}
}

// TestServiceConfigParses: the configs the resolver pushes are valid for
// grpc-go (outlier detection and the weighted policy are registered), and
// RoundRobin is the default one.
func TestServiceConfigParses(t *testing.T) {
	if resolver.RoundRobin != resolver.ServiceConfig(resolver.Ejection{}) {
		t.Fatalf("RoundRobin %s\nis not the default config %s", resolver.RoundRobin, resolver.ServiceConfig(resolver.Ejection{}))
	}
	for _, e := range []resolver.Ejection{{}, {Off: true}, {Interval: time.Millisecond, BaseTime: 1500 * time.Millisecond, MaxPercent: 100, FailurePercent: 1, MinCalls: 1}} {
		sc := resolver.ServiceConfig(e)
		cc, err := grpc.NewClient("passthrough:///x", grpc.WithDefaultServiceConfig(sc), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatalf("%+v: %s: %v", e, sc, err)
		}
		cc.Close()
	}
	if _, err := grpc.NewClient("passthrough:///x", grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"nope":{}}]}`), grpc.WithTransportCredentials(insecure.NewCredentials())); err == nil {
		t.Fatal("an unknown policy parsed: the check above proves nothing")
	}
}
