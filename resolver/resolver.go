// Package resolver is a grpc-go name resolver for the scheme "switchboard":
// a standard gRPC client dials "switchboard:///<capability or name>" and is
// balanced over the serving instances that have that capability or that
// name, by their weights, with outlier ejection when the program imports
// resolver/ejection.
//
// The resolver reads a discovery.Cache, so every target of a process shares
// the cache's single catalog watch (and its reconnection) and works with
// every backend. It follows the cache's changes and pushes the union of the
// serving instances (switchboard.Instance.Serving: not stale, not drained,
// check not critical) with that capability and with that name, reduced to
// their dialable host:port addresses (nats:// ones are skipped),
// de-duplicated and sorted, whenever that set or an address's weight or
// zone changes. Each address is an endpoint whose attributes carry its
// weight (the sum of its instances' weights; EndpointWeight) and zone
// (EndpointZone). Whether the set changed is computed from each change,
// never by rescanning the cache, so changes elsewhere in the catalog cost a
// target a few comparisons and no push: a new instance is added as soon as
// the cache sees it, a deregistered, expired, drained or critical one is
// dropped at once (its connections close once the calls on them finish),
// and an empty set is pushed too, so RPCs fail fast instead of reaching
// removed backends. While the cache is stale (the catalog is unreachable)
// the last pushed addresses are kept and no empty set is pushed.
//
// Every push carries the Builder's service config (Options.Ejection):
// grpc-go's outlier_detection_experimental policy (registered by importing
// resolver/ejection; the weighted policy alone without it), counting
// transport failures only (TransportFailuresName), around this package's weighted
// policy (WeightedName, built on grpc-go's endpointsharding), so a
// client needs no service config of its own; one set with
// grpc.WithDefaultServiceConfig is overridden unless the client also
// disables resolver service configs (grpc.WithDisableServiceConfig, where
// RoundRobin still selects the same policies). With Options.Zone, calls
// prefer the endpoints of the client's zone while it has enough of them:
//
//	cache, err := discovery.New(ctx, cat, discovery.Options{})
//	…
//	b := resolver.NewBuilder(cache, resolver.Options{})
//	cc, err := grpc.NewClient("switchboard:///storage",
//		grpc.WithResolvers(b),
//		grpc.WithDefaultServiceConfig(resolver.RoundRobin),
//		grpc.WithTransportCredentials(insecure.NewCredentials()))
//
// The cache must outlive the clients using the Builder; once it is closed
// it reports itself stale and the resolvers keep their last addresses.
package resolver

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	grpcresolver "google.golang.org/grpc/resolver"
	"google.golang.org/grpc/serviceconfig"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/discovery"
)

// Scheme is the URI scheme the Builder resolves.
const Scheme = "switchboard"

// RoundRobin is the default service config clients have been set up with:
// the resolver's own service config with the default Ejection (weighted
// round robin under outlier detection). The resolver pushes its config with
// every update, which grpc-go prefers to a client's default, so this
// constant matters only to a client that disables resolver service
// configs.
const RoundRobin = `{"loadBalancingConfig":[{"switchboard_transport_failures":{"childPolicy":[{"outlier_detection_experimental":{"interval":"10s","baseEjectionTime":"30s","maxEjectionTime":"300s","maxEjectionPercent":50,"failurePercentageEjection":{"threshold":50,"enforcementPercentage":100,"minimumHosts":2,"requestVolume":5},"childPolicy":[{"switchboard_weighted":{}}]}},{"switchboard_weighted":{}}]}},{"switchboard_weighted":{}}]}`

// Target returns the dial target for a capability or name:
// "switchboard:///<key>".
func Target(key string) string { return Scheme + ":///" + key }

// Options configure a Builder.
type Options struct {
	// Logger receives the resolver's logs (nil: slog.Default()).
	Logger *slog.Logger
	// Ejection configures the outlier detection of the service config the
	// resolver pushes.
	Ejection Ejection
	// ServiceConfig, when set, is pushed instead of ServiceConfig(Ejection):
	// a config of your own (a methodConfig with retries, say) that keeps
	// the loadBalancingConfig of ServiceConfig(…) to keep weights and
	// ejection. grpc-go uses a resolver's service config instead of the
	// client's default one, not merged with it.
	ServiceConfig string
	// NoServiceConfig pushes no service config: the client's own default
	// (grpc.WithDefaultServiceConfig) applies, pick_first without one.
	NoServiceConfig bool
	// Zone is the client's zone: calls go to the target's endpoints in that
	// zone, by weight, while it has ZoneMinInstances (zero: 2) of them and
	// one is READY; otherwise to all (see WeightedName).
	Zone             string
	ZoneMinInstances int
}

// Ejection configures grpc-go's outlier detection (its failure percentage
// algorithm) in the resolver's service config. Every Interval, an address
// that carried at least MinCalls calls in the interval, FailurePercent % or
// more of which failed with UNAVAILABLE (the transport failed, or a server
// or proxy had nowhere to send the call; application errors do not count:
// TransportFailuresName), is ejected — its connection skipped by the
// picker — for BaseTime × the number of times in a row it was ejected, up
// to MaxTime, never more than MaxPercent % of the target's addresses at
// once (at least one), and returns on its own. Ejection applies only when
// the target has at least two addresses. An address refusing connections
// carries no calls (its connection is not READY, so it is never picked)
// and returns as soon as it accepts them.
type Ejection struct {
	// Off pushes the weighted policy alone, without outlier detection.
	Off bool
	// Interval between two analyses (zero: 10 s).
	Interval time.Duration
	// BaseTime (zero: 30 s) and MaxTime (zero: 300 s) of an ejection.
	BaseTime, MaxTime time.Duration
	// MaxPercent of a target's addresses ejected at once (zero: 50).
	MaxPercent int
	// FailurePercent of an address's calls that ejects it (zero: 50), and
	// MinCalls it must have carried in the interval (zero: 5).
	FailurePercent, MinCalls int

	zone    string // Options.Zone, for the weighted policy's config
	zoneMin int
}

// ServiceConfig returns the service config the resolver pushes with e: the
// weighted policy under outlier detection, which sees only transport
// failures (TransportFailuresName), and the weighted policy alone as
// fallback (or with e.Off). Outlier detection needs grpc-go's balancer of
// that name, which importing resolver/ejection registers; without it the
// transport-failure policy runs the weighted policy directly.
func ServiceConfig(e Ejection) string {
	weighted := `{"` + WeightedName + `":{}}`
	if e.zone != "" {
		weighted = fmt.Sprintf(`{"`+WeightedName+`":{"zone":%q,"zoneMinInstances":%d}}`, e.zone, max(e.zoneMin, 0))
	}
	if e.Off {
		return `{"loadBalancingConfig":[` + weighted + `]}`
	}
	dur := func(d, def time.Duration) string {
		if d <= 0 {
			d = def
		}
		return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
	}
	pct := func(v, def int) int {
		if v <= 0 || v > 100 {
			return def
		}
		return v
	}
	return fmt.Sprintf(`{"loadBalancingConfig":[{"`+TransportFailuresName+`":{"childPolicy":[{"outlier_detection_experimental":{"interval":%q,"baseEjectionTime":%q,"maxEjectionTime":%q,"maxEjectionPercent":%d,`+
		`"failurePercentageEjection":{"threshold":%d,"enforcementPercentage":100,"minimumHosts":2,"requestVolume":%d},"childPolicy":[%s]}},%s]}},%s]}`,
		dur(e.Interval, 10*time.Second), dur(e.BaseTime, 30*time.Second), dur(e.MaxTime, 300*time.Second), pct(e.MaxPercent, 50),
		pct(e.FailurePercent, 50), cmp.Or(max(e.MinCalls, 0), 5), weighted, weighted, weighted)
}

// Builder builds resolvers for "switchboard:///<key>" targets over one
// discovery cache. Pass it to grpc.WithResolvers, or to Register for every
// client of the process.
type Builder struct {
	cache  *discovery.Cache
	log    *slog.Logger
	config string // the service config pushed ("": none)
}

// NewBuilder returns a Builder reading cache.
func NewBuilder(cache *discovery.Cache, opts Options) *Builder {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	e := opts.Ejection
	e.zone, e.zoneMin = opts.Zone, opts.ZoneMinInstances
	b := &Builder{cache: cache, log: opts.Logger, config: cmp.Or(opts.ServiceConfig, ServiceConfig(e))}
	if opts.NoServiceConfig {
		b.config = ""
	}
	return b
}

// Register installs a Builder for cache as the process-wide resolver of the
// "switchboard" scheme (grpc-go's global registry; call it at init time, it
// is not safe to race with dials). It returns the builder.
func Register(cache *discovery.Cache, opts Options) *Builder {
	b := NewBuilder(cache, opts)
	grpcresolver.Register(b)
	return b
}

// Scheme returns "switchboard".
func (b *Builder) Scheme() string { return Scheme }

// ParseKey returns the capability or name a target's endpoint designates
// (leading slashes trimmed) and which of the two it can be: a capability
// token ([A-Za-z0-9][A-Za-z0-9_.:-]{0,62}) and/or a sanitised name. It is an
// error when it is neither.
func ParseKey(endpoint string) (key string, asCapability, asName bool, err error) {
	key = strings.TrimLeft(endpoint, "/")
	asCapability = switchboard.ValidateCapability(key) == nil
	asName = switchboard.IsSanitized(key)
	if !asCapability && !asName {
		return key, false, false, &switchboard.FieldError{
			Field: "target", Value: endpoint,
			Reason: "want switchboard:///<capability or name>, e.g. switchboard:///storage",
		}
	}
	return key, asCapability, asName, nil
}

// Build starts a resolver for the target's capability and/or name. Its
// first addresses are pushed from the cache's current view, without
// waiting for a change. A target with an authority, a query or a fragment
// is refused: the resolver has no options to read from them.
func (b *Builder) Build(target grpcresolver.Target, cc grpcresolver.ClientConn, _ grpcresolver.BuildOptions) (grpcresolver.Resolver, error) {
	if b.cache == nil {
		return nil, errors.New("switchboard resolver: the Builder has no discovery cache")
	}
	if u := target.URL; u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		// Nothing reads them: a filter such as ?zone=eu would be ignored
		// and the client balanced over every zone.
		return nil, &switchboard.FieldError{
			Field: "target", Value: u.String(),
			Reason: "takes no query (?…) or fragment (#…): want switchboard:///<capability or name>",
		}
	} else if u.Host != "" || u.User != nil {
		// switchboard://eu/storage: nothing reads an authority either (the
		// cache is the Builder's), and switchboard://storage/x would
		// otherwise resolve "x".
		return nil, &switchboard.FieldError{
			Field: "target", Value: u.String(),
			Reason: "takes no authority (switchboard://<authority>/…): want three slashes, switchboard:///<capability or name>",
		}
	}
	key, asCap, asName, err := ParseKey(target.Endpoint())
	if err != nil {
		return nil, err
	}
	var sc *serviceconfig.ParseResult
	if b.config != "" {
		sc = cc.ParseServiceConfig(b.config)
		if sc == nil {
			return nil, fmt.Errorf("switchboard resolver: service config %s: not parsed", b.config)
		}
		if sc.Err != nil {
			return nil, fmt.Errorf("switchboard resolver: service config %s: %w", b.config, sc.Err)
		}
	}
	r := &cacheResolver{
		b: b, cc: cc, key: key, asCap: asCap, asName: asName, sc: sc,
		kick:   make(chan struct{}, 1),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
		counts: map[string]*endpoint{},
	}
	// The snapshot and the changes after it are the whole history: count
	// the snapshot's addresses, then follow. The cache may call r.changed
	// from now on, before Build is done: its news (staleness included) is
	// newer than the snapshot's, and it may already have filled the kick
	// slot. The filled slot makes the goroutine push the first set at once.
	snap, unsubscribe := b.cache.SubscribeChanges(r.changed)
	r.unsubscribe = unsubscribe
	stale, staleErr := snap.Stale()
	r.mu.Lock()
	if !r.heard {
		r.cacheStale, r.cacheErr = stale, staleErr
	}
	r.mu.Unlock()
	for in := range r.candidates(snap) {
		if t, ok := r.contributes(&in); ok {
			r.add(t)
		}
	}
	r.signal()
	go r.run()
	return r, nil
}

// cacheResolver follows the cache for one key. Only its goroutine calls the
// ClientConn.
type cacheResolver struct {
	b             *Builder
	cc            grpcresolver.ClientConn
	key           string
	asCap, asName bool
	sc            *serviceconfig.ParseResult

	kick        chan struct{} // 1 slot: "there is news"
	stop        chan struct{}
	done        chan struct{}
	unsubscribe func()
	once        sync.Once

	mu         sync.Mutex // guards the news the cache's goroutine leaves
	queue      []delta
	heard      bool // changed has run: cacheStale is newer than Build's snapshot
	cacheStale bool
	cacheErr   error

	// Owned by run.
	spare    []delta
	counts   map[string]*endpoint // dialable address → its serving instances' traffic
	last     []traffic            // the endpoints last pushed
	pushed   bool                 // whether anything was pushed yet
	stale    bool                 // the cache was stale at the last computation
	reported bool                 // the stale, empty set was reported in this stale spell
}

// traffic is what one instance contributes to the target: its address,
// weight and zone (as pushed: an address, the sum of the weights, the
// common zone).
type traffic struct {
	addr   string
	weight int
	zone   string
}

// endpoint is an address's serving instances: their number, total weight
// and zones (zone → instances).
type endpoint struct {
	n, weight int
	zones     map[string]int
}

// delta is one instance's change as this target sees it: what it stopped
// and what it started contributing (addr "" for nothing).
type delta struct{ old, new traffic }

// candidates iterates over the instances of s that may contribute: those
// with the key as capability, then those with it as name.
func (r *cacheResolver) candidates(s *discovery.Snapshot) func(func(switchboard.Instance) bool) {
	return func(yield func(switchboard.Instance) bool) {
		if r.asCap {
			for in := range s.Instances(switchboard.Query{Capability: r.key}) {
				if !yield(in) {
					return
				}
			}
		}
		if r.asName {
			for in := range s.Instances(switchboard.Query{Name: r.key}) {
				if r.asCap && in.HasCapability(r.key) {
					continue // counted above
				}
				if !yield(in) {
					return
				}
			}
		}
	}
}

// contributes returns what in adds to the target's set, if anything: one
// address per serving instance, however it matches.
func (r *cacheResolver) contributes(in *switchboard.Instance) (traffic, bool) {
	if in == nil || !in.Serving() || !switchboard.IsDialable(in.Address) {
		return traffic{}, false
	}
	if (r.asCap && in.HasCapability(r.key)) || (r.asName && in.Name == r.key) {
		return traffic{addr: in.Address, weight: in.TrafficWeight(), zone: in.Zone}, true
	}
	return traffic{}, false
}

// add counts t in its address's endpoint.
func (r *cacheResolver) add(t traffic) {
	e := r.counts[t.addr]
	if e == nil {
		e = &endpoint{zones: map[string]int{}}
		r.counts[t.addr] = e
	}
	e.n++
	e.weight += t.weight
	e.zones[t.zone]++
}

// sub removes t from its address's endpoint.
func (r *cacheResolver) sub(t traffic) {
	e := r.counts[t.addr]
	if e == nil {
		return
	}
	e.n--
	e.weight -= t.weight
	if e.zones[t.zone]--; e.zones[t.zone] <= 0 {
		delete(e.zones, t.zone)
	}
	if e.n <= 0 {
		delete(r.counts, t.addr)
	}
}

// changed is the cache subscription, run on the cache's goroutine: it keeps
// the changes that concern this target and signals; it never blocks.
func (r *cacheResolver) changed(s *discovery.Snapshot, changes []discovery.Change) {
	stale, err := s.Stale()
	r.mu.Lock()
	news := stale != r.cacheStale
	r.heard, r.cacheStale, r.cacheErr = true, stale, err
	for _, c := range changes {
		o, okO := r.contributes(c.Old)
		n, okN := r.contributes(c.New)
		if (okO || okN) && (o != n || okO != okN) {
			r.queue = append(r.queue, delta{old: o, new: n})
			news = true
		}
	}
	r.mu.Unlock()
	if news {
		r.signal()
	}
}

// signal never blocks and does no work: a pending signal already covers
// this one.
func (r *cacheResolver) signal() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// ResolveNow has nothing to do: the addresses follow the cache's changes
// as they come (gRPC calls it after connection failures).
func (r *cacheResolver) ResolveNow(grpcresolver.ResolveNowOptions) {}

// Close unsubscribes from the cache and waits for the resolver's goroutine:
// once it returns, the ClientConn is not called again.
func (r *cacheResolver) Close() {
	r.once.Do(func() {
		r.unsubscribe()
		close(r.stop)
		<-r.done
	})
}

func (r *cacheResolver) run() {
	defer close(r.done)
	for {
		select {
		case <-r.stop:
			return
		case <-r.kick:
		}
		// Close may have come with the kick: do not call the ClientConn
		// after it.
		select {
		case <-r.stop:
			return
		default:
		}
		r.update()
	}
}

// update applies the news to the address counts and pushes the set if it
// changed; while the cache is stale it keeps the last pushed set.
func (r *cacheResolver) update() {
	r.mu.Lock()
	deltas := r.queue
	r.queue = r.spare[:0]
	stale, staleErr := r.cacheStale, r.cacheErr
	r.mu.Unlock()
	// A queued delta changed what an instance contributes: whether the
	// set did is known once it is compared with the last one pushed.
	changed := !r.pushed || len(deltas) > 0
	for _, d := range deltas {
		if d.old.addr != "" {
			r.sub(d.old)
		}
		if d.new.addr != "" {
			r.add(d.new)
		}
	}
	r.spare = deltas
	if !changed && stale == r.stale {
		return
	}
	addrs := r.endpoints()
	if stale {
		if !r.stale {
			r.stale = true
			r.b.log.Warn("switchboard resolver: discovery cache is stale; keeping the last known addresses",
				"target", r.key, "addresses", r.last, "err", staleErr)
		}
		switch {
		case len(addrs) == 0:
			// Never replace what we have with nothing on an unconfirmed
			// view; say why there is nothing to offer (gRPC keeps a
			// working set across a resolver error).
			if !r.reported {
				r.reported = true
				if staleErr == nil {
					staleErr = errors.New("catalog unreachable")
				}
				r.cc.ReportError(fmt.Errorf("switchboard resolver: %q: discovery cache is stale and offers no address: %w", r.key, staleErr))
			}
			return
		case r.pushed:
			if !slices.Equal(addrs, r.last) {
				r.b.log.Debug("switchboard resolver: stale view differs; keeping the last known addresses",
					"target", r.key, "addresses", r.last, "stale_view", addrs)
			}
			return
		}
		// Nothing pushed yet: the cache's last known set is better than
		// none.
	} else if r.stale {
		r.stale, r.reported = false, false
		r.b.log.Info("switchboard resolver: discovery cache is fresh again", "target", r.key)
	}
	if r.pushed && slices.Equal(addrs, r.last) {
		return
	}
	r.last, r.pushed = addrs, true
	st := grpcresolver.State{
		Addresses:     make([]grpcresolver.Address, 0, len(addrs)),
		Endpoints:     make([]grpcresolver.Endpoint, 0, len(addrs)),
		ServiceConfig: r.sc,
	}
	for _, a := range addrs {
		ad := grpcresolver.Address{Addr: a.addr}
		st.Addresses = append(st.Addresses, ad)
		st.Endpoints = append(st.Endpoints, withTraffic(grpcresolver.Endpoint{Addresses: []grpcresolver.Address{ad}}, a.weight, a.zone))
	}
	r.b.log.Debug("switchboard resolver: update", "target", r.key, "addresses", addrs)
	// An empty set is refused by the balancer (ErrBadResolverState): that
	// is the point, RPCs fail instead of reaching removed backends.
	if err := r.cc.UpdateState(st); err != nil && len(addrs) > 0 {
		r.b.log.Warn("switchboard resolver: update rejected", "target", r.key, "err", err)
	}
}

// endpoints returns the target's endpoints, sorted by address: the
// addresses some serving instance contributes, each with the sum of their
// weights and their zone when they share one.
func (r *cacheResolver) endpoints() []traffic {
	out := make([]traffic, 0, len(r.counts))
	for a, e := range r.counts {
		t := traffic{addr: a, weight: e.weight}
		if len(e.zones) == 1 {
			for z := range e.zones {
				t.zone = z
			}
		}
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b traffic) int { return strings.Compare(a.addr, b.addr) })
	return out
}
