package router

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

func tracedRouter(t *testing.T, module string, w Wire) (*Router, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	r, err := New(Options{Module: module, Wire: w, TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	return r, exp
}

func attr(s tracetest.SpanStub, k string) string {
	for _, a := range s.Attributes {
		if string(a.Key) == k {
			return a.Value.Emit()
		}
	}
	return ""
}

// TestTraceContextOnTheWire: the message handed to a wire carries the
// send span's traceparent in (a copy of) its Metadata, and each attempt is
// its own span with its attempt number and error code.
func TestTraceContextOnTheWire(t *testing.T) {
	w := &fakeWire{errs: []error{Transient("busy", "again")}}
	r, exp := tracedRouter(t, "mod-a", w)
	md := map[string]string{"k": "v"}
	in := &Message{To: "f.mod-b.n:in", Metadata: md}
	if _, err := r.SendWithPolicy(context.Background(), in, RetryPolicy{MaxAttempts: 2, InitialDelay: 1}); err != nil {
		t.Fatal(err)
	}
	if len(md) != 1 || in.Metadata[TraceParentKey] != "" {
		t.Fatalf("the caller's metadata was changed: %v", md)
	}
	sent := w.last.Load()
	if sent.Metadata["k"] != "v" || sent.Metadata[TraceParentKey] == "" {
		t.Fatalf("the wire got metadata %v", sent.Metadata)
	}
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want one per attempt (2)", len(spans))
	}
	for i, s := range spans {
		if s.Name != "switchboard.send" || s.SpanKind != trace.SpanKindClient || attr(s, "switchboard.attempt") != []string{"1", "2"}[i] ||
			attr(s, "switchboard.module") != "mod-b" || attr(s, "switchboard.node") != "f.mod-b.n:in" {
			t.Fatalf("span %d: %s %v %v", i, s.Name, s.SpanKind, s.Attributes)
		}
	}
	if attr(spans[0], "switchboard.error_code") != "busy" || attr(spans[1], "switchboard.error_code") != "" {
		t.Fatalf("error codes: %v / %v", spans[0].Attributes, spans[1].Attributes)
	}
	// The traceparent on the wire is the second attempt's span.
	carrier := propagation.MapCarrier(sent.Metadata)
	sc := trace.SpanContextFromContext(DefaultPropagator().Extract(context.Background(), carrier))
	if sc.TraceID() != spans[1].SpanContext.TraceID() || sc.SpanID() != spans[1].SpanContext.SpanID() {
		t.Fatalf("traceparent %s is not the send span %s", sent.Metadata[TraceParentKey], spans[1].SpanContext.SpanID())
	}
}

// TestDispatchContinuesTraceFromMetadata: a wire without its own
// instrumentation (NATS) hands over traceparent in Metadata only; the
// handle span is its child, and a nested send continues the same trace.
func TestDispatchContinuesTraceFromMetadata(t *testing.T) {
	w := &fakeWire{}
	r, exp := tracedRouter(t, "mod-a", w)
	r.HandleDefault(func(ctx context.Context, m *Message) ([]byte, error) {
		return r.Send(ctx, &Message{To: "f.mod-c.n:in"})
	})
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	if _, err := r.Dispatch(context.Background(), &Message{To: "f.mod-a.n:in", Metadata: map[string]string{TraceParentKey: parent}}); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans() // in end order: the nested send, then the handle
	if len(spans) != 2 {
		t.Fatalf("%d spans", len(spans))
	}
	send, handle := spans[0], spans[1]
	if handle.Name != "switchboard.handle" || handle.SpanKind != trace.SpanKindServer ||
		handle.Parent.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || handle.Parent.SpanID().String() != "00f067aa0ba902b7" || !handle.Parent.IsRemote() {
		t.Fatalf("handle span %s parent %v", handle.Name, handle.Parent)
	}
	if send.Parent.SpanID() != handle.SpanContext.SpanID() || send.SpanContext.TraceID() != handle.SpanContext.TraceID() {
		t.Fatalf("nested send is not the handle's child: %v", send.Parent)
	}
	if w.last.Load().Metadata[TraceParentKey] == parent {
		t.Fatal("the nested send forwarded the incoming traceparent instead of its own")
	}
}

// TestLocalDeliveryIsTraced: a send to this module's own node is a send
// span with a handle span under it, and the handler's context carries it.
func TestLocalDeliveryIsTraced(t *testing.T) {
	r, exp := tracedRouter(t, "mod-a", nil)
	var inHandler trace.SpanContext
	r.HandleDefault(func(ctx context.Context, m *Message) ([]byte, error) {
		inHandler = trace.SpanContextFromContext(ctx)
		return nil, Permanent("bad", "no")
	})
	_, err := r.Send(context.Background(), &Message{To: "f.mod-a.n:in"})
	var e *Error
	if !errors.As(err, &e) || e.Code != "bad" {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	if len(spans) != 2 || spans[0].Name != "switchboard.handle" || spans[1].Name != "switchboard.send" {
		t.Fatalf("spans %v", spans)
	}
	handle, send := spans[0], spans[1]
	if handle.Parent.SpanID() != send.SpanContext.SpanID() || inHandler.SpanID() != handle.SpanContext.SpanID() {
		t.Fatal("handle is not the child of send, or the handler did not get its span")
	}
	if attr(handle, "switchboard.error_code") != "bad" || attr(send, "switchboard.error_code") != "bad" {
		t.Fatalf("error code missing: %v %v", handle.Attributes, send.Attributes)
	}
}

// TestTracingOffCopiesNothing: without a tracer provider the message goes
// to the wire as is: no metadata copy, no traceparent.
func TestTracingOffCopiesNothing(t *testing.T) {
	w := &fakeWire{}
	r, err := New(Options{Module: "mod-a", Wire: w, TracerProvider: noop.NewTracerProvider()})
	if err != nil {
		t.Fatal(err)
	}
	in := &Message{To: "f.mod-b.n:in"}
	if _, err := r.Send(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	if got := w.last.Load(); got != in || got.Metadata != nil {
		t.Fatalf("tracing off: the wire got %p %v, want the caller's message %p untouched", got, got.Metadata, in)
	}
}

// TestInjectDropsStaleTraceState: a message whose metadata still carries
// the trace context of an earlier hop (traceparent and tracestate) goes to
// the wire with the new span's traceparent and no tracestate when the new
// span context has none — not the old tracestate next to the new parent.
func TestInjectDropsStaleTraceState(t *testing.T) {
	w := &fakeWire{}
	r, exp := tracedRouter(t, "mod-a", w)
	const oldParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	in := &Message{To: "f.mod-b.n:in", Metadata: map[string]string{TraceParentKey: oldParent, TraceStateKey: "vendor=old", "k": "v"}}
	if _, err := r.Send(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	sent := w.last.Load().Metadata
	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	if sc := trace.SpanContextFromContext(DefaultPropagator().Extract(context.Background(), propagation.MapCarrier(sent))); sc.SpanID() != spans[0].SpanContext.SpanID() {
		t.Fatalf("traceparent %q is not the send span's", sent[TraceParentKey])
	}
	if v, ok := sent[TraceStateKey]; ok {
		t.Fatalf("stale tracestate %q kept next to the new traceparent %q", v, sent[TraceParentKey])
	}
	if sent["k"] != "v" {
		t.Fatalf("other metadata lost: %v", sent)
	}
	if in.Metadata[TraceStateKey] != "vendor=old" || in.Metadata[TraceParentKey] != oldParent {
		t.Fatalf("the caller's metadata was changed: %v", in.Metadata)
	}

	// A span context with a tracestate of its own replaces the old one.
	ts, err := trace.ParseTraceState("vendor=new")
	if err != nil {
		t.Fatal(err)
	}
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, TraceState: ts, Remote: true}))
	if _, err := r.Send(ctx, in); err != nil {
		t.Fatal(err)
	}
	if got := w.last.Load().Metadata[TraceStateKey]; got != "vendor=new" {
		t.Fatalf("tracestate %q, want the span context's vendor=new", got)
	}
}
