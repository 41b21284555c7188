package natswire

import (
	"context"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-io/switchboard/router"
)

// TestTraceContextCrossesNATS: the router's W3C trace context goes out as
// the traceparent header an SDK module reads, and a traceparent an SDK
// module sends is continued by the Switchboard handler.
func TestTraceContextCrossesNATS(t *testing.T) {
	prefix := uniquePrefix()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})

	// Outgoing: SDK-style receiver.
	sdk := connect(t, sharedURL)
	got := make(chan *nats.Msg, 1)
	sdkReceiver(t, sdk, prefix+".sdk-trace.msg", "sdk-trace", got)
	r, err := router.New(router.Options{Module: "sb", Wire: newWire(t, connect(t, sharedURL), Options{Prefix: prefix}), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Send(trace.ContextWithRemoteSpanContext(ctx, parent), &router.Message{To: "f.sdk-trace.n:in", Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if tp := recv(t, got).Header.Get("traceparent"); !strings.Contains(tp, "4bf92f3577b34da6a3ce929d0e0e4736") {
		t.Fatalf("traceparent header %q does not carry the caller's trace", tp)
	}

	// Incoming: the handler runs in the SDK sender's trace.
	seen := make(chan trace.SpanContext, 1)
	rr, err := router.New(router.Options{Module: "sb-trace", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	rr.HandleDefault(func(ctx context.Context, m *router.Message) ([]byte, error) {
		seen <- trace.SpanContextFromContext(ctx)
		return nil, nil
	})
	listen(t, newWire(t, connect(t, sharedURL), Options{Prefix: prefix}), "sb-trace", rr.Dispatch)
	if _, err := sdkRequest(ctx, sdk, prefix+".sb-trace.msg", "f.sb-trace.n:in", "e", 0, nil); err != nil {
		t.Fatal(err)
	}
	if sc := within(t, seen); sc.TraceID() != tid {
		t.Fatalf("handler ran in trace %s, want %s", sc.TraceID(), tid)
	}
}
