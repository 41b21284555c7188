package resolver

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync/atomic"

	"google.golang.org/grpc/attributes"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/balancer/endpointsharding"
	"google.golang.org/grpc/balancer/pickfirst"
	"google.golang.org/grpc/connectivity"
	grpcresolver "google.golang.org/grpc/resolver"
	"google.golang.org/grpc/serviceconfig"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/discovery"
	"github.com/switchboard-io/switchboard/internal/wrr"
)

// WeightedName is the name of the weighted balancer this package registers
// with grpc-go: a child per endpoint (pick_first, through grpc-go's
// endpointsharding), and picks over the READY ones by smooth weighted round
// robin on the endpoints' weights (EndpointWeight). Its config,
// {"zone":"<zone>","zoneMinInstances":N}, both optional, prefers the
// endpoints of a zone (EndpointZone): while it has at least N of them (zero:
// discovery.DefaultZoneMin, 2) and one is READY, picks are among its READY ones alone.
const WeightedName = "switchboard_weighted"

// weightedConfig is the weighted policy's config.
type weightedConfig struct {
	serviceconfig.LoadBalancingConfig
	Zone             string `json:"zone,omitempty"`
	ZoneMinInstances int    `json:"zoneMinInstances,omitempty"`
}

func init() {
	balancer.Register(weightedBuilder{})
}

// attribute keys of an endpoint.
type (
	weightKey struct{}
	zoneKey   struct{}
)

// EndpointWeight is the weight the resolver gave an endpoint: the sum of
// the weights of the serving instances at its address; DefaultWeight for
// an endpoint without one.
func EndpointWeight(ep grpcresolver.Endpoint) int {
	if w, ok := ep.Attributes.Value(weightKey{}).(int); ok && w > 0 {
		return w
	}
	return switchboard.DefaultWeight
}

// EndpointZone is the zone the resolver gave an endpoint: the zone of the
// instances at its address ("" when none, or when they differ).
func EndpointZone(ep grpcresolver.Endpoint) string {
	z, _ := ep.Attributes.Value(zoneKey{}).(string)
	return z
}

func withTraffic(ep grpcresolver.Endpoint, weight int, zone string) grpcresolver.Endpoint {
	ep.Attributes = attributes.New(weightKey{}, weight)
	if zone != "" {
		ep.Attributes = ep.Attributes.WithValue(zoneKey{}, zone)
	}
	return ep
}

type weightedBuilder struct{}

func (weightedBuilder) Name() string { return WeightedName }

func (weightedBuilder) ParseConfig(js json.RawMessage) (serviceconfig.LoadBalancingConfig, error) {
	c := &weightedConfig{}
	if err := json.Unmarshal(js, c); err != nil {
		return nil, fmt.Errorf("%s: config %s: %v", WeightedName, js, err)
	}
	if c.ZoneMinInstances < 0 {
		return nil, fmt.Errorf("%s: zoneMinInstances %d: must not be negative", WeightedName, c.ZoneMinInstances)
	}
	if c.ZoneMinInstances == 0 {
		c.ZoneMinInstances = discovery.DefaultZoneMin
	}
	return c, nil
}

func (weightedBuilder) Build(cc balancer.ClientConn, opts balancer.BuildOptions) balancer.Balancer {
	w := &weighted{ClientConn: cc}
	w.child = endpointsharding.NewBalancer(w, opts, balancer.Get(pickfirst.Name).Build, endpointsharding.Options{})
	return w
}

// weighted is the weighted policy: endpointsharding does the children and
// their connections; weighted replaces its picker (it is the ClientConn
// endpointsharding reports to).
type weighted struct {
	balancer.ClientConn
	child balancer.Balancer
	cfg   atomic.Pointer[weightedConfig]
}

func (w *weighted) UpdateClientConnState(s balancer.ClientConnState) error {
	if c, ok := s.BalancerConfig.(*weightedConfig); ok {
		w.cfg.Store(c)
	}
	// The health listener lets a parent policy (outlier detection) take
	// an endpoint out of its child's READY set.
	return w.child.UpdateClientConnState(balancer.ClientConnState{ResolverState: pickfirst.EnableHealthListener(s.ResolverState)})
}

func (w *weighted) ResolverError(err error) { w.child.ResolverError(err) }

func (w *weighted) UpdateSubConnState(sc balancer.SubConn, s balancer.SubConnState) {
	w.child.UpdateSubConnState(sc, s)
}

func (w *weighted) Close()    { w.child.Close() }
func (w *weighted) ExitIdle() { w.child.ExitIdle() }

// UpdateState receives endpointsharding's state: with READY children, the
// picker becomes a weighted one over them; otherwise endpointsharding's own
// (connecting, or failing) is passed on.
func (w *weighted) UpdateState(s balancer.State) {
	var pickers []balancer.Picker
	var weights []int
	children := endpointsharding.ChildStatesFromPicker(s.Picker)
	local := func(ep grpcresolver.Endpoint) bool { return true }
	if c := w.cfg.Load(); c != nil && c.Zone != "" {
		// The zone is preferred while it has enough endpoints and one of
		// them is READY.
		in, ready := 0, false
		for _, ch := range children {
			if EndpointZone(ch.Endpoint) == c.Zone {
				in++
				ready = ready || ch.State.ConnectivityState == connectivity.Ready
			}
		}
		if in >= c.ZoneMinInstances && ready {
			local = func(ep grpcresolver.Endpoint) bool { return EndpointZone(ep) == c.Zone }
		}
	}
	for _, c := range children {
		if c.State.ConnectivityState == connectivity.Ready && local(c.Endpoint) {
			pickers = append(pickers, c.State.Picker)
			weights = append(weights, EndpointWeight(c.Endpoint))
		}
	}
	if len(pickers) == 0 {
		w.ClientConn.UpdateState(s)
		return
	}
	p := &weightedPicker{pickers: pickers, sched: wrr.Schedule(weights)}
	p.next.Store(rand.Uint64N(uint64(len(p.sched))))
	w.ClientConn.UpdateState(balancer.State{ConnectivityState: connectivity.Ready, Picker: p})
}

// weightedPicker walks a weighted round-robin cycle over READY children.
type weightedPicker struct {
	pickers []balancer.Picker
	sched   []uint32
	next    atomic.Uint64
}

func (p *weightedPicker) Pick(info balancer.PickInfo) (balancer.PickResult, error) {
	i := p.next.Add(1) - 1
	return p.pickers[p.sched[i%uint64(len(p.sched))]].Pick(info)
}
