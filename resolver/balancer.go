package resolver

import (
	"math/rand/v2"
	"sync/atomic"

	"google.golang.org/grpc/attributes"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/balancer/endpointsharding"
	"google.golang.org/grpc/balancer/pickfirst"
	"google.golang.org/grpc/connectivity"
	grpcresolver "google.golang.org/grpc/resolver"

	// grpc-go's outlier_detection_experimental balancer, which
	// ServiceConfig wraps around the weighted policy, is registered only
	// by this package.
	_ "google.golang.org/grpc/xds"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/wrr"
)

// WeightedName is the name of the weighted balancer this package registers
// with grpc-go: a child per endpoint (pick_first, through grpc-go's
// endpointsharding), and picks over the READY ones by smooth weighted round
// robin on the endpoints' weights (EndpointWeight).
const WeightedName = "switchboard_weighted"

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
}

func (w *weighted) UpdateClientConnState(s balancer.ClientConnState) error {
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
	for _, c := range endpointsharding.ChildStatesFromPicker(s.Picker) {
		if c.State.ConnectivityState == connectivity.Ready {
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
