// Package pool is the gRPC address pool of the module fallback wire.
//
// The pool keeps a module → instances table, each instance with its address
// ("host:port") and weight, and one *grpc.ClientConn per distinct address,
// shared by every module and instance on it. A module with several
// instances receives messages in proportion to their weights (weighted
// round robin, smooth, lock-free; or, with Options.LeastRequest, the less
// loaded of two weighted random choices), preferring those of the caller's
// zone (Options.Zone) when it has enough of them, skipping connections that
// are not READY, and addresses that are ejected, while another is usable; an
// instance that leaves, or stops serving (drained, its check critical),
// stops receiving new messages at once while the calls already on it
// finish. An address whose calls fail at the transport (UNAVAILABLE
// without an answer, or a failed connection attempt) Options.Ejection's
// Failures times in a row is ejected: skipped for a time that grows with
// each ejection, never more than a share of a module's addresses at once;
// it returns on its own. Connections are created single-flight (a thousand
// concurrent first sends make one connection), pre-warmed in the background
// on registration, kept alive (10 s / 3 s, permit without stream), closed
// when no module uses their address any more — after the new routes are in
// place, and once the calls already under way on them have their answers,
// or after Options.DrainTimeout (by default the CallTimeout), which fails
// the calls still in flight with a retryable CodeUnavailable — and all closed
// at once when the pool's run context ends. ConnectionList shows the
// connections still draining and the addresses ejected. Addresses that are
// not host:port (nats://…) are never dialled. A new registration on an
// address whose connection waits out a reconnect backoff retries it at
// once. Connections are plaintext, or TLS / mutual TLS with Options.TLS; a
// send without a deadline gets DefaultCallTimeout; the trace context of a
// send travels in the request metadata (otelgrpc when spans are recorded).
//
// Pool implements router.Wire; FollowCache keeps the table in step with a
// discovery.Cache, the process's view of the catalog, and Follow with a
// switchboard.Catalog through a cache of its own; both route only to
// instances that are serving (switchboard.Instance.Serving), with their
// weights.
package pool

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/discovery"
	"github.com/switchboard-io/switchboard/grpcwire"
	"github.com/switchboard-io/switchboard/internal/wrr"
	"github.com/switchboard-io/switchboard/router"
)

// ErrClosed is returned by Follow on a closed pool.
var ErrClosed = errors.New("address pool is closed")

// Options configure a Pool.
type Options struct {
	// Logger receives the pool's logs (nil: slog.Default()).
	Logger *slog.Logger
	// DialOptions are appended to grpcwire.DialOptions() for every
	// connection (a custom dialer, stats handler, …). Transport
	// credentials set here are used only without TLS: TLS, when set,
	// always wins over them. The pool watches only its own handshakes, so
	// a TLS failure under credentials set here is a retryable
	// "unavailable", not the permanent grpcwire.CodeTLS that TLS gives.
	DialOptions []grpc.DialOption
	// Lazy disables pre-warming: connections are made by the first send.
	Lazy bool
	// TLS, when set, makes every connection TLS: the server verified
	// against its CA (re-read when the files change), and its certificate
	// presented as the client certificate (mutual TLS). Nil: plaintext.
	TLS *grpcwire.TLS
	// TracerProvider and Propagator instrument every connection with
	// otelgrpc (grpcwire.ClientStatsHandler) when the provider can record
	// (router.Recording; set up tracing before creating the pool): the
	// trace context of a send travels in the request metadata either way
	// (nil: the global provider; router.DefaultPropagator).
	TracerProvider trace.TracerProvider
	Propagator     propagation.TextMapPropagator
	// CallTimeout bounds each call whose context has no deadline (zero, or
	// negative with a warning: DefaultCallTimeout). A caller's own
	// deadline, or a retry policy's per-attempt timeout, is used as is.
	CallTimeout time.Duration
	// DrainTimeout bounds how long a connection no module uses any more
	// (its instances left the catalog or moved) stays open for the calls
	// already on it (zero, or negative with a warning: the pool's
	// CallTimeout, so that by default no call is cut sooner than a call
	// without a deadline would end anyway). The calls still in flight
	// then fail with a retryable CodeUnavailable, whatever their own
	// deadline: slow ones as well as those to a peer that hangs. A shorter
	// one frees connections to hung peers sooner, and cuts calls longer
	// than it to instances that leave.
	DrainTimeout time.Duration
	// LeastRequest picks, for each send, two instances of the module at
	// random in proportion to their weights and sends to the one with
	// fewer calls in flight on its address (power of two choices), instead
	// of weighted round robin. It suits calls of very uneven cost.
	LeastRequest bool
	// Ejection configures outlier ejection (see Ejection).
	Ejection Ejection
	// Zone is the caller's zone (switchboard.Instance.Zone): when set,
	// sends to a module go to its instances in that zone, by weight, as
	// long as it has at least ZoneMinInstances of them and one is usable;
	// otherwise to all its instances.
	Zone string
	// ZoneMinInstances is the fewest instances of a module in Zone for
	// the zone to be preferred (zero: discovery.DefaultZoneMin, 2), so that
	// a zone with a single instance does not take all of a module's load.
	ZoneMinInstances int
}

// Ejection configures outlier ejection: an address whose calls keep
// failing at the transport is skipped for a while, even though its
// instances are still registered. A transport failure is a send that got
// no answer because the connection or the call failed with UNAVAILABLE, or
// a connection that turns TRANSIENT_FAILURE; an error the remote side
// answered with (any application error) and a deadline are not. A send the
// remote side answers, errors included, resets the count. An ejected
// address is skipped while another instance of the module is usable (an
// ejection never fails a send by itself), and returns on its own when its
// time is up; Failures more failures eject it again, for longer unless it
// stayed back long enough.
type Ejection struct {
	// Failures is how many consecutive transport failures eject an address
	// (zero: 5; negative: never eject).
	Failures int
	// BaseTime is the first ejection's length (zero: 30 s); the n-th
	// ejection in a row lasts n × BaseTime, up to MaxTime. The count of
	// ejections in a row goes down by one for each BaseTime an address
	// spends back in rotation.
	BaseTime time.Duration
	// MaxTime caps an ejection (zero: 300 s; never below BaseTime).
	MaxTime time.Duration
	// MaxPercent is the largest share of a module's addresses ejected at
	// once, in percent (zero: 50; 100 allows all): an address whose
	// ejection would exceed it for a module that uses it stays in rotation
	// until others return. A module with a single address never has it
	// ejected below 100.
	MaxPercent int
}

// Ejection defaults.
const (
	DefaultEjectionFailures   = 5
	DefaultEjectionBaseTime   = 30 * time.Second
	DefaultEjectionMaxTime    = 300 * time.Second
	DefaultEjectionMaxPercent = 50
)

// DefaultCallTimeout bounds a send whose context has no deadline: the same
// 5 minutes the TinySystems SDK gives a NATS request, so a peer that never
// answers cannot hold a caller forever on either wire.
const DefaultCallTimeout = 5 * time.Minute

// Pool is the module address pool. It is safe for concurrent use.
type Pool struct {
	log      *slog.Logger
	dialOpts []grpc.DialOption // grpcwire.DialOptions and the otelgrpc handler
	userOpts []grpc.DialOption // Options.DialOptions
	tls      bool              // Options.TLS is set: its credentials come last
	lazy     bool
	timeout  time.Duration // Options.CallTimeout
	drainFor time.Duration // Options.DrainTimeout
	creds    credentials.TransportCredentials
	otel     bool                          // connections carry the otelgrpc client handler
	prop     propagation.TextMapPropagator // for PropagateTrace when !otel
	least    bool                          // Options.LeastRequest
	eject    Ejection                      // Options.Ejection with its defaults
	zone     string                        // Options.Zone
	zoneMin  int                           // Options.ZoneMinInstances, default filled

	ctx     context.Context // ends when the pool closes
	cancel  context.CancelFunc
	follows sync.WaitGroup // Follow calls and goroutines; Add under mu while !closed; Close waits for them
	bg      sync.WaitGroup // pre-warm, connection-watch and drain goroutines; Add under mu while !closed; Close waits for them
	done    chan struct{}  // closed when the first Close has returned

	ejectMu sync.Mutex // serialises ejections (eject.go)

	mu      sync.Mutex                   // serialises writers
	modules map[string]map[string]target // module → instance id → address and weight
	conns   map[string]*conn             // addr → connection
	refs    map[string]int               // addr → number of instances on it
	drain   map[*conn]struct{}           // closed connections whose sends are still in flight
	closed  bool

	routes atomic.Pointer[map[string]*route] // immutable snapshot read by Send
}

// New returns an empty pool. Call Start or Run to tie it to a run context;
// Close releases everything.
func New(opts Options) *Pool {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.CallTimeout < 0 {
		// It would fail every send without a deadline at once.
		opts.Logger.Warn("address pool: negative CallTimeout; using the default", "call_timeout", opts.CallTimeout, "default", DefaultCallTimeout)
		opts.CallTimeout = 0
	}
	if opts.DrainTimeout < 0 {
		// It would cut every call in flight on a connection at once.
		opts.Logger.Warn("address pool: negative DrainTimeout; using the call timeout", "drain_timeout", opts.DrainTimeout, "call_timeout", cmp.Or(opts.CallTimeout, DefaultCallTimeout))
		opts.DrainTimeout = 0
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pool{
		log:      opts.Logger,
		dialOpts: grpcwire.DialOptions(),
		userOpts: slices.Clip(opts.DialOptions),
		lazy:     opts.Lazy,
		timeout:  cmp.Or(opts.CallTimeout, DefaultCallTimeout),
		drainFor: cmp.Or(opts.DrainTimeout, opts.CallTimeout, DefaultCallTimeout),
		creds:    insecure.NewCredentials(),
		ctx:      ctx,
		cancel:   cancel,
		done:     make(chan struct{}),
		modules:  map[string]map[string]target{},
		conns:    map[string]*conn{},
		refs:     map[string]int{},
		drain:    map[*conn]struct{}{},
	}
	p.least = opts.LeastRequest
	p.zone, p.zoneMin = opts.Zone, cmp.Or(max(opts.ZoneMinInstances, 0), discovery.DefaultZoneMin)
	p.eject = ejectionDefaults(opts.Ejection, opts.Logger)
	if opts.TLS != nil {
		p.creds = opts.TLS.ClientCredentials()
		p.tls = true
	}
	// Instrument connections only when spans can be recorded: any stats
	// handler costs grpc-go allocations on every call. Without it, call
	// carries the trace context on with grpcwire.PropagateTrace.
	if router.Recording(opts.TracerProvider) {
		p.otel = true
		p.dialOpts = append(p.dialOpts, grpc.WithStatsHandler(grpcwire.ClientStatsHandler(opts.TracerProvider, opts.Propagator)))
	}
	p.prop = opts.Propagator
	empty := map[string]*route{}
	p.routes.Store(&empty)
	return p
}

// Run blocks until ctx ends (or the pool is closed), then closes every
// connection.
func (p *Pool) Run(ctx context.Context) error {
	select {
	case <-ctx.Done():
	case <-p.ctx.Done():
	}
	p.Close()
	return nil
}

// Start runs the pool in the background until ctx ends (Run, in a goroutine).
func (p *Pool) Start(ctx context.Context) {
	go func() { _ = p.Run(ctx) }()
}

// Close empties the table, waits for the pool's goroutines (Follow,
// pre-warming, connection watches, drains) to end and closes every connection at
// once, calls in flight included; later sends fail with CodeUnavailable. It is idempotent: a later or
// concurrent call returns once the first has finished.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		<-p.done
		return nil
	}
	p.closed = true
	conns := p.conns
	p.conns = map[string]*conn{}
	draining := p.drain
	p.drain = map[*conn]struct{}{}
	p.modules = map[string]map[string]target{}
	p.refs = map[string]int{}
	empty := map[string]*route{}
	p.routes.Store(&empty)
	p.mu.Unlock()
	p.cancel()
	p.follows.Wait()
	p.bg.Wait()
	for addr, c := range conns {
		p.log.Info("address pool: closing connection", "module", c.module, "addr", addr, "reason", "pool closed")
		c.closeNow()
	}
	for c := range draining {
		p.log.Info("address pool: closing connection", "module", c.module, "addr", c.addr, "reason", "pool closed while calls on it drained")
		c.closeNow()
	}
	close(p.done)
	return nil
}

// goLocked runs fn in a goroutine Close waits for; when the pool is closed
// fn is not run and goLocked returns false. p.mu is held (Close sets closed
// under it before waiting, so no Add races the Wait).
func (p *Pool) goLocked(fn func()) bool {
	if p.closed {
		return false
	}
	p.bg.Add(1)
	go func() {
		defer p.bg.Done()
		fn()
	}()
	return true
}

// Register sets the address of a module with a single instance (the
// Kubernetes case: one Service address), replacing any earlier addresses.
// The connection is pre-warmed in the background; a connection to an old
// address no other module uses is closed.
func (p *Pool) Register(module, addr string) {
	p.set(module, map[string]target{"": {addr: addr, weight: switchboard.DefaultWeight}})
}

// Deregister removes a module and all its instances; connections no other
// module uses are closed.
func (p *Pool) Deregister(module string) {
	p.set(module, nil)
}

// AddInstance adds or moves one instance (replica) of a module, with the
// default weight (switchboard.DefaultWeight). Messages to the module are
// spread over its instances in proportion to their weights.
func (p *Pool) AddInstance(module, id, addr string) {
	p.AddWeightedInstance(module, id, addr, switchboard.DefaultWeight, "")
}

// AddWeightedInstance adds, moves or changes one instance of a module: it
// receives a share of the module's messages in proportion to weight (1 to
// switchboard.MaxWeight; out-of-range values are clamped to it); zone is
// its zone ("" for none; see Options.Zone).
func (p *Pool) AddWeightedInstance(module, id, addr string, weight int, zone string) {
	weight = min(max(weight, 1), switchboard.MaxWeight)
	p.mu.Lock()
	defer p.mu.Unlock()
	next := maps.Clone(p.modules[module])
	if next == nil {
		next = map[string]target{}
	}
	next[id] = target{addr: addr, weight: weight, zone: zone}
	p.apply(module, next)
}

// RemoveInstance removes one instance of a module; it stops receiving at
// once. The module is forgotten when its last instance goes.
func (p *Pool) RemoveInstance(module, id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	cur, ok := p.modules[module]
	if !ok {
		return
	}
	if _, ok := cur[id]; !ok {
		return
	}
	next := maps.Clone(cur)
	delete(next, id)
	p.apply(module, next)
}

func (p *Pool) set(module string, instances map[string]target) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.apply(module, instances)
}

// apply replaces the instances of module with next (nil or empty: remove
// the module), adjusting connections and the route snapshot. The new route
// is published before the connections it no longer uses are closed, so a
// send that finds one closed takes the new route; a closed connection
// lets the calls already on it finish, within the drain timeout (see conn,
// drainConn). p.mu is held.
func (p *Pool) apply(module string, next map[string]target) {
	if p.closed {
		p.log.Debug("address pool: closed; ignoring change", "module", module)
		return
	}
	prev := p.modules[module]
	if maps.Equal(prev, next) {
		return
	}
	if len(next) == 0 {
		p.log.Info("address pool: deregistering module", "module", module)
	}
	// Take references on the new addresses first, so an address kept
	// across the change never drops to zero.
	for id, t := range next {
		addr := t.addr
		if prev[id].addr == addr {
			continue
		}
		p.log.Info("address pool: registering module", "module", module, "addr", addr, "instance", id)
		dialable := switchboard.IsDialable(addr)
		if !dialable {
			p.log.Info("address pool: address is not dialable; not connecting", "module", module, "addr", addr)
		}
		p.refs[addr]++
		if p.refs[addr] == 1 && dialable {
			c := newConn(addr, module, p.log)
			p.conns[addr] = c
			if !p.lazy {
				p.goLocked(func() { p.prewarm(c) })
			}
		} else if c, ok := p.conns[addr]; ok {
			// A new registration says something listens there now (a
			// restarted module on its old port, another module on a port
			// the kernel handed out again): a connection waiting out a
			// reconnect backoff tries again at once instead of failing
			// sends until the backoff ends.
			c.retryNow()
		}
	}
	var unused []*conn
	for id, t := range prev {
		addr := t.addr
		if nt, ok := next[id]; ok && nt.addr == addr {
			continue
		}
		p.refs[addr]--
		if p.refs[addr] > 0 {
			continue
		}
		delete(p.refs, addr)
		if c, ok := p.conns[addr]; ok {
			delete(p.conns, addr)
			unused = append(unused, c)
		}
	}
	if len(next) == 0 {
		delete(p.modules, module)
	} else {
		p.modules[module] = next
	}
	p.publish(module)
	for _, c := range unused {
		p.log.Info("address pool: closing connection", "module", module, "addr", c.addr)
		if c.close() {
			// drainConn shuts it down once the calls in flight on it
			// end; until then Close must still find it.
			p.drain[c] = struct{}{}
			p.goLocked(func() { p.drainConn(c) })
		}
	}
}

// drainConn shuts down c, a closed connection with calls still in flight
// on it, once the last of them has ended (so that the call's reply does
// not wait for ClientConn.Close), or after the drain timeout, cutting those
// still in flight (c is marked expired first, so that they say why), and
// then forgets it. It runs under p.bg, so it does not outlive Close; when
// the pool closes first it leaves c to Close.
func (p *Pool) drainConn(c *conn) {
	t := time.NewTimer(p.drainFor)
	defer t.Stop()
	select {
	case <-c.idle:
	case <-t.C:
		if n := c.inFlight(); n > 0 {
			p.log.Warn("address pool: calls on a connection no module uses did not end within the drain timeout; closing it",
				"module", c.module, "addr", c.addr, "calls", n, "drain_timeout", p.drainFor)
			c.expired.Store(true)
		}
	case <-p.ctx.Done():
		return // Close shuts it down
	}
	c.shutdown()
	p.mu.Lock()
	delete(p.drain, c)
	p.mu.Unlock()
}

// target is one instance of a module: its address, weight and zone.
type target struct {
	addr   string
	weight int
	zone   string
}

// publish rebuilds the route of module and stores a new snapshot. p.mu is
// held.
func (p *Pool) publish(module string) {
	routes := maps.Clone(*p.routes.Load())
	insts := p.modules[module]
	if len(insts) == 0 {
		delete(routes, module)
	} else {
		ids := make([]string, 0, len(insts))
		for id := range insts {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		rt := &route{}
		var weights []int // the targets' weights
		var local []int   // indexes of the targets in the pool's zone
		for _, id := range ids {
			t := insts[id]
			if c, ok := p.conns[t.addr]; ok {
				if p.zone != "" && t.zone == p.zone {
					local = append(local, len(rt.targets))
				}
				rt.targets = append(rt.targets, c)
				weights = append(weights, t.weight)
				if !slices.Contains(rt.addrs, c) {
					rt.addrs = append(rt.addrs, c)
				}
			} else if !slices.Contains(rt.others, t.addr) {
				rt.others = append(rt.others, t.addr)
			}
		}
		rt.sched = wrr.Schedule(weights)
		// Processes that start together do not all begin with the same
		// instance.
		rt.next.Store(rand.Uint64N(uint64(max(len(rt.sched), 1))))
		if len(local) >= p.zoneMin && len(local) < len(rt.targets) {
			w := make([]int, len(local))
			for i, j := range local {
				w[i] = weights[j]
			}
			rt.zsched = wrr.Schedule(w)
			for i, k := range rt.zsched {
				rt.zsched[i] = uint32(local[k])
			}
			rt.znext.Store(rand.Uint64N(uint64(len(rt.zsched))))
		}
		routes[module] = rt
	}
	p.routes.Store(&routes)
}
