package pool_test

import (
	"context"
	"net"
	"runtime"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	grpcresolver "google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"

	"github.com/switchboard-io/switchboard/grpcwire"
	"github.com/switchboard-io/switchboard/grpcwire/modulepb"
	"github.com/switchboard-io/switchboard/pool"
	"github.com/switchboard-io/switchboard/router"
)

// BenchmarkWeightedRoutedVsRaw measures a message routed through router +
// pool to a module of three instances weighted 100/100/200, with outlier
// ejection on (the default), against a raw grpc-go unary call with the
// same payload over the same three servers (grpc-go's round_robin),
// interleaved call by call so both see the same machine load. It reports the p50/p99 of each, their ratios, and
// the allocations of one routed and one raw message (both sides of the
// loopback call). -least=true uses Options.LeastRequest.
func BenchmarkWeightedRoutedVsRaw(b *testing.B) {
	for _, least := range []bool{false, true} {
		name := "wrr"
		if least {
			name = "least-request"
		}
		b.Run(name, func(b *testing.B) { benchWeighted(b, least) })
	}
}

func benchWeighted(b *testing.B, least bool) {
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	var addrs []string
	for i := 0; i < 3; i++ {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = grpcwire.ServeEcho(ctx, lis, "bench", grpcwire.ServerOptions{Logger: quiet})
		}()
		b.Cleanup(func() { cancel(); <-done })
		addrs = append(addrs, lis.Addr().String())
	}
	// The raw client spreads its calls over the same three servers, with
	// grpc-go's round_robin.
	mr := manual.NewBuilderWithScheme("bench")
	var eps []grpcresolver.Endpoint
	for _, a := range addrs {
		eps = append(eps, grpcresolver.Endpoint{Addresses: []grpcresolver.Address{{Addr: a}}})
	}
	mr.InitialState(grpcresolver.State{Endpoints: eps})
	cc, err := grpc.NewClient("bench:///x", grpcwire.DialOptions(grpc.WithResolvers(mr),
		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"round_robin":{}}]}`))...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cc.Close() })
	raw := modulepb.NewModuleServiceClient(cc)

	p := pool.New(pool.Options{Logger: quiet, LeastRequest: least})
	p.Start(ctx)
	for i, w := range []int{100, 100, 200} {
		p.AddWeightedInstance("bench", []string{"a", "b", "c"}[i], addrs[i], w, "")
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		ready := 0
		for _, s := range p.States() {
			if s == connectivity.Ready {
				ready++
			}
		}
		if ready == 3 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("the pool's connections are not READY")
		}
	}
	r, err := router.New(router.Options{Module: "client", Wire: p, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	payload := make([]byte, 256)
	rawCall := func() {
		if _, err := raw.Message(ctx, &modulepb.MessageRequest{ID: "x", From: "f.client.n", To: "f.bench.n:in", Payload: payload, EdgeID: "e"}); err != nil {
			b.Fatal(err)
		}
	}
	routedCall := func() {
		if _, err := r.Send(ctx, &router.Message{ID: "x", From: "f.client.n", To: "f.bench.n:in", Payload: payload, EdgeID: "e"}); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < 100; i++ {
		rawCall()
		routedCall()
	}
	rawLat := make([]time.Duration, 0, b.N)
	routedLat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		first, second := rawCall, routedCall
		if i%2 == 1 {
			first, second = routedCall, rawCall
		}
		t0 := time.Now()
		first()
		t1 := time.Now()
		second()
		t2 := time.Now()
		if i%2 == 0 {
			rawLat, routedLat = append(rawLat, t1.Sub(t0)), append(routedLat, t2.Sub(t1))
		} else {
			routedLat, rawLat = append(routedLat, t1.Sub(t0)), append(rawLat, t2.Sub(t1))
		}
	}
	b.StopTimer()
	slices.Sort(rawLat)
	slices.Sort(routedLat)
	pct := func(d []time.Duration, p float64) float64 { return float64(d[int(float64(len(d)-1)*p)]) }
	b.ReportMetric(pct(rawLat, 0.50), "raw-p50-ns")
	b.ReportMetric(pct(rawLat, 0.99), "raw-p99-ns")
	b.ReportMetric(pct(routedLat, 0.50), "routed-p50-ns")
	b.ReportMetric(pct(routedLat, 0.99), "routed-p99-ns")
	b.ReportMetric(pct(routedLat, 0.50)/pct(rawLat, 0.50), "p50-ratio")
	b.ReportMetric(pct(routedLat, 0.99)/pct(rawLat, 0.99), "p99-ratio")
	b.ReportMetric(allocsPerCall(routedCall), "routed-allocs/msg")
	b.ReportMetric(allocsPerCall(rawCall), "raw-allocs/msg")
}

// allocsPerCall counts the allocations of f (both sides of the loopback
// call: the servers share the process).
func allocsPerCall(f func()) float64 {
	const n = 200
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for i := 0; i < n; i++ {
		f()
	}
	runtime.ReadMemStats(&m1)
	return float64(m1.Mallocs-m0.Mallocs) / n
}
