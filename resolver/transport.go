package resolver

import (
	"encoding/json"
	"errors"
	"fmt"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/serviceconfig"
	"google.golang.org/grpc/status"
)

// TransportFailuresName is the name of a policy this package registers
// with grpc-go: it runs its child policy unchanged, except that the calls
// its pickers see end as failed only when they failed with UNAVAILABLE (a
// connection or call that failed at the transport, a server or proxy with
// nowhere to send it); any other status, an application's answer, ends as
// a success for them. Around outlier detection, it makes grpc-go eject
// addresses for transport failures only.
const TransportFailuresName = "switchboard_transport_failures"

func init() {
	balancer.Register(transportBuilder{})
}

type transportBuilder struct{}

func (transportBuilder) Name() string { return TransportFailuresName }

// transportConfig is the policy's config: its child's name and config.
type transportConfig struct {
	serviceconfig.LoadBalancingConfig
	child    string
	childCfg serviceconfig.LoadBalancingConfig
}

// ParseConfig reads {"childPolicy":[{"<name>":{…}}, …]}: the first child
// policy registered with grpc-go, and its config.
func (transportBuilder) ParseConfig(js json.RawMessage) (serviceconfig.LoadBalancingConfig, error) {
	var raw struct {
		ChildPolicy []map[string]json.RawMessage `json:"childPolicy"`
	}
	if err := json.Unmarshal(js, &raw); err != nil {
		return nil, fmt.Errorf("%s: config %s: %v", TransportFailuresName, js, err)
	}
	for _, m := range raw.ChildPolicy {
		if len(m) != 1 {
			return nil, fmt.Errorf("%s: a child policy names one policy, got %d", TransportFailuresName, len(m))
		}
		for name, cfg := range m {
			b := balancer.Get(name)
			if b == nil {
				continue
			}
			c := &transportConfig{child: name}
			if p, ok := b.(balancer.ConfigParser); ok {
				pc, err := p.ParseConfig(cfg)
				if err != nil {
					return nil, fmt.Errorf("%s: child policy %s: %v", TransportFailuresName, name, err)
				}
				c.childCfg = pc
			}
			return c, nil
		}
	}
	return nil, fmt.Errorf("%s: no registered child policy in %s", TransportFailuresName, js)
}

func (transportBuilder) Build(cc balancer.ClientConn, opts balancer.BuildOptions) balancer.Balancer {
	return &transportFilter{cc: &filterCC{ClientConn: cc}, opts: opts}
}

// transportFilter builds its child with a ClientConn that wraps the
// child's pickers, and passes everything else through.
type transportFilter struct {
	cc    *filterCC
	opts  balancer.BuildOptions
	name  string
	child balancer.Balancer
}

func (f *transportFilter) UpdateClientConnState(s balancer.ClientConnState) error {
	cfg, ok := s.BalancerConfig.(*transportConfig)
	if !ok {
		return errors.New(TransportFailuresName + ": no config")
	}
	if f.child == nil || f.name != cfg.child {
		if f.child != nil {
			f.child.Close()
		}
		f.child, f.name = balancer.Get(cfg.child).Build(f.cc, f.opts), cfg.child
	}
	s.BalancerConfig = cfg.childCfg
	return f.child.UpdateClientConnState(s)
}

func (f *transportFilter) ResolverError(err error) {
	if f.child != nil {
		f.child.ResolverError(err)
	}
}

func (f *transportFilter) UpdateSubConnState(sc balancer.SubConn, s balancer.SubConnState) {
	if f.child != nil {
		f.child.UpdateSubConnState(sc, s)
	}
}

func (f *transportFilter) Close() {
	if f.child != nil {
		f.child.Close()
	}
}

func (f *transportFilter) ExitIdle() {
	if f.child != nil {
		f.child.ExitIdle()
	}
}

// filterCC wraps the pickers the child publishes.
type filterCC struct{ balancer.ClientConn }

func (c *filterCC) UpdateState(s balancer.State) {
	if s.Picker != nil {
		s.Picker = filterPicker{s.Picker}
	}
	c.ClientConn.UpdateState(s)
}

// filterPicker reports to the child's Done a call that failed with
// another status than UNAVAILABLE as a success.
type filterPicker struct{ balancer.Picker }

func (p filterPicker) Pick(info balancer.PickInfo) (balancer.PickResult, error) {
	r, err := p.Picker.Pick(info)
	if err != nil || r.Done == nil {
		return r, err
	}
	done := r.Done
	r.Done = func(di balancer.DoneInfo) {
		if di.Err != nil && status.Code(di.Err) != codes.Unavailable {
			di.Err = nil
		}
		done(di)
	}
	return r, nil
}
