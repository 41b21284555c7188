package router_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"runtime"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	"github.com/switchboard-io/switchboard/grpcwire"
	"github.com/switchboard-io/switchboard/grpcwire/modulepb"
	"github.com/switchboard-io/switchboard/internal/testkit"
	"github.com/switchboard-io/switchboard/pool"
	"github.com/switchboard-io/switchboard/router"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// benchSetup serves an echo module on loopback and returns a raw grpc-go
// client and a router sending through the pool, both to that server.
// With tp set, the server, the pool and the router record spans with it.
func benchSetup(b *testing.B, tp trace.TracerProvider) (raw modulepb.ModuleServiceClient, r *router.Router) {
	b.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = grpcwire.ServeEcho(ctx, lis, "bench", grpcwire.ServerOptions{Logger: quiet, TracerProvider: tp})
	}()
	b.Cleanup(func() { cancel(); <-done })

	cc, err := grpc.NewClient(lis.Addr().String(), grpcwire.DialOptions()...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cc.Close() })
	raw = modulepb.NewModuleServiceClient(cc)

	p := pool.New(pool.Options{Logger: quiet, TracerProvider: tp})
	p.Start(ctx)
	p.Register("bench", lis.Addr().String())
	r, err = router.New(router.Options{Module: "client", Wire: p, Logger: quiet, TracerProvider: tp})
	if err != nil {
		b.Fatal(err)
	}
	// Warm both paths up.
	for i := 0; i < 50; i++ {
		if _, err := raw.Message(ctx, &modulepb.MessageRequest{To: "f.bench.n:in"}); err != nil {
			b.Fatal(err)
		}
		if _, err := r.Send(ctx, &router.Message{To: "f.bench.n:in"}); err != nil {
			b.Fatal(err)
		}
	}
	return raw, r
}

// BenchmarkRoutedVsRaw measures a message routed through router + pool
// against a raw grpc-go unary call with the same payload on the same
// loopback server, interleaved call by call so both see the same machine
// load. It reports the p50/p99 of each, their p50 and p99 ratios, and the
// allocations of one routed and one raw message. tracing=off has no tracer
// provider (the default: spans are no-ops); tracing=on records every span
// of both sides with an SDK provider, sampling everything, batching to an
// exporter that drops them (the raw client itself is not instrumented, so
// the ratio is the whole client-side cost of tracing).
func BenchmarkRoutedVsRaw(b *testing.B) {
	b.Run("tracing=off", func(b *testing.B) { benchRoutedVsRaw(b, nil) })
	b.Run("tracing=on", func(b *testing.B) {
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
		b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		benchRoutedVsRaw(b, tp)
	})
}

func benchRoutedVsRaw(b *testing.B, tp trace.TracerProvider) {
	raw, r := benchSetup(b, tp)
	ctx := context.Background()
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
	rawLat := make([]time.Duration, 0, b.N)
	routedLat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			t0 := time.Now()
			rawCall()
			t1 := time.Now()
			routedCall()
			t2 := time.Now()
			rawLat = append(rawLat, t1.Sub(t0))
			routedLat = append(routedLat, t2.Sub(t1))
		} else {
			t0 := time.Now()
			routedCall()
			t1 := time.Now()
			rawCall()
			t2 := time.Now()
			routedLat = append(routedLat, t1.Sub(t0))
			rawLat = append(rawLat, t2.Sub(t1))
		}
	}
	b.StopTimer()
	testkit.ReportRoutedVsRaw(b, routedLat, rawLat, routedCall, rawCall)
}

// BenchmarkRoutedThroughput sends routed messages from 64 concurrent
// senders (SetParallelism over GOMAXPROCS) over one pooled connection and
// reports messages per second.
func BenchmarkRoutedThroughput(b *testing.B) {
	_, r := benchSetup(b, nil)
	payload := make([]byte, 256)
	b.SetParallelism((64 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			if _, err := r.Send(ctx, &router.Message{From: "f.client.n", To: "f.bench.n:in", Payload: payload}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
}
