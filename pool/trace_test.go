package pool

import (
	"context"
	"net"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc"

	"github.com/switchboard-io/switchboard/grpcwire"
	"github.com/switchboard-io/switchboard/grpcwire/modulepb"
	"github.com/switchboard-io/switchboard/internal/testkit"
	"github.com/switchboard-io/switchboard/router"
)

// TestTraceAcrossThreeModules: a message from a client to module A, which
// sends to B, which sends to C, each module its own gRPC server with its own
// pool, is one trace whose spans nest in hop order: send → gRPC client →
// gRPC server → handle → send → … .
func TestTraceAcrossThreeModules(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })

	addrs := map[string]string{}
	serve := func(module, next string) {
		p := newPool(t, Options{TracerProvider: tp})
		r, err := router.New(router.Options{Module: module, Wire: p, Logger: quiet, TracerProvider: tp})
		if err != nil {
			t.Fatal(err)
		}
		r.HandleDefault(func(ctx context.Context, m *router.Message) ([]byte, error) {
			if next == "" {
				return append(m.Payload, " C"...), nil
			}
			p.Register(next, addrs[next])
			out, err := r.Send(ctx, &router.Message{From: m.To, To: "f." + next + ".n:in", Payload: append(m.Payload, (" " + module)...)})
			return out, err
		})
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addrs[module] = lis.Addr().String()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = grpcwire.Serve(ctx, lis, r.Dispatch, grpcwire.ServerOptions{Logger: quiet, GracePeriod: time.Second, TracerProvider: tp})
		}()
		t.Cleanup(func() { cancel(); <-done })
	}
	serve("mod-c", "")
	serve("mod-b", "mod-c")
	serve("mod-a", "mod-b")

	p := newPool(t, Options{TracerProvider: tp})
	p.Register("mod-a", addrs["mod-a"])
	client, err := router.New(router.Options{Wire: p, Logger: quiet, TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	out, err := client.Send(ctx, &router.Message{To: "f.mod-a.n:in", Payload: []byte("via")})
	if err != nil || string(out) != "via mod-a mod-b C" {
		t.Fatalf("chain: %q %v", out, err)
	}
	// Per hop: the router's send, otelgrpc's client and server spans, the
	// router's handle. Server spans may end just after the reply arrived.
	testkit.WaitUntil(t, "12 spans", func() bool { return len(exp.GetSpans()) >= 12 })
	spans := exp.GetSpans()
	if len(spans) != 12 {
		t.Fatalf("%d spans, want 12", len(spans))
	}
	byID := map[trace.SpanID]tracetest.SpanStub{}
	traceID := spans[0].SpanContext.TraceID()
	var last tracetest.SpanStub
	for _, s := range spans {
		if s.SpanContext.TraceID() != traceID {
			t.Fatalf("span %s in trace %s, want one trace %s", s.Name, s.SpanContext.TraceID(), traceID)
		}
		byID[s.SpanContext.SpanID()] = s
		if s.Name == "switchboard.handle" && attr(s, "switchboard.module") == "mod-c" {
			last = s
		}
	}
	// Walk from C's handle span up to the root.
	var got []string
	for s, ok := last, last.Name != ""; ok; s, ok = byID[s.Parent.SpanID()] {
		name := s.Name
		if m := attr(s, "switchboard.module"); m != "" {
			name += " " + m
		}
		got = append(got, name)
	}
	want := []string{
		"switchboard.handle mod-c", "module.ModuleService/Message", "module.ModuleService/Message", "switchboard.send mod-c",
		"switchboard.handle mod-b", "module.ModuleService/Message", "module.ModuleService/Message", "switchboard.send mod-b",
		"switchboard.handle mod-a", "module.ModuleService/Message", "module.ModuleService/Message", "switchboard.send mod-a",
	}
	if len(got) != len(want) {
		t.Fatalf("parent chain from C's handle span:\n%v\nwant\n%v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("parent chain from C's handle span:\n%v\nwant\n%v", got, want)
		}
	}
	// gRPC spans alternate server (child) and client (parent).
	for i := 1; i < len(got); i += 4 {
		s := last
		for j := 0; j < i; j++ {
			s = byID[s.Parent.SpanID()]
		}
		if s.SpanKind != trace.SpanKindServer || byID[s.Parent.SpanID()].SpanKind != trace.SpanKindClient {
			t.Fatalf("gRPC spans at %d: %v under %v", i, s.SpanKind, byID[s.Parent.SpanID()].SpanKind)
		}
	}
}

func attr(s tracetest.SpanStub, k string) string {
	for _, a := range s.Attributes {
		if string(a.Key) == k {
			return a.Value.Emit()
		}
	}
	return ""
}

// TestTraceCrossesAnUntracedModule: a module whose process records no spans
// (no tracer provider: the gRPC wire is not instrumented there) still
// carries the trace on, from the request metadata of an SDK-like caller to
// the request metadata of its own sends, so the module behind it continues
// the caller's trace.
func TestTraceCrossesAnUntracedModule(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	off := noop.NewTracerProvider()

	serveWith := func(module string, tp trace.TracerProvider, h func(r *router.Router, p *Pool) router.Handler) string {
		p := newPool(t, Options{TracerProvider: tp})
		r, err := router.New(router.Options{Module: module, Wire: p, Logger: quiet, TracerProvider: tp})
		if err != nil {
			t.Fatal(err)
		}
		r.HandleDefault(h(r, p))
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = grpcwire.Serve(ctx, lis, r.Dispatch, grpcwire.ServerOptions{Logger: quiet, GracePeriod: time.Second, TracerProvider: tp})
		}()
		t.Cleanup(func() { cancel(); <-done })
		return lis.Addr().String()
	}
	cAddr := serveWith("mod-c", tp, func(*router.Router, *Pool) router.Handler { return router.Echo })
	bAddr := serveWith("mod-b", off, func(r *router.Router, p *Pool) router.Handler {
		p.Register("mod-c", cAddr)
		return func(ctx context.Context, m *router.Message) ([]byte, error) {
			return r.Send(ctx, &router.Message{To: "f.mod-c.n:in", Payload: m.Payload})
		}
	})
	// The caller is SDK-like: otelgrpc on a plain connection, the trace in
	// the request metadata only (nothing in the message's Metadata).
	cc, err := grpc.NewClient(bAddr, grpcwire.DialOptions(grpc.WithStatsHandler(grpcwire.ClientStatsHandler(tp, nil)))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	ctx, root := tp.Tracer("sdk-like").Start(ctx, "sdk send")
	resp, err := modulepb.NewModuleServiceClient(cc).Message(ctx, &modulepb.MessageRequest{To: "f.mod-b.n:in", Payload: []byte("x")})
	root.End()
	if err != nil || string(resp.GetData()) != "x" {
		t.Fatalf("chain: %v %v", resp, err)
	}
	var handleC tracetest.SpanStub
	testkit.WaitUntil(t, "C's handle span", func() bool {
		for _, s := range exp.GetSpans() {
			if s.Name == "switchboard.handle" && attr(s, "switchboard.module") == "mod-c" {
				handleC = s
			}
		}
		return handleC.Name != ""
	})
	if handleC.SpanContext.TraceID() != root.SpanContext().TraceID() {
		t.Fatalf("C's handle span is in trace %s, the caller's in %s", handleC.SpanContext.TraceID(), root.SpanContext().TraceID())
	}
}
