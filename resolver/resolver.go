// Package resolver is a grpc-go name resolver for the scheme "switchboard"
// (SPEC §4): a standard gRPC client dials "switchboard:///<capability or
// name>" and is balanced over the live instances that have that capability
// or that name.
//
// The resolver is fed by Catalog.Watch, so it works with every backend and
// follows changes as they are pushed: a new instance is added at once, a
// deregistered or expired one is dropped at once, and while the catalog is
// unreachable the last known addresses are kept. Only host:port addresses
// are passed to gRPC (nats:// ones are skipped). Pair it with the
// round_robin policy:
//
//	b := resolver.NewBuilder(cat, resolver.Options{})
//	cc, err := grpc.NewClient("switchboard:///storage",
//		grpc.WithResolvers(b),
//		grpc.WithDefaultServiceConfig(resolver.RoundRobin),
//		grpc.WithTransportCredentials(insecure.NewCredentials()))
package resolver

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	grpcresolver "google.golang.org/grpc/resolver"

	"github.com/switchboard-io/switchboard"
)

// Scheme is the URI scheme the Builder resolves.
const Scheme = "switchboard"

// RoundRobin is a default service config selecting the round_robin policy.
const RoundRobin = `{"loadBalancingConfig":[{"round_robin":{}}]}`

// Target returns the dial target for a capability or name:
// "switchboard:///<key>".
func Target(key string) string { return Scheme + ":///" + key }

// Options configure a Builder.
type Options struct {
	// Logger receives the resolver's logs (nil: slog.Default()).
	Logger *slog.Logger
}

// Builder builds resolvers for "switchboard:///<key>" targets over one
// catalog. Pass it to grpc.WithResolvers, or to Register for every client
// of the process.
type Builder struct {
	cat switchboard.Catalog
	log *slog.Logger
}

// NewBuilder returns a Builder watching cat.
func NewBuilder(cat switchboard.Catalog, opts Options) *Builder {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Builder{cat: cat, log: opts.Logger}
}

// Register installs a Builder for cat as the process-wide resolver of the
// "switchboard" scheme (grpc-go's global registry; call it at init time, it
// is not safe to race with dials). It returns the builder.
func Register(cat switchboard.Catalog, opts Options) *Builder {
	b := NewBuilder(cat, opts)
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

// Build starts watching the catalog for the target's capability and name.
func (b *Builder) Build(target grpcresolver.Target, cc grpcresolver.ClientConn, _ grpcresolver.BuildOptions) (grpcresolver.Resolver, error) {
	key, asCap, asName, err := ParseKey(target.Endpoint())
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &watchResolver{b: b, cc: cc, key: key, cancel: cancel, done: make(chan struct{})}
	var queries []switchboard.Query
	if asCap {
		queries = append(queries, switchboard.Query{Capability: key})
	}
	if asName {
		queries = append(queries, switchboard.Query{Name: key})
	}
	go r.run(ctx, queries)
	return r, nil
}

// watchResolver merges one watch per query and pushes the union of their
// live, dialable addresses to the ClientConn.
type watchResolver struct {
	b      *Builder
	cc     grpcresolver.ClientConn
	key    string
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// ResolveNow does nothing: changes are pushed by the catalog watch.
func (r *watchResolver) ResolveNow(grpcresolver.ResolveNowOptions) {}

// Close stops the watches.
func (r *watchResolver) Close() {
	r.once.Do(func() {
		r.cancel()
		<-r.done
	})
}

// watchState is one query's watch: its channel (nil while re-watching), the
// instances it reported, and whether its current snapshot is complete.
type watchState struct {
	q       switchboard.Query
	ch      <-chan switchboard.Event
	set     map[string]switchboard.Instance // id → instance, applied
	pending map[string]switchboard.Instance // snapshot being received
	synced  bool                            // received a first EventSynced
	retry   <-chan time.Time
	backoff time.Duration
}

func (r *watchResolver) run(ctx context.Context, queries []switchboard.Query) {
	defer close(r.done)
	ws := make([]*watchState, len(queries))
	for i, q := range queries {
		ws[i] = &watchState{q: q, set: map[string]switchboard.Instance{}, backoff: 100 * time.Millisecond}
		r.watch(ctx, ws[i])
	}
	var last []string
	pushed := false
	for {
		changed, ok := r.step(ctx, ws)
		if !ok {
			return
		}
		if !changed {
			continue
		}
		ready := true
		for _, w := range ws {
			ready = ready && w.synced
		}
		if !ready {
			continue
		}
		addrs := r.addresses(ws)
		if pushed && slices.Equal(addrs, last) {
			continue
		}
		last, pushed = addrs, true
		st := grpcresolver.State{}
		for _, a := range addrs {
			ad := grpcresolver.Address{Addr: a}
			st.Addresses = append(st.Addresses, ad)
			st.Endpoints = append(st.Endpoints, grpcresolver.Endpoint{Addresses: []grpcresolver.Address{ad}})
		}
		r.b.log.Debug("switchboard resolver: update", "target", r.key, "addresses", addrs)
		if err := r.cc.UpdateState(st); err != nil && len(addrs) > 0 {
			r.b.log.Warn("switchboard resolver: update rejected", "target", r.key, "err", err)
		}
	}
}

// watch starts (or restarts) one query's watch; on failure it arms the
// retry timer.
func (r *watchResolver) watch(ctx context.Context, w *watchState) {
	ch, err := r.b.cat.Watch(ctx, w.q)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		r.b.log.Warn("switchboard resolver: watch failed; retrying", "target", r.key, "err", err, "retry_in", w.backoff)
		r.cc.ReportError(err)
		w.retry = time.After(w.backoff)
		w.backoff = min(2*w.backoff, 10*time.Second)
		return
	}
	w.ch, w.retry = ch, nil
	w.pending = map[string]switchboard.Instance{}
}

// step handles one event (or retry) of any watch. It reports whether the
// applied sets may have changed, and false for ok when ctx ended.
func (r *watchResolver) step(ctx context.Context, ws []*watchState) (changed, ok bool) {
	// At most two watches: select over both without reflection.
	var ch0, ch1 <-chan switchboard.Event
	var rt0, rt1 <-chan time.Time
	ch0, rt0 = ws[0].ch, ws[0].retry
	if len(ws) > 1 {
		ch1, rt1 = ws[1].ch, ws[1].retry
	}
	var w *watchState
	var ev switchboard.Event
	var open bool
	select {
	case <-ctx.Done():
		return false, false
	case ev, open = <-ch0:
		w = ws[0]
	case ev, open = <-ch1:
		w = ws[1]
	case <-rt0:
		r.watch(ctx, ws[0])
		return false, true
	case <-rt1:
		r.watch(ctx, ws[1])
		return false, true
	}
	if !open {
		if ctx.Err() != nil {
			return false, false
		}
		// The stream ended early: keep what we know and watch again; the
		// new snapshot replaces the set at its sync.
		r.b.log.Warn("switchboard resolver: watch ended; watching again", "target", r.key)
		w.ch = nil
		w.retry = time.After(w.backoff)
		w.backoff = min(2*w.backoff, 10*time.Second)
		return false, true
	}
	in := ev.Instance
	switch ev.Kind {
	case switchboard.EventAdded, switchboard.EventUpdated:
		if w.pending != nil {
			w.pending[in.ID] = in
			return false, true
		}
		if in.Stale {
			delete(w.set, in.ID)
		} else {
			w.set[in.ID] = in
		}
		return true, true
	case switchboard.EventRemoved:
		if w.pending != nil {
			delete(w.pending, in.ID)
			return false, true
		}
		delete(w.set, in.ID)
		return true, true
	case switchboard.EventSynced:
		if w.pending != nil {
			w.set = w.pending
			w.pending = nil
		}
		w.synced = true
		w.backoff = 100 * time.Millisecond
		return true, true
	case switchboard.EventError:
		r.b.log.Warn("switchboard resolver: catalog unreachable; keeping the last known addresses", "target", r.key, "err", ev.Err)
	}
	return false, true
}

// addresses returns the sorted, de-duplicated dialable addresses of the
// live instances of every watch.
func (r *watchResolver) addresses(ws []*watchState) []string {
	var out []string
	for _, w := range ws {
		for _, in := range w.set {
			if in.Stale || !switchboard.IsDialable(in.Address) {
				continue
			}
			out = append(out, in.Address)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
