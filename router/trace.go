package router

import (
	"context"
	"maps"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Metadata keys of the W3C trace context (https://www.w3.org/TR/trace-context/).
// The router writes them into Message.Metadata of every message it hands to
// a wire, and reads them back in Dispatch; a wire carries them as headers of
// the same name (the TinySystems SDK reads and writes "traceparent" on NATS).
const (
	TraceParentKey = "traceparent"
	TraceStateKey  = "tracestate"
)

// TracerName is the instrumentation scope of the router's spans.
const TracerName = "github.com/switchboard-io/switchboard/router"

// Span attribute keys of the router's send and handle spans.
const (
	AttrNode      = attribute.Key("switchboard.node")       // destination full node name with port
	AttrModule    = attribute.Key("switchboard.module")     // destination module
	AttrAttempt   = attribute.Key("switchboard.attempt")    // 1-based attempt of a send
	AttrEdge      = attribute.Key("switchboard.edge")       // edge id, when set
	AttrMessageID = attribute.Key("switchboard.message_id") // message id (the same on every attempt)
	AttrErrorCode = attribute.Key("switchboard.error_code") // *Error code of a failed send or handle
	AttrDepth     = attribute.Key("switchboard.depth")      // hop depth
)

// DefaultPropagator is the propagator the router (and the gRPC wire) use
// when none is configured: W3C trace context, traceparent and tracestate,
// which is what the TinySystems SDK sends.
func DefaultPropagator() propagation.TextMapPropagator { return propagation.TraceContext{} }

// initialGlobal is the global tracer provider before anyone set one: a
// no-op until otel.SetTracerProvider is called.
var initialGlobal = otel.GetTracerProvider()

// Recording reports whether spans made by tp (nil: the global provider) may
// be recorded: false for the global provider while no provider has been set
// (otel.SetTracerProvider) and for the no-op providers. Where it is false
// and a message carries no trace context, the router and the gRPC wire skip
// their instrumentation entirely, so tracing that is off costs nothing.
func Recording(tp trace.TracerProvider) bool {
	if tp == nil {
		tp = otel.GetTracerProvider()
		if tp == initialGlobal {
			return false
		}
	}
	switch tp.(type) {
	case noop.TracerProvider, *noop.TracerProvider:
		return false
	}
	return true
}

// tracing is a router's tracer and propagator.
type tracing struct {
	tp       trace.TracerProvider // as configured (nil: the global one)
	tracer   trace.Tracer
	prop     propagation.TextMapPropagator
	fields   []string                // prop.Fields(), made once
	client   []trace.SpanStartOption // made once: options allocate
	internal []trace.SpanStartOption
	server   []trace.SpanStartOption
}

func newTracing(tp trace.TracerProvider, prop propagation.TextMapPropagator) tracing {
	if prop == nil {
		prop = DefaultPropagator()
	}
	get := tp
	if get == nil {
		get = otel.GetTracerProvider()
	}
	return tracing{tp: tp, tracer: get.Tracer(TracerName), prop: prop, fields: prop.Fields(),
		client:   []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)},
		internal: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal)},
		server:   []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)},
	}
}

// off reports whether there is nothing to trace for a message under ctx:
// no recording provider, and no trace context to carry on.
func (t tracing) off(ctx context.Context) bool {
	return !Recording(t.tp) && !trace.SpanContextFromContext(ctx).IsValid()
}

// startSend starts the span of one attempt to send msg to module; it
// returns a nil span when tracing is off.
func (t tracing) startSend(ctx context.Context, module string, msg *Message, attempt int, local bool) (context.Context, trace.Span) {
	if t.off(ctx) {
		return ctx, nil
	}
	opts := t.client
	if local {
		opts = t.internal
	}
	ctx, span := t.tracer.Start(ctx, "switchboard.send", opts...)
	if span.IsRecording() {
		span.SetAttributes(AttrNode.String(msg.To), AttrModule.String(module), AttrAttempt.Int(attempt),
			AttrMessageID.String(msg.ID), AttrDepth.Int(msg.Depth))
		if msg.EdgeID != "" {
			span.SetAttributes(AttrEdge.String(msg.EdgeID))
		}
	}
	return ctx, span
}

// startHandle starts the span of handling msg. A message from a wire whose
// context carries no span (a wire without its own instrumentation, such as
// NATS) continues the trace of its Metadata.
func (t tracing) startHandle(ctx context.Context, module string, msg *Message, fromWire bool) (context.Context, trace.Span) {
	opts := t.internal
	if fromWire {
		opts = t.server
		if !trace.SpanContextFromContext(ctx).IsValid() && msg.Metadata[TraceParentKey] != "" {
			ctx = t.prop.Extract(ctx, propagation.MapCarrier(msg.Metadata))
		}
	}
	if t.off(ctx) {
		return ctx, nil
	}
	ctx, span := t.tracer.Start(ctx, "switchboard.handle", opts...)
	if span.IsRecording() {
		span.SetAttributes(AttrNode.String(msg.To), AttrModule.String(module), AttrMessageID.String(msg.ID), AttrDepth.Int(msg.Depth))
		if msg.EdgeID != "" {
			span.SetAttributes(AttrEdge.String(msg.EdgeID))
		}
	}
	return ctx, span
}

// inject returns msg with the trace context of ctx in a copy of its
// Metadata, or msg itself when ctx carries no trace (tracing off): no copy,
// no allocation. The propagator's keys are removed from the copy first: a
// message forwarded from an earlier hop may still carry that hop's
// tracestate, which must not travel next to the new traceparent when the
// new span context has no tracestate of its own.
func (t tracing) inject(ctx context.Context, msg *Message) *Message {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return msg
	}
	md := make(map[string]string, len(msg.Metadata)+2)
	maps.Copy(md, msg.Metadata)
	for _, k := range t.fields {
		delete(md, k)
	}
	t.prop.Inject(ctx, propagation.MapCarrier(md))
	out := *msg
	out.Metadata = md
	return &out
}

// end ends span (nil: tracing off), recording err (with its code) when
// there is one.
func end(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil && span.IsRecording() {
		e := AsError(err)
		span.SetAttributes(AttrErrorCode.String(e.Code))
		span.SetStatus(codes.Error, e.Error())
	}
	span.End()
}
