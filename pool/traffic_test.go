package pool

import (
	"context"
	"fmt"
	"math"
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/discovery"
	"github.com/switchboard-io/switchboard/grpcwire/modulepb"
	"github.com/switchboard-io/switchboard/internal/testkit"
	"github.com/switchboard-io/switchboard/router"
	_ "github.com/switchboard-io/switchboard/sqlite" // testkit.OpenSQLite
)

// eventCatalog is a catalog whose one watch stream the test writes; it
// feeds a real discovery.Cache, which the pool follows.
type eventCatalog struct {
	switchboard.Catalog
	events chan switchboard.Event
}

func (c *eventCatalog) Watch(context.Context, switchboard.Query) (<-chan switchboard.Event, error) {
	return c.events, nil
}

// followFake starts a cache on an eventCatalog whose snapshot is the given
// instances and makes p follow it.
func followFake(t *testing.T, p *Pool, snapshot ...switchboard.Instance) *eventCatalog {
	t.Helper()
	cat := &eventCatalog{events: make(chan switchboard.Event, 64)}
	for _, in := range snapshot {
		cat.events <- switchboard.Event{Kind: switchboard.EventAdded, Instance: in}
	}
	cat.events <- switchboard.Event{Kind: switchboard.EventSynced}
	c, err := discovery.New(context.Background(), cat, discovery.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { close(cat.events); c.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := p.FollowCache(ctx, c, switchboard.Query{}); err != nil {
		t.Fatal(err)
	}
	return cat
}

func moduleInstance(id, module, addr string, weight int) switchboard.Instance {
	return switchboard.Instance{ID: id, Name: module, Type: ModuleType, Address: addr, Weight: weight, TTL: time.Hour}
}

func register(t *testing.T, cat switchboard.Catalog, ins ...switchboard.Instance) {
	t.Helper()
	for _, in := range ins {
		if _, err := cat.Register(context.Background(), in); err != nil {
			t.Fatal(err)
		}
	}
}

func waitReady(t *testing.T, p *Pool, addrs ...string) {
	t.Helper()
	testkit.WaitUntil(t, fmt.Sprintf("READY connections to %v", addrs), func() bool {
		st := p.States()
		for _, a := range addrs {
			if st[a] != connectivity.Ready {
				return false
			}
		}
		return true
	})
}

// checkShares fails unless the servers got the wanted percentages of n
// calls, within 3 points.
func checkShares(t *testing.T, n int, srvs []*testServer, want []float64) {
	t.Helper()
	got := make([]float64, len(srvs))
	for i, s := range srvs {
		got[i] = 100 * float64(s.calls.Load()) / float64(n)
	}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 3 {
			t.Fatalf("shares %.1f %%, want %v %% (± 3 points)", got, want)
		}
	}
	t.Logf("shares over %d calls: %.2f %%", n, got)
}

// TestWeightsSpreadCalls: three echo servers weighted 100/100/200 in a
// SQLite catalog, behind the pool following it, get 25/25/50 % of 20,000
// calls with weighted round robin (and of 5,000 with the least-request
// option).
func TestWeightsSpreadCalls(t *testing.T) {
	for _, least := range []bool{false, true} {
		t.Run(fmt.Sprintf("least=%v", least), func(t *testing.T) {
			srvs := []*testServer{startServer(t, nil), startServer(t, nil), startServer(t, nil)}
			p := newPool(t, Options{LeastRequest: least})
			cat := testkit.OpenSQLite(t)
			register(t, cat,
				moduleInstance("a", "wmod", srvs[0].addr, 100),
				moduleInstance("b", "wmod", srvs[1].addr, 0), // the default weight, 100
				moduleInstance("c", "wmod", srvs[2].addr, 200))
			if err := p.Follow(context.Background(), cat, switchboard.Query{Type: ModuleType}); err != nil {
				t.Fatal(err)
			}
			waitReady(t, p, srvs[0].addr, srvs[1].addr, srvs[2].addr)
			// Four senders at once for round robin (its cycle is shared);
			// one for least-request, whose choices depend on the calls in
			// flight (idle addresses share by weight).
			n, senders := 20000, 4
			if least {
				n, senders = 5000, 1
			}
			var g errgroup.Group
			for s := 0; s < senders; s++ {
				g.Go(func() error {
					for i := 0; i < n/senders; i++ {
						if _, err := send(context.Background(), p, "f.wmod.n", "x"); err != nil {
							return err
						}
					}
					return nil
				})
			}
			if err := g.Wait(); err != nil {
				t.Fatal(err)
			}
			checkShares(t, n, srvs, []float64{25, 25, 50})
		})
	}
}

// TestReweightAndDrainThroughTheCatalog: weights spread the calls; a
// drained instance (Drainer.Drain on a SQLite catalog) gets no new call
// once the pool has seen the drain, while the call already on it
// finishes; undrained it is back, and a critical check takes it out again.
func TestReweightAndDrainThroughTheCatalog(t *testing.T) {
	g := newGate(t)
	held := startServer(t, func(ctx context.Context, m *router.Message) ([]byte, error) {
		if string(m.Payload) == "hold" {
			g.wait(ctx)
		}
		return m.Payload, nil
	})
	a, b := startServer(t, nil), startServer(t, nil)
	p := newPool(t, Options{})
	cat := testkit.OpenSQLite(t)
	register(t, cat, moduleInstance("d", "dmod", held.addr, 100))
	if err := p.Follow(context.Background(), cat, switchboard.Query{Type: ModuleType}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// The call in flight on d.
	res := sendAsync(ctx, p, "f.dmod.n", "hold")
	g.awaitCall(t)

	register(t, cat, moduleInstance("a", "dmod", a.addr, 100), moduleInstance("b", "dmod", b.addr, 300))
	if _, err := cat.(switchboard.Drainer).Drain(ctx, "d", true); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "the drain to reach the pool", func() bool {
		m := p.Modules()["dmod"]
		return len(m) == 2 && !slices.Contains(m, held.addr)
	})
	waitReady(t, p, a.addr, b.addr)
	before := held.calls.Load()
	for i := 0; i < 400; i++ {
		if _, err := send(ctx, p, "f.dmod.n", "x"); err != nil {
			t.Fatal(err)
		}
	}
	if got := held.calls.Load(); got != before {
		t.Fatalf("the drained instance got %d new calls", got-before)
	}
	if a.calls.Load() != 100 || b.calls.Load() != 300 {
		t.Fatalf("weights 100/300 over 400 calls: %d/%d", a.calls.Load(), b.calls.Load())
	}
	// Its connection stays open for the call in flight, which finishes.
	if cl := p.ConnectionList(); !slices.ContainsFunc(cl, func(c Connection) bool { return c.Addr == held.addr && c.Draining && c.Calls == 1 }) {
		t.Fatalf("no draining connection with the held call: %+v", cl)
	}
	g.open()
	select {
	case r := <-res:
		if r.err != nil || string(r.out) != "hold" {
			t.Fatalf("the call in flight on the drained instance: %q, %v", r.out, r.err)
		}
	case <-time.After(waitFor):
		t.Fatal("the call in flight never finished")
	}
	testkit.WaitUntil(t, "the drained instance's connection to close", func() bool { return held.lis.Open.Load() == 0 })

	// Undrained: it is back; a critical check takes it out again.
	if _, err := cat.(switchboard.Drainer).Drain(ctx, "d", false); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "the undrain to reach the pool", func() bool { return slices.Contains(p.Modules()["dmod"], held.addr) })
	if _, err := cat.(switchboard.HealthSetter).SetHealth(ctx, "d", switchboard.Health{Status: switchboard.StatusCritical, Output: "down"}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "the critical instance to leave the pool", func() bool { return !slices.Contains(p.Modules()["dmod"], held.addr) })
}

// TestFollowCacheSkipsInstancesNotServing: through a discovery cache of a
// catalog that lists every row (Query.All), stale, drained and critical
// instances are not routed to.
func TestFollowCacheSkipsInstancesNotServing(t *testing.T) {
	p := newPool(t, Options{Lazy: true})
	live := moduleInstance("live", "nmod", "127.0.0.1:1", 100)
	stale := moduleInstance("stale", "nmod", "127.0.0.1:2", 100)
	stale.Stale = true
	drained := moduleInstance("drained", "nmod", "127.0.0.1:3", 100)
	drained.Draining = true
	critical := moduleInstance("critical", "nmod", "127.0.0.1:4", 100)
	critical.Health.Status = switchboard.StatusCritical
	cat := followFake(t, p, live, stale, drained, critical)
	if m := p.Modules()["nmod"]; !slices.Equal(m, []string{"127.0.0.1:1"}) {
		t.Fatalf("routes %v, want the serving instance alone", m)
	}
	drained.Draining = false
	cat.events <- switchboard.Event{Kind: switchboard.EventUpdated, Instance: drained}
	testkit.WaitUntil(t, "the undrained instance to be routed to", func() bool {
		return slices.Equal(p.Modules()["nmod"], []string{"127.0.0.1:1", "127.0.0.1:3"})
	})
}

// fastRetry makes connection attempts retry within 50 ms.
var fastRetry = grpc.WithConnectParams(grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: 10 * time.Millisecond, Multiplier: 1.6, MaxDelay: 50 * time.Millisecond},
	MinConnectTimeout: time.Second,
})

func connection(p *Pool, addr string) Connection {
	for _, c := range p.ConnectionList() {
		if c.Addr == addr && !c.Draining {
			return c
		}
	}
	return Connection{}
}

// failingServer answers every call with UNAVAILABLE and no Switchboard
// error detail (as a proxy in front of a dead backend, or a server
// shutting down, does): a transport failure, while fail is set; otherwise
// it echoes.
type failingServer struct {
	modulepb.UnimplementedModuleServiceServer
	addr  string
	fail  atomic.Bool
	calls atomic.Int64
	last  atomic.Int64 // when the last call arrived (unix ns)
}

func (s *failingServer) Message(_ context.Context, req *modulepb.MessageRequest) (*modulepb.MessageResponse, error) {
	s.calls.Add(1)
	s.last.Store(time.Now().UnixNano())
	if s.fail.Load() {
		return nil, status.Error(codes.Unavailable, "no healthy upstream")
	}
	return &modulepb.MessageResponse{Data: req.Payload}, nil
}

func startFailing(t *testing.T) *failingServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &failingServer{addr: l.Addr().String()}
	gs := grpc.NewServer()
	modulepb.RegisterModuleServiceServer(gs, s)
	go gs.Serve(l)
	t.Cleanup(gs.Stop)
	return s
}

// TestFailingAddressIsEjectedAndReturns: an address whose calls fail at
// the transport five times in a row is ejected, gets no call while ejected
// even once it works again, and gets calls again after its ejection time.
func TestFailingAddressIsEjectedAndReturns(t *testing.T) {
	a, b, f := startServer(t, nil), startServer(t, nil), startFailing(t)
	f.fail.Store(true)
	const base = 2 * time.Second
	p := newPool(t, Options{Ejection: Ejection{BaseTime: base}})
	p.AddInstance("emod", "a", a.addr)
	p.AddInstance("emod", "b", b.addr)
	p.AddInstance("emod", "f", f.addr)
	waitReady(t, p, a.addr, b.addr, f.addr)
	ctx := context.Background()
	failed := 0
	for !connection(p, f.addr).Ejected {
		if _, err := send(ctx, p, "f.emod.n", "x"); err != nil {
			if codeOf(err) != router.CodeUnavailable {
				t.Fatalf("a transport failure: %v", err)
			}
			failed++
		}
		if failed > 5 {
			t.Fatalf("%d failed sends, not ejected: %+v", failed, connection(p, f.addr))
		}
	}
	if failed != 5 {
		t.Fatalf("ejected after %d failures", failed)
	}
	// It works again, within its ejection: no call reaches it until its
	// time is up, then calls do.
	f.fail.Store(false)
	c := connection(p, f.addr)
	n := f.calls.Load()
	testkit.WaitUntil(t, "the ejected address to get calls again", func() bool {
		if _, err := send(ctx, p, "f.emod.n", "x"); err != nil {
			t.Fatal(err)
		}
		return f.calls.Load() > n
	})
	if first := time.Unix(0, f.last.Load()); first.Before(c.EjectedUntil) {
		t.Fatalf("the ejected address got a call at %s, before its ejection ended at %s", first, c.EjectedUntil)
	}
	if connection(p, f.addr).Ejected {
		t.Fatal("still ejected after getting calls")
	}
}

// TestRefusingAddressIsSkippedAndReturns: an address that refuses
// connections takes no send while others are usable (its connection is
// not READY), and gets sends again once it accepts connections.
func TestRefusingAddressIsSkippedAndReturns(t *testing.T) {
	a, r := startServer(t, nil), startServer(t, nil)
	rp := testkit.NewProxy(t, r.addr)
	p := newPool(t, Options{DialOptions: []grpc.DialOption{fastRetry}})
	p.AddInstance("rmod", "a", a.addr)
	p.AddInstance("rmod", "r", rp.Addr())
	waitReady(t, p, a.addr, rp.Addr())
	rp.Refuse()
	testkit.WaitUntil(t, "the refusing address's connection to fail", func() bool {
		return p.States()[rp.Addr()] == connectivity.TransientFailure
	})
	ctx := context.Background()
	n := r.calls.Load()
	for i := 0; i < 100; i++ {
		if _, err := send(ctx, p, "f.rmod.n", "x"); err != nil {
			t.Fatalf("a send with a live address failed: %v", err)
		}
	}
	if r.calls.Load() != n {
		t.Fatal("the refusing address got sends")
	}
	rp.Restore()
	testkit.WaitUntil(t, "the address to get sends again", func() bool {
		if _, err := send(ctx, p, "f.rmod.n", "x"); err != nil {
			t.Fatal(err)
		}
		return r.calls.Load() > n
	})
}

// TestEjectionNeverExceedsTheMaxShare: of three addresses, two failing,
// only one is ejected at a time (50 % of three is one and a half).
func TestEjectionNeverExceedsTheMaxShare(t *testing.T) {
	a, f1, f2 := startServer(t, nil), startFailing(t), startFailing(t)
	f1.fail.Store(true)
	f2.fail.Store(true)
	p := newPool(t, Options{Ejection: Ejection{BaseTime: time.Hour}})
	p.AddInstance("smod", "a", a.addr)
	p.AddInstance("smod", "f1", f1.addr)
	p.AddInstance("smod", "f2", f2.addr)
	waitReady(t, p, a.addr, f1.addr, f2.addr)
	ctx := context.Background()
	testkit.WaitUntil(t, "one ejection and ten more failures on the other", func() bool {
		_, _ = send(ctx, p, "f.smod.n", "x")
		c1, c2 := connection(p, f1.addr), connection(p, f2.addr)
		return (c1.Ejected && c2.Failures >= 10) || (c2.Ejected && c1.Failures >= 10)
	})
	if connection(p, f1.addr).Ejected && connection(p, f2.addr).Ejected {
		t.Fatal("two of three addresses ejected")
	}
}

// TestEjectionTimeGrows: the n-th ejection in a row lasts n × BaseTime, up
// to MaxTime; a failure count below Failures ejects nothing, an answer
// resets it.
func TestEjectionTimeGrows(t *testing.T) {
	p := newPool(t, Options{Lazy: true, Ejection: Ejection{BaseTime: time.Hour, MaxTime: 150 * time.Minute, Failures: 3}})
	p.AddInstance("gmod", "a", "127.0.0.1:1")
	p.AddInstance("gmod", "b", "127.0.0.1:2")
	p.AddInstance("gmod", "c", "127.0.0.1:3")
	p.mu.Lock()
	c := p.conns["127.0.0.1:1"]
	p.mu.Unlock()
	fail := func(n int) {
		for i := 0; i < n; i++ {
			p.transportFailed(c)
		}
	}
	fail(2)
	c.answered()
	fail(2)
	if connection(p, c.addr).Ejected {
		t.Fatal("ejected after 2 failures, an answer, and 2 failures")
	}
	for i, want := range []time.Duration{time.Hour, 2 * time.Hour, 150 * time.Minute} {
		before := time.Now()
		fail(3) // the 3rd failure in a row ejects
		after := time.Now()
		e := connection(p, c.addr)
		if !e.Ejected || e.EjectedUntil.Before(before.Add(want)) || e.EjectedUntil.After(after.Add(want)) {
			t.Fatalf("ejection %d: %+v, want %s from now", i+1, e, want)
		}
		fail(10) // not counted while ejected
		if connection(p, c.addr).Failures != 0 {
			t.Fatal("failures counted while ejected")
		}
		// End the ejection now, as its time would.
		c.until.Store(time.Now().UnixNano() - 1)
		c.lastUntil = time.Now().UnixNano()
		if connection(p, c.addr).Ejected {
			t.Fatal("still ejected after its time")
		}
	}
}

// BenchmarkPick measures one pick over 100 weighted instances (connections
// never dialled: a lazy pool's), by weighted round robin and by least
// request; both allocation-free.
func BenchmarkPick(b *testing.B) {
	for _, least := range []bool{false, true} {
		b.Run(fmt.Sprintf("least=%v", least), func(b *testing.B) {
			p := New(Options{Logger: quiet, Lazy: true})
			defer p.Close()
			for i := 0; i < 100; i++ {
				p.AddWeightedInstance("m", fmt.Sprint(i), fmt.Sprintf("127.0.0.1:%d", 1000+i), 1+i%7*100, "")
			}
			rt := (*p.routes.Load())["m"]
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if rt.pick(least) == nil {
					b.Fatal("no pick")
				}
			}
		})
	}
}

// TestZonePreference: a pool in zone z1 sends to the module's z1 instances
// once there are two of them; with one (a zone with a single instance) it
// falls back to all, and so it does when none of its zone's is usable.
func TestZonePreference(t *testing.T) {
	a, b, c, d := startServer(t, nil), startServer(t, nil), startServer(t, nil), startServer(t, nil)
	ap, dp := testkit.NewProxy(t, a.addr), testkit.NewProxy(t, d.addr)
	cat := testkit.OpenSQLite(t)
	zoned := func(id, addr, zone string) switchboard.Instance {
		in := moduleInstance(id, "zmod", addr, 100)
		in.Zone = zone
		return in
	}
	register(t, cat, zoned("a", ap.Addr(), "z1"), zoned("b", b.addr, "z2"), zoned("c", c.addr, "z2"))
	p := newPool(t, Options{Zone: "z1", DialOptions: []grpc.DialOption{fastRetry}})
	if err := p.Follow(context.Background(), cat, switchboard.Query{Type: ModuleType}); err != nil {
		t.Fatal(err)
	}
	waitReady(t, p, ap.Addr(), b.addr, c.addr)
	ctx := context.Background()
	sendN := func(n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			if _, err := send(ctx, p, "f.zmod.n", "x"); err != nil {
				t.Fatal(err)
			}
		}
	}
	sendN(30)
	if a.calls.Load() != 10 || b.calls.Load() != 10 || c.calls.Load() != 10 {
		t.Fatalf("one instance in the zone: calls %d/%d/%d, want 10 each (all)", a.calls.Load(), b.calls.Load(), c.calls.Load())
	}

	register(t, cat, zoned("d", dp.Addr(), "z1"))
	testkit.WaitUntil(t, "d in the pool", func() bool { return len(p.Modules()["zmod"]) == 4 })
	waitReady(t, p, dp.Addr())
	nb, nc := b.calls.Load(), c.calls.Load()
	sendN(40)
	if b.calls.Load() != nb || c.calls.Load() != nc || a.calls.Load()+d.calls.Load() != 50 {
		t.Fatalf("two instances in the zone: a %d d %d, b %d c %d new", a.calls.Load(), d.calls.Load(), b.calls.Load()-nb, c.calls.Load()-nc)
	}

	// The zone's instances refuse connections: the sends go elsewhere.
	ap.Refuse()
	dp.Refuse()
	testkit.WaitUntil(t, "the zone's connections to fail", func() bool {
		st := p.States()
		return st[ap.Addr()] != connectivity.Ready && st[dp.Addr()] != connectivity.Ready
	})
	sendN(20)
	if b.calls.Load()+c.calls.Load()-nb-nc != 20 {
		t.Fatalf("the zone down: %d of 20 sends went to the other zone", b.calls.Load()+c.calls.Load()-nb-nc)
	}
}
