package natswire

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-io/switchboard/internal/testkit"
	"github.com/switchboard-io/switchboard/router"
)

// TestTraceAcrossThreeModules: client → A → B → C over core NATS and over
// JetStream (an embedded broker), each module on its own connection, is one
// trace: the router puts traceparent in the message metadata, the wire
// carries it as the "traceparent" header, and each handle span is the child
// of the send span that reached it.
func TestTraceAcrossThreeModules(t *testing.T) {
	t.Run("core", func(t *testing.T) { traceChain(t, sharedURL, Options{Prefix: uniquePrefix()}) })
	t.Run("jetstream", func(t *testing.T) {
		b := startBroker(t, t.TempDir(), -1)
		traceChain(t, b.ClientURL(), Options{Mode: JetStream})
	})
}

func traceChain(t *testing.T, url string, opts Options) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })

	for _, hop := range []struct{ module, next string }{{"mod-a", "mod-b"}, {"mod-b", "mod-c"}, {"mod-c", ""}} {
		w := newWire(t, connect(t, url), opts)
		r, err := router.New(router.Options{Module: hop.module, Wire: w, Logger: quiet, TracerProvider: tp})
		if err != nil {
			t.Fatal(err)
		}
		next := hop.next
		r.HandleDefault(func(ctx context.Context, m *router.Message) ([]byte, error) {
			if next == "" {
				return append(m.Payload, " C"...), nil
			}
			return r.Send(ctx, &router.Message{From: m.To, To: "f." + next + ".n:in", Payload: append(m.Payload, (" " + hop.module)...)})
		})
		listen(t, w, hop.module, r.Dispatch)
	}
	client, err := router.New(router.Options{Wire: newWire(t, connect(t, url), opts), Logger: quiet, TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	out, err := client.Send(ctx, &router.Message{To: "f.mod-a.n:in", Payload: []byte("via")})
	if err != nil || string(out) != "via mod-a mod-b C" {
		t.Fatalf("chain: %q %v", out, err)
	}
	testkit.WaitUntil(t, "6 spans", func() bool { return len(exp.GetSpans()) >= 6 })
	spans := exp.GetSpans()
	if len(spans) != 6 {
		t.Fatalf("%d spans, want 6 (a send and a handle per hop)", len(spans))
	}
	byID := map[trace.SpanID]tracetest.SpanStub{}
	var last tracetest.SpanStub
	for _, s := range spans {
		if s.SpanContext.TraceID() != spans[0].SpanContext.TraceID() {
			t.Fatalf("span %s is in another trace", s.Name)
		}
		byID[s.SpanContext.SpanID()] = s
		if s.Name == "switchboard.handle" && spanAttr(s, "switchboard.module") == "mod-c" {
			last = s
		}
	}
	var got []string
	for s, ok := last, last.Name != ""; ok; s, ok = byID[s.Parent.SpanID()] {
		got = append(got, s.Name+" "+spanAttr(s, "switchboard.module"))
	}
	want := []string{"switchboard.handle mod-c", "switchboard.send mod-c", "switchboard.handle mod-b",
		"switchboard.send mod-b", "switchboard.handle mod-a", "switchboard.send mod-a"}
	if len(got) != len(want) {
		t.Fatalf("parent chain from C's handle span: %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("parent chain from C's handle span: %v, want %v", got, want)
		}
	}
}

func spanAttr(s tracetest.SpanStub, k string) string {
	for _, a := range s.Attributes {
		if string(a.Key) == k {
			return a.Value.Emit()
		}
	}
	return ""
}
