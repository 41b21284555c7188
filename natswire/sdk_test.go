package natswire

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchboard-io/switchboard/router"
)

// These tests put an SDK-style module on the other side: plain nats.go,
// subjects and headers written by hand as the TinySystems SDK writes them
// them, no Switchboard code.

const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// sdkReceiver answers like the SDK's core receiver: body = result, x-empty
// for nil, x-error (+ x-error-code) for a failure.
func sdkReceiver(t *testing.T, nc *nats.Conn, subject, queue string, got chan<- *nats.Msg) {
	t.Helper()
	sub, err := nc.QueueSubscribe(subject, queue, func(m *nats.Msg) {
		got <- m
		switch string(m.Data) {
		case "nil":
			_ = m.RespondMsg(&nats.Msg{Header: nats.Header{"x-empty": {"1"}}})
		case "fail-coded":
			_ = m.RespondMsg(&nats.Msg{Header: nats.Header{"x-error": {"quota exhausted"}, "x-error-code": {"QUOTA"}}})
		case "fail":
			_ = m.RespondMsg(&nats.Msg{Header: nats.Header{"x-error": {"component failed"}}})
		default:
			_ = m.Respond(append([]byte("sdk:"), m.Data...))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

func recv(t *testing.T, ch <-chan *nats.Msg) *nats.Msg {
	t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(waitFor):
		t.Fatal("no message")
		return nil
	}
}

// TestToSDKModuleCore: Switchboard sends, an SDK-style module answers.
func TestToSDKModuleCore(t *testing.T) {
	prefix := uniquePrefix()
	sdk := connect(t, sharedURL)
	got := make(chan *nats.Msg, 16)
	sdkReceiver(t, sdk, prefix+".sdk-mod.msg", "sdk-mod", got)
	w := newWire(t, connect(t, sharedURL), Options{Prefix: prefix})
	r, err := router.New(router.Options{Module: "sb", Wire: w, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()

	t.Run("headers and body exactly as the SDK reads them", func(t *testing.T) {
		out, err := r.Send(ctx, &router.Message{From: "f.sb.src:out", To: "f.sdk-mod.node:in", EdgeID: "e-1",
			Payload: []byte("hello"), Depth: 3, Metadata: map[string]string{"traceparent": traceparent, "x-mode": "rpc"}})
		if err != nil || string(out) != "sdk:hello" {
			t.Fatalf("out=%q err=%v", out, err)
		}
		m := recv(t, got)
		want := map[string]string{"x-from": "f.sb.src:out", "x-to": "f.sdk-mod.node:in", "x-edge-id": "e-1",
			"Nats-Msg-Id": "e-1", "x-message-depth": "3", "traceparent": traceparent, "x-mode": "rpc"}
		for k, v := range want {
			if vs := m.Header[k]; len(vs) != 1 || vs[0] != v {
				t.Errorf("header %s = %q, want [%q]", k, vs, v)
			}
		}
		if string(m.Data) != "hello" || m.Subject != prefix+".sdk-mod.msg" {
			t.Errorf("subject %s body %q", m.Subject, m.Data)
		}
		// Depth 0 sends no depth header; From/To/edge are always there.
		if _, err := r.Send(ctx, &router.Message{To: "f.sdk-mod.node:in", Payload: []byte("x")}); err != nil {
			t.Fatal(err)
		}
		m = recv(t, got)
		if _, ok := m.Header["x-message-depth"]; ok {
			t.Errorf("depth header sent for depth 0: %v", m.Header)
		}
		for _, k := range []string{"x-from", "x-to", "x-edge-id", "Nats-Msg-Id"} {
			if _, ok := m.Header[k]; !ok {
				t.Errorf("header %s missing: %v", k, m.Header)
			}
		}
	})
	t.Run("x-empty is an empty result", func(t *testing.T) {
		out, err := r.Send(ctx, &router.Message{To: "f.sdk-mod.node:in", Payload: []byte("nil")})
		recv(t, got)
		if err != nil || out != nil {
			t.Fatalf("out=%q err=%v", out, err)
		}
	})
	t.Run("SDK errors are permanent and never retried", func(t *testing.T) {
		pol := router.RetryPolicy{MaxAttempts: 3, InitialDelay: time.Millisecond}
		for _, tc := range []struct{ payload, code, msg string }{
			{"fail-coded", "QUOTA", "quota exhausted"},
			{"fail", CodeRemoteError, "component failed"},
		} {
			_, err := r.SendWithPolicy(ctx, &router.Message{To: "f.sdk-mod.node:in", Payload: []byte(tc.payload)}, pol)
			var e *router.Error
			if !errors.As(err, &e) || e.Code != tc.code || e.Retryable || e.Message != tc.msg {
				t.Fatalf("%s: err = %#v", tc.payload, err)
			}
			recv(t, got)
			select {
			case m := <-got:
				t.Fatalf("%s: retried (%q)", tc.payload, m.Data)
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
	t.Run("system ports go to sysmsg", func(t *testing.T) {
		sys := make(chan *nats.Msg, 1)
		sub, err := sdk.Subscribe(prefix+".sdk-mod.sysmsg", func(m *nats.Msg) { sys <- m; _ = m.Respond([]byte("sys-ok")) })
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
		_ = sdk.Flush()
		out, err := r.Send(ctx, &router.Message{To: "f.sdk-mod.node:_control", Payload: []byte("{}")})
		if err != nil || string(out) != "sys-ok" {
			t.Fatalf("out=%q err=%v", out, err)
		}
		if m := recv(t, sys); m.Header.Get("x-to") != "f.sdk-mod.node:_control" {
			t.Fatalf("sysmsg headers %v", m.Header)
		}
	})
}

// sdkRequest sends like the SDK's core sender.
func sdkRequest(ctx context.Context, nc *nats.Conn, subject, to, edge string, depth int, data []byte) (*nats.Msg, error) {
	m := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
	m.Header.Set("x-from", "f.sdk-mod.src:out")
	m.Header.Set("x-to", to)
	m.Header.Set("x-edge-id", edge)
	m.Header.Set("Nats-Msg-Id", edge)
	if depth > 0 {
		m.Header.Set("x-message-depth", strconv.Itoa(depth))
	}
	m.Header.Set("traceparent", traceparent)
	return nc.RequestMsgWithContext(ctx, m)
}

// sbModule is a Switchboard module whose handlers answer per payload.
func sbModule(t *testing.T, seen chan<- *router.Message) router.Handler {
	return func(ctx context.Context, m *router.Message) ([]byte, error) {
		if seen != nil {
			seen <- m
		}
		switch string(m.Payload) {
		case "nil":
			return nil, nil
		case "fail":
			return nil, router.Permanent("bad_input", "field x is missing")
		case "plain":
			return nil, errors.New("plain failure\nsecond line")
		}
		return append([]byte("sb:"), m.Payload...), nil
	}
}

// TestFromSDKModuleCore: an SDK-style module sends, Switchboard answers.
func TestFromSDKModuleCore(t *testing.T) {
	prefix := uniquePrefix()
	seen := make(chan *router.Message, 8)
	listen(t, newWire(t, connect(t, sharedURL), Options{Prefix: prefix}), "sb-mod", sbModule(t, seen))
	sdk := connect(t, sharedURL)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	subject := prefix + ".sb-mod.msg"

	reply, err := sdkRequest(ctx, sdk, subject, "f.sb-mod.n:in", "edge-9", 7, []byte("hi"))
	if err != nil || string(reply.Data) != "sb:hi" || len(reply.Header) != 0 {
		t.Fatalf("reply %+v err %v", reply, err)
	}
	m := within(t, seen)
	if m.From != "f.sdk-mod.src:out" || m.To != "f.sb-mod.n:in" || m.EdgeID != "edge-9" || m.Depth != 7 || m.Metadata["traceparent"] != traceparent {
		t.Fatalf("handler saw %+v", m)
	}
	reply, err = sdkRequest(ctx, sdk, subject, "f.sb-mod.n:in", "e", 0, []byte("nil"))
	if err != nil || len(reply.Data) != 0 || reply.Header.Get("x-empty") != "1" {
		t.Fatalf("empty reply %+v err %v", reply, err)
	}
	within(t, seen)
	reply, err = sdkRequest(ctx, sdk, subject, "f.sb-mod.n:in", "e", 0, []byte("fail"))
	if err != nil || reply.Header.Get("x-error") != "field x is missing" || reply.Header.Get("x-error-code") != "bad_input" || len(reply.Data) != 0 {
		t.Fatalf("error reply %+v err %v", reply, err)
	}
	within(t, seen)
	reply, err = sdkRequest(ctx, sdk, subject, "f.sb-mod.n:in", "e", 0, []byte("plain"))
	if err != nil || reply.Header.Get("x-error") != "plain failure second line" || reply.Header.Get("x-error-code") != router.CodeInternal {
		t.Fatalf("plain error reply %+v err %v", reply.Header, err)
	}
	within(t, seen)
	// A malformed depth is refused, not read as another depth.
	m2 := &nats.Msg{Subject: subject, Header: nats.Header{"x-to": {"f.sb-mod.n:in"}, "x-message-depth": {"x1"}}}
	reply, err = sdk.RequestMsgWithContext(ctx, m2)
	if err != nil || reply.Header.Get("x-error-code") != "invalid_argument" {
		t.Fatalf("malformed depth: %+v %v", reply, err)
	}
}

// TestSDKOnJetStream: both directions on the JetStream wire of an embedded
// broker, with the SDK's real stream and subject names.
func TestSDKOnJetStream(t *testing.T) {
	b := startBroker(t, t.TempDir(), -1)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	sdk := connect(t, b.ClientURL())
	js, err := jetstream.New(sdk)
	if err != nil {
		t.Fatal(err)
	}
	w := newWire(t, connect(t, b.ClientURL()), Options{Mode: JetStream})
	listen(t, w, "sb-mod", sbModule(t, nil))
	// The stream Switchboard made is the SDK's.
	st, err := js.Stream(ctx, "module-edges")
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	if cfg.Retention != jetstream.WorkQueuePolicy || cfg.Storage != jetstream.FileStorage || cfg.Subjects[0] != "tinymodule.*.msg" || cfg.MaxAge != time.Hour || cfg.Duplicates != 2*time.Minute {
		t.Fatalf("stream config %+v", cfg)
	}
	cons, err := js.Consumer(ctx, "module-edges", "sb-mod")
	if err != nil {
		t.Fatal(err)
	}
	cc := cons.CachedInfo().Config
	if cc.AckPolicy != jetstream.AckExplicitPolicy || cc.AckWait != 30*time.Second || cc.MaxDeliver != 3 || cc.FilterSubject != "tinymodule.sb-mod.msg" {
		t.Fatalf("consumer config %+v", cc)
	}

	t.Run("SDK sender, Switchboard receiver", func(t *testing.T) {
		for _, tc := range []struct {
			payload, body, empty, errText, errCode string
		}{{"hi", "sb:hi", "", "", ""}, {"nil", "", "1", "", ""}, {"fail", "", "", "field x is missing", "bad_input"}} {
			inbox := nats.NewInbox()
			sub, err := sdk.SubscribeSync(inbox)
			if err != nil {
				t.Fatal(err)
			}
			m := &nats.Msg{Subject: "tinymodule.sb-mod.msg", Data: []byte(tc.payload), Header: nats.Header{}}
			m.Header.Set("x-reply-inbox", inbox)
			m.Header.Set("x-from", "f.sdk-mod.a:out")
			m.Header.Set("x-to", "f.sb-mod.b:in")
			m.Header.Set("x-edge-id", "edge-1") // no Nats-Msg-Id on JetStream
			if _, err := js.PublishMsg(ctx, m); err != nil {
				t.Fatal(err)
			}
			reply, err := sub.NextMsgWithContext(ctx)
			if err != nil {
				t.Fatal(err)
			}
			_ = sub.Unsubscribe()
			if string(reply.Data) != tc.body || reply.Header.Get("x-empty") != tc.empty || reply.Header.Get("x-error") != tc.errText || reply.Header.Get("x-error-code") != tc.errCode {
				t.Fatalf("%s: reply %q %v", tc.payload, reply.Data, reply.Header)
			}
		}
	})
	t.Run("Switchboard sender, SDK receiver", func(t *testing.T) {
		sdkCons, err := js.CreateOrUpdateConsumer(ctx, "module-edges", jetstream.ConsumerConfig{
			Durable: "sdk-mod", FilterSubject: "tinymodule.sdk-mod.msg", AckPolicy: jetstream.AckExplicitPolicy,
			AckWait: 30 * time.Second, MaxDeliver: 3,
		})
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan delivery, 4)
		cc, err := sdkCons.Consume(func(m jetstream.Msg) {
			h := m.Headers()
			got <- delivery{h: h, body: string(m.Data())}
			reply := &nats.Msg{Subject: h.Get("x-reply-inbox"), Data: append([]byte("sdk:"), m.Data()...)}
			if string(m.Data()) == "fail" {
				reply = &nats.Msg{Subject: h.Get("x-reply-inbox"), Header: nats.Header{"x-error": {"nope"}, "x-error-code": {"E1"}}}
				_ = sdk.PublishMsg(reply)
				_ = m.Term()
				return
			}
			_ = sdk.PublishMsg(reply)
			_ = m.Ack()
		})
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Stop()
		// Three sends on one edge: all answered (no de-duplication by edge).
		for i := range 3 {
			out, err := w.Send(ctx, &router.Message{From: "f.sb-mod.a:out", To: "f.sdk-mod.b:in", EdgeID: "same-edge", Payload: []byte(fmt.Sprint(i)), Metadata: map[string]string{"traceparent": traceparent}})
			if err != nil || string(out) != "sdk:"+fmt.Sprint(i) {
				t.Fatalf("send %d: out=%q err=%v", i, out, err)
			}
			g := within(t, got)
			for k, v := range map[string]string{"x-from": "f.sb-mod.a:out", "x-to": "f.sdk-mod.b:in", "x-edge-id": "same-edge", "traceparent": traceparent} {
				if g.h.Get(k) != v {
					t.Errorf("header %s = %q, want %q", k, g.h.Get(k), v)
				}
			}
			if g.h.Get("x-reply-inbox") == "" || g.h.Get("Nats-Msg-Id") != "" {
				t.Errorf("inbox %q, Nats-Msg-Id %q (want an inbox and no id)", g.h.Get("x-reply-inbox"), g.h.Get("Nats-Msg-Id"))
			}
		}
		_, err = w.Send(ctx, &router.Message{To: "f.sdk-mod.b:in", Payload: []byte("fail")})
		within(t, got)
		if e := router.AsError(err); e.Code != "E1" || e.Retryable || e.Message != "nope" {
			t.Fatalf("SDK error: %#v", err)
		}
	})
}

type delivery struct {
	h    nats.Header
	body string
}

// TestPubAckIsNotAReply: with the stream on the subjects, a core request is
// answered by JetStream's publish acknowledgement; the core wire says so
// instead of returning the acknowledgement as the module's result.
func TestPubAckIsNotAReply(t *testing.T) {
	b := startBroker(t, t.TempDir(), -1)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	jsw := newWire(t, connect(t, b.ClientURL()), Options{Mode: JetStream})
	if err := jsw.EnsureStreams(ctx); err != nil {
		t.Fatal(err)
	}
	core := newWire(t, connect(t, b.ClientURL()), Options{})
	out, err := core.Send(ctx, &router.Message{To: "f.some-mod.n:in", EdgeID: "e", Payload: []byte("x")})
	if e := router.AsError(err); e == nil || e.Code != CodeWrongMode || e.Retryable {
		t.Fatalf("out=%q err=%v, want %s", out, err, CodeWrongMode)
	}
	// A module reply that merely looks like JSON is still a reply.
	if _, ok := asPubAck(&nats.Msg{Data: []byte(`{"stream":"x","seq":1,"other":2}`)}); ok {
		t.Fatal("a reply with other fields taken for an acknowledgement")
	}
	if _, ok := asPubAck(&nats.Msg{Data: []byte(`{"stream":"x","seq":1}`), Header: nats.Header{"x-empty": {"0"}}}); ok {
		t.Fatal("a reply with headers taken for an acknowledgement")
	}
}

// TestReplicasAndSysmsg: two replicas of a module share business messages
// (queue group) and both receive every system message.
func TestReplicasAndSysmsg(t *testing.T) {
	prefix := uniquePrefix()
	var mu sync.Mutex
	counts := map[string]map[string]int{} // replica → port kind → count
	replica := func(name string) {
		listen(t, newWire(t, connect(t, sharedURL), Options{Prefix: prefix}), "pair", func(ctx context.Context, m *router.Message) ([]byte, error) {
			kind := "msg"
			if nn, _ := router.ParseTo(m.To); nn.Port == "_control" {
				kind = "sys"
			}
			mu.Lock()
			if counts[name] == nil {
				counts[name] = map[string]int{}
			}
			counts[name][kind]++
			mu.Unlock()
			return []byte(name), nil
		})
	}
	replica("r1")
	replica("r2")
	w := newWire(t, connect(t, sharedURL), Options{Prefix: prefix})
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	for range 200 {
		if _, err := w.Send(ctx, &router.Message{To: "f.pair.n:in"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Publish(ctx, &router.Message{To: "f.pair.n:_control", Payload: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	waitUntilT(t, "both replicas got the system message", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return counts["r1"]["sys"] == 1 && counts["r2"]["sys"] == 1
	})
	mu.Lock()
	defer mu.Unlock()
	if a, b := counts["r1"]["msg"], counts["r2"]["msg"]; a+b != 200 || a < 20 || b < 20 {
		t.Fatalf("load split %d/%d, want 200 shared by both", a, b)
	}
}

func waitUntilT(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestPanicAndOversize: a panicking handler fails its message with a
// permanent internal error and the module goes on; a message over the
// broker's max_payload fails at once with resource_exhausted.
func TestPanicAndOversize(t *testing.T) {
	for _, mode := range []Mode{Core, JetStream} {
		t.Run(mode.String(), func(t *testing.T) {
			b := startBroker(t, t.TempDir(), -1)
			listen(t, newWire(t, connect(t, b.ClientURL()), Options{Mode: mode}), "fragile", func(ctx context.Context, m *router.Message) ([]byte, error) {
				if string(m.Payload) == "panic" {
					panic("boom")
				}
				return []byte("fine"), nil
			})
			w := newWire(t, connect(t, b.ClientURL()), Options{Mode: mode})
			ctx, cancel := context.WithTimeout(context.Background(), waitFor)
			defer cancel()
			_, err := w.Send(ctx, &router.Message{To: "f.fragile.n:in", Payload: []byte("panic")})
			if e := router.AsError(err); e == nil || e.Code != router.CodeInternal || e.Retryable || !strings.Contains(e.Message, "boom") {
				t.Fatalf("panic: %v", err)
			}
			if out, err := w.Send(ctx, &router.Message{To: "f.fragile.n:in"}); err != nil || string(out) != "fine" {
				t.Fatalf("after the panic: %q %v", out, err)
			}
			big := make([]byte, w.Conn().MaxPayload()+1)
			_, err = w.Send(ctx, &router.Message{To: "f.fragile.n:in", Payload: big})
			if e := router.AsError(err); e == nil || e.Code != router.CodeResourceExhausted || e.Retryable {
				t.Fatalf("oversize: %v", err)
			}
		})
	}
}
