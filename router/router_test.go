package router

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// cancelOnRetry is a slog handler that cancels a context when the router
// logs a retry, that is while it waits to make the next attempt.
type cancelOnRetry struct{ cancel context.CancelFunc }

func (h cancelOnRetry) Enabled(context.Context, slog.Level) bool { return true }
func (h cancelOnRetry) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "router: retrying" {
		h.cancel()
	}
	return nil
}
func (h cancelOnRetry) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h cancelOnRetry) WithGroup(string) slog.Handler      { return h }

// fakeWire fails with the given errors in order, then echoes.
type fakeWire struct {
	calls atomic.Int32
	errs  []error
	last  atomic.Pointer[Message]
}

func (w *fakeWire) Send(ctx context.Context, msg *Message) ([]byte, error) {
	n := int(w.calls.Add(1))
	w.last.Store(msg)
	if n <= len(w.errs) {
		return nil, w.errs[n-1]
	}
	return msg.Payload, nil
}

func newRouter(t *testing.T, module string, w Wire) *Router {
	t.Helper()
	r, err := New(Options{Module: module, Wire: w})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestLocalDispatch(t *testing.T) {
	r := newRouter(t, "mod-a", nil)
	var got []string
	if err := r.Handle("n1", func(ctx context.Context, m *Message) ([]byte, error) {
		got = append(got, "n1")
		return []byte("one"), nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := r.Handle("n1:in", func(ctx context.Context, m *Message) ([]byte, error) {
		got = append(got, "n1:in")
		return []byte("port"), nil
	}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct{ to, want string }{
		{"f.mod-a.n1:x", "one"},
		{"f.mod-a.n1:out", "one"},
		{"f.mod-a.n1:in", "port"},
	} {
		out, err := r.Send(ctx, &Message{To: tc.to})
		if err != nil || string(out) != tc.want {
			t.Errorf("Send(%s) = %q, %v; want %q", tc.to, out, err, tc.want)
		}
	}
	_, err := r.Send(ctx, &Message{To: "f.mod-a.n2:in"})
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeNoHandler || e.Retryable {
		t.Fatalf("no handler: got %v", err)
	}
	r.HandleDefault(Echo)
	out, err := r.Send(ctx, &Message{To: "f.mod-a.n2:in", Payload: []byte("hi")})
	if err != nil || string(out) != "hi" {
		t.Fatalf("default handler: %q %v", out, err)
	}
	if err := r.Handle("bad node", Echo); err == nil {
		t.Fatal("Handle accepted a node with a space")
	}
	// Node names may contain dots (the SDK's node ids do); the module is
	// the second part and the handler key is everything after it.
	if err := r.Handle("group.n3:in", func(ctx context.Context, m *Message) ([]byte, error) {
		return []byte("dotted"), nil
	}); err != nil {
		t.Fatal(err)
	}
	if out, err := r.Send(ctx, &Message{To: "f.mod-a.group.n3:in"}); err != nil || string(out) != "dotted" {
		t.Fatalf("dotted node: %q %v", out, err)
	}
	// Sending requires a port, as in the SDK; a message from a wire without
	// one is still dispatched.
	_, err = r.Send(ctx, &Message{To: "f.mod-a.n1"})
	if !errors.As(err, &e) || e.Code != CodeInvalidName || !strings.Contains(err.Error(), "port") {
		t.Fatalf("send without a port: %v", err)
	}
	if out, err := r.Dispatch(ctx, &Message{To: "f.mod-a.n1"}); err != nil || string(out) != "one" {
		t.Fatalf("dispatch without a port: %q %v", out, err)
	}
}

func TestUnknownModuleAndMalformedNames(t *testing.T) {
	r := newRouter(t, "mod-a", nil)
	ctx := context.Background()
	_, err := r.Send(ctx, &Message{To: "f.mod-b.n:in"})
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeModuleUnknown || !strings.Contains(err.Error(), "mod-b") {
		t.Fatalf("unknown module: %v", err)
	}
	for _, to := range []string{"", "a.b", "a.b.c.d", "f.Mod.n", "f.mod-a.n:", "f..n", "f.mod-a.n:p:q", "f.mod_a.n"} {
		_, err := r.Send(ctx, &Message{To: to})
		if !errors.As(err, &e) || e.Code != CodeInvalidName || e.Retryable {
			t.Errorf("Send(%q): got %v, want invalid_name", to, err)
		}
	}
}

func TestDepth(t *testing.T) {
	w := &fakeWire{}
	r := newRouter(t, "mod-a", w)
	ctx := context.Background()
	if _, err := r.Send(ctx, &Message{To: "f.mod-b.n:in", Depth: 256}); err != nil {
		t.Fatalf("depth 256: %v", err)
	}
	_, err := r.Send(ctx, &Message{To: "f.mod-b.n:in", Depth: 257})
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeDepthExceeded || e.Retryable {
		t.Fatalf("depth 257: %v", err)
	}
	// Even with a retry policy, a depth error is not retried.
	before := w.calls.Load()
	_, err = r.SendWithPolicy(ctx, &Message{To: "f.mod-b.n:in", Depth: 257}, RetryPolicy{MaxAttempts: 5, InitialDelay: time.Millisecond})
	if err == nil || w.calls.Load() != before {
		t.Fatalf("depth 257 with retries: err=%v calls=%d", err, w.calls.Load()-before)
	}
	if _, err := r.Dispatch(ctx, &Message{To: "f.mod-a.n:in", Depth: 300}); !errors.As(err, &e) || e.Code != CodeDepthExceeded {
		t.Fatalf("Dispatch depth 300: %v", err)
	}
	// A send from inside a handler is one hop deeper than the handled message.
	r.HandleDefault(func(ctx context.Context, m *Message) ([]byte, error) {
		return r.Send(ctx, &Message{To: "f.mod-b.n:in"})
	})
	if _, err := r.Dispatch(ctx, &Message{To: "f.mod-a.x:in", Depth: 41}); err != nil {
		t.Fatal(err)
	}
	if d := w.last.Load().Depth; d != 42 {
		t.Fatalf("nested depth = %d, want 42", d)
	}
	// A loop through the local module ends at MaxDepth.
	r2 := newRouter(t, "loop", nil)
	var hops atomic.Int32
	r2.HandleDefault(func(ctx context.Context, m *Message) ([]byte, error) {
		hops.Add(1)
		return r2.Send(ctx, &Message{To: "f.loop.n:in"})
	})
	_, err = r2.Send(ctx, &Message{To: "f.loop.n:in"})
	if !errors.As(err, &e) || e.Code != CodeDepthExceeded {
		t.Fatalf("loop: %v", err)
	}
	if hops.Load() != MaxDepth+1 {
		t.Fatalf("loop made %d hops, want %d", hops.Load(), MaxDepth+1)
	}
}

func TestMisrouted(t *testing.T) {
	r := newRouter(t, "mod-a", nil)
	r.HandleDefault(Echo)
	_, err := r.Dispatch(context.Background(), &Message{To: "f.mod-b.n:in"})
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeMisrouted || !e.Retryable {
		t.Fatalf("misrouted: %v", err)
	}
}

func TestRetryPolicy(t *testing.T) {
	ctx := context.Background()
	fast := RetryPolicy{MaxAttempts: 4, InitialDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}

	t.Run("no policy, no retry", func(t *testing.T) {
		w := &fakeWire{errs: []error{Transient("boom", "x")}}
		r := newRouter(t, "a", w)
		if _, err := r.Send(ctx, &Message{To: "f.b.n:in"}); err == nil {
			t.Fatal("want error")
		}
		if w.calls.Load() != 1 {
			t.Fatalf("calls = %d, want 1", w.calls.Load())
		}
	})
	t.Run("retryable retried until success", func(t *testing.T) {
		w := &fakeWire{errs: []error{Transient("boom", "1"), Transient("boom", "2")}}
		r := newRouter(t, "a", w)
		if err := r.SetEdgePolicy("e1", fast); err != nil {
			t.Fatal(err)
		}
		out, err := r.Send(ctx, &Message{To: "f.b.n:in", EdgeID: "e1", Payload: []byte("ok")})
		if err != nil || string(out) != "ok" || w.calls.Load() != 3 {
			t.Fatalf("out=%q err=%v calls=%d", out, err, w.calls.Load())
		}
	})
	t.Run("retryable exhausts maxAttempts", func(t *testing.T) {
		w := &fakeWire{errs: []error{Transient("boom", "1"), Transient("boom", "2"), Transient("boom", "3"), Transient("boom", "4"), Transient("boom", "5")}}
		r := newRouter(t, "a", w)
		_, err := r.SendWithPolicy(ctx, &Message{To: "f.b.n:in"}, fast)
		var e *Error
		if !errors.As(err, &e) || e.Code != "boom" || w.calls.Load() != 4 || !strings.Contains(err.Error(), "4 attempts") {
			t.Fatalf("err=%v calls=%d", err, w.calls.Load())
		}
	})
	t.Run("permanent not retried", func(t *testing.T) {
		w := &fakeWire{errs: []error{Permanent("bad", "x")}}
		r := newRouter(t, "a", w)
		if _, err := r.SendWithPolicy(ctx, &Message{To: "f.b.n:in"}, fast); err == nil || w.calls.Load() != 1 {
			t.Fatalf("err=%v calls=%d", err, w.calls.Load())
		}
	})
	t.Run("nonRetryableErrorCodes", func(t *testing.T) {
		w := &fakeWire{errs: []error{Transient("quota", "x")}}
		r := newRouter(t, "a", w)
		p := fast
		p.NonRetryableErrorCodes = []string{"quota"}
		if _, err := r.SendWithPolicy(ctx, &Message{To: "f.b.n:in"}, p); err == nil || w.calls.Load() != 1 {
			t.Fatalf("err=%v calls=%d", err, w.calls.Load())
		}
	})
	t.Run("edge policy keeps its own nonRetryableErrorCodes", func(t *testing.T) {
		// A caller reusing its slice for the next edge, or changing what
		// EdgePolicy returned, must not change what the edge retries.
		w := &fakeWire{errs: []error{Transient("quota", "1"), Transient("quota", "2"), Transient("quota", "3")}}
		r := newRouter(t, "a", w)
		codes := []string{"quota"}
		p := fast
		p.NonRetryableErrorCodes = codes
		if err := r.SetEdgePolicy("e1", p); err != nil {
			t.Fatal(err)
		}
		codes[0] = "other" // the buffer, reused for another edge
		if err := r.SetEdgePolicy("e2", RetryPolicy{NonRetryableErrorCodes: codes}); err != nil {
			t.Fatal(err)
		}
		r.EdgePolicy("e1").NonRetryableErrorCodes[0] = "changed"
		if got := r.EdgePolicy("e1").NonRetryableErrorCodes; len(got) != 1 || got[0] != "quota" {
			t.Fatalf("edge e1 codes = %v, want [quota]", got)
		}
		if _, err := r.Send(ctx, &Message{To: "f.b.n:in", EdgeID: "e1"}); err == nil || w.calls.Load() != 1 {
			t.Fatalf("err=%v calls=%d, want one attempt (quota is not retried on e1)", err, w.calls.Load())
		}
	})
	t.Run("per-attempt timeout", func(t *testing.T) {
		var calls atomic.Int32
		r := newRouter(t, "a", nil)
		r.HandleDefault(func(ctx context.Context, m *Message) ([]byte, error) {
			if calls.Add(1) < 3 {
				<-ctx.Done() // hang until the attempt times out
				return nil, ctx.Err()
			}
			return []byte("late ok"), nil
		})
		p := fast
		p.Timeout = 20 * time.Millisecond
		out, err := r.SendWithPolicy(ctx, &Message{To: "f.a.n:in"}, p)
		if err != nil || string(out) != "late ok" || calls.Load() != 3 {
			t.Fatalf("out=%q err=%v calls=%d", out, err, calls.Load())
		}
	})
	t.Run("no wait past the caller's deadline", func(t *testing.T) {
		// The next attempt would start an hour after a failure, the caller
		// gives up within a minute: the send fails at once with the wire's
		// error instead of sleeping until the deadline.
		w := &fakeWire{errs: []error{Transient("boom", "1")}}
		r := newRouter(t, "a", w)
		dctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		p := RetryPolicy{MaxAttempts: 3, InitialDelay: time.Hour, MaxDelay: time.Hour}
		_, err := r.SendWithPolicy(dctx, &Message{To: "f.b.n:in"}, p)
		var e *Error
		if dctx.Err() != nil || !errors.As(err, &e) || e.Code != "boom" || w.calls.Load() != 1 {
			t.Fatalf("err=%v calls=%d ctx=%v", err, w.calls.Load(), dctx.Err())
		}
	})
	t.Run("caller cancel while waiting to retry", func(t *testing.T) {
		// The caller cancels during the backoff (when the router logs the
		// retry): the send's error is the cancellation, not the retryable
		// failure before it.
		w := &fakeWire{errs: []error{Transient("busy", "1")}}
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		r, err := New(Options{Module: "a", Wire: w, Logger: slog.New(cancelOnRetry{cancel})})
		if err != nil {
			t.Fatal(err)
		}
		p := RetryPolicy{MaxAttempts: 3, InitialDelay: time.Hour, MaxDelay: time.Hour}
		_, err = r.SendWithPolicy(cctx, &Message{To: "f.b.n:in"}, p)
		if e := AsError(err); e.Code != CodeCanceled || e.Retryable || !errors.Is(err, context.Canceled) ||
			!errors.Is(err, &Error{Code: "busy"}) || w.calls.Load() != 1 {
			t.Fatalf("err=%v (code %s, retryable %v) calls=%d", err, e.Code, e.Retryable, w.calls.Load())
		}
	})
	t.Run("caller cancel stops retries", func(t *testing.T) {
		w := &fakeWire{errs: []error{Transient("boom", "1"), Transient("boom", "2")}}
		r := newRouter(t, "a", w)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		p := fast
		p.InitialDelay = time.Hour
		p.MaxDelay = time.Hour
		if _, err := r.SendWithPolicy(cctx, &Message{To: "f.b.n:in"}, p); err == nil || w.calls.Load() > 1 {
			t.Fatalf("err=%v calls=%d", err, w.calls.Load())
		}
	})
}

func TestPolicyValidationAndDelay(t *testing.T) {
	bad := []RetryPolicy{
		{MaxAttempts: -1}, {MaxAttempts: 11}, {InitialDelay: -1}, {MaxDelay: -1},
		{BackoffCoefficient: 0.5}, {BackoffCoefficient: 101}, {Timeout: -time.Second},
		{InitialDelay: 2 * time.Second, MaxDelay: time.Second}, {NonRetryableErrorCodes: []string{""}},
	}
	for _, p := range bad {
		err := p.Validate()
		var e *Error
		if !errors.As(err, &e) || e.Code != CodeInvalidPolicy {
			t.Errorf("Validate(%+v) = %v, want invalid_policy", p, err)
		}
		r := newRouter(t, "a", nil)
		if r.SetEdgePolicy("e", p) == nil {
			t.Errorf("SetEdgePolicy accepted %+v", p)
		}
	}
	for _, p := range []RetryPolicy{{}, {MaxAttempts: 1}, {MaxAttempts: 10, BackoffCoefficient: 1}} {
		if err := p.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v", p, err)
		}
	}
	d := RetryPolicy{}.WithDefaults()
	if d.MaxAttempts != 1 || d.InitialDelay != time.Second || d.BackoffCoefficient != 2 || d.MaxDelay != 30*time.Second {
		t.Fatalf("defaults: %+v", d)
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}
	for i, w := range want {
		if got := d.Delay(i + 1); got != w {
			t.Errorf("Delay(%d) = %v, want %v", i+1, got, w)
		}
	}
}

func TestPolicyJSON(t *testing.T) {
	var p RetryPolicy
	err := json.Unmarshal([]byte(`{"maxAttempts":3,"initialDelay":"10ms","backoffCoefficient":1.5,"maxDelay":"1s","nonRetryableErrorCodes":["x"],"timeout":"2s"}`), &p)
	if err != nil {
		t.Fatal(err)
	}
	if p.MaxAttempts != 3 || p.InitialDelay != 10*time.Millisecond || p.BackoffCoefficient != 1.5 || p.MaxDelay != time.Second || p.Timeout != 2*time.Second || len(p.NonRetryableErrorCodes) != 1 {
		t.Fatalf("%+v", p)
	}
	b, _ := json.Marshal(p)
	var q RetryPolicy
	if err := json.Unmarshal(b, &q); err != nil || q.Timeout != p.Timeout || q.MaxDelay != p.MaxDelay {
		t.Fatalf("round trip %s: %+v %v", b, q, err)
	}
	for _, s := range []string{`{"maxAttempts":11}`, `{"initialDelay":"soon"}`, `{"backoffCoefficient":0.1}`, `[]`} {
		if err := json.Unmarshal([]byte(s), &p); err == nil {
			t.Errorf("accepted %s", s)
		}
	}
}

// TestPolicyJSONUnknownKeys: a key the policy does not have (a typo, a
// different spelling, the TinySystems TinyNode CR's *Ms keys) is refused
// with an invalid_policy error naming it, instead of being dropped so the
// defaults apply.
func TestPolicyJSONUnknownKeys(t *testing.T) {
	for _, c := range []struct{ in, key, hint string }{
		{`{"maxAttempt":3}`, "maxAttempt", `"maxAttempts"`},
		{`{"maxAttempts":3,"initialDelayMs":500}`, "initialDelayMs", `"initialDelay"`},
		{`{"maxAttempts":3,"maxDelayMs":500}`, "maxDelayMs", `"maxDelay"`},
		{`{"timeoutMs":500}`, "timeoutMs", `"timeout"`},
		{`{"MaxAttempts":3}`, "MaxAttempts", `"maxAttempts"`},
		{`{"maxAttempts":3,"jitter":true}`, "jitter", "maxAttempts, initialDelay"},
	} {
		var p RetryPolicy
		err := json.Unmarshal([]byte(c.in), &p)
		var e *Error
		if !errors.As(err, &e) || e.Code != CodeInvalidPolicy || e.Retryable {
			t.Errorf("%s: err = %v, want a permanent invalid_policy error", c.in, err)
			continue
		}
		if !strings.Contains(e.Message, strconv.Quote(c.key)) || !strings.Contains(e.Message, c.hint) {
			t.Errorf("%s: %q does not name the key %q with %s", c.in, e.Message, c.key, c.hint)
		}
		if p.MaxAttempts != 0 {
			t.Errorf("%s: the policy was set (%+v) despite the error", c.in, p)
		}
	}
	// Every key MarshalJSON writes is accepted back.
	full := RetryPolicy{MaxAttempts: 3, InitialDelay: time.Millisecond, BackoffCoefficient: 1.5, MaxDelay: time.Second, NonRetryableErrorCodes: []string{"x"}, Timeout: time.Minute}
	b, err := json.Marshal(full)
	if err != nil {
		t.Fatal(err)
	}
	var back RetryPolicy
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, full) {
		t.Fatalf("round trip of %s: %+v, %v", b, back, err)
	}
	for _, s := range []string{`{}`, `null`, `{"maxAttempts":null}`} {
		var p RetryPolicy
		if err := json.Unmarshal([]byte(s), &p); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
}

// TestPolicyErrorSaysDefault: when a limit the user did not set is the
// default, the error says so and names the field the user did set.
func TestPolicyErrorSaysDefault(t *testing.T) {
	for _, c := range []struct {
		p            RetryPolicy
		want, absent []string
	}{
		{RetryPolicy{InitialDelay: time.Minute}, []string{"initialDelay=1m0s", "maxDelay", "default", "30s"}, []string{"maxDelay=30s"}},
		{RetryPolicy{MaxDelay: 500 * time.Millisecond}, []string{"maxDelay=500ms", "initialDelay", "default", "1s"}, []string{"initialDelay=1s"}},
		{RetryPolicy{InitialDelay: 2 * time.Second, MaxDelay: time.Second}, []string{"maxDelay=1s", "initialDelay=2s"}, []string{"default"}},
	} {
		err := c.p.Validate()
		e := AsError(err)
		if e == nil || e.Code != CodeInvalidPolicy {
			t.Errorf("Validate(%+v) = %v", c.p, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(e.Message, w) {
				t.Errorf("Validate(%+v) = %q, want it to mention %q", c.p, e.Message, w)
			}
		}
		for _, a := range c.absent {
			if strings.Contains(e.Message, a) {
				t.Errorf("Validate(%+v) = %q mentions %q as if the user had set it", c.p, e.Message, a)
			}
		}
	}
	var p RetryPolicy
	err := json.Unmarshal([]byte(`{"initialDelay":"1m"}`), &p)
	if e := AsError(err); e == nil || !strings.Contains(e.Message, "default") || strings.Contains(e.Message, "maxDelay=30s") {
		t.Errorf("JSON without maxDelay: %v", err)
	}
}

func TestAsError(t *testing.T) {
	if AsError(nil) != nil {
		t.Fatal("nil")
	}
	e := AsError(errors.New("plain"))
	if e.Code != CodeInternal || !e.Retryable {
		t.Fatalf("%+v", e)
	}
	if e := AsError(context.Canceled); e.Code != CodeCanceled || e.Retryable {
		t.Fatalf("%+v", e)
	}
	wrapped := errors.Join(errors.New("x"), Permanent("c1", "m"))
	if e := AsError(wrapped); e.Code != "c1" {
		t.Fatalf("%+v", e)
	}
	if !errors.Is(wrapped, &Error{Code: "c1"}) {
		t.Fatal("errors.Is by code")
	}
}

// FuzzParseDepth: every value either parses to the decimal it spells, or
// is refused as a permanent invalid_argument error quoting it.
func FuzzParseDepth(f *testing.F) {
	for _, s := range []string{"0", "1", "256", "-1", "", "x", "99999999999999999999", "+3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseDepth(s)
		if err != nil {
			if e := AsError(err); e == nil || e.Code != "invalid_argument" || e.Retryable || !strings.Contains(e.Message, strconv.Quote(s)) {
				t.Fatalf("ParseDepth(%q): %v", s, err)
			}
			return
		}
		if back, aerr := strconv.Atoi(s); n < 0 || aerr != nil || back != n {
			t.Fatalf("ParseDepth(%q) = %d", s, n)
		}
	})
}

// FuzzRoute: a send succeeds exactly when its destination parses, names a
// port and its depth is 0–MaxDepth (every handler and the wire succeed
// here); it then reaches this module's handler or the wire by the parsed
// module, with the name unchanged. Every failure is a permanent *Error.
func FuzzRoute(f *testing.F) {
	for _, s := range []string{"f.a.n", "f.a.n:p", "f.b.n:p", "f.b.n.sub:p", "", "...", "f.a.n:", "x.A.y", "f.a.n:p:q"} {
		f.Add(s, 0)
	}
	f.Add("f.a.n:p", MaxDepth+1)
	f.Add("f.b.n:p", -1)
	w := &fakeWire{}
	r, _ := New(Options{Module: "a", Wire: w})
	var local atomic.Pointer[Message]
	r.HandleDefault(func(ctx context.Context, m *Message) ([]byte, error) {
		local.Store(m)
		return m.Payload, nil
	})
	f.Fuzz(func(t *testing.T, to string, depth int) {
		local.Store(nil)
		w.last.Store(nil)
		_, err := r.Send(context.Background(), &Message{To: to, Depth: depth})
		nn, perr := ParseTo(to)
		valid := perr == nil && nn.Port != "" && depth >= 0 && depth <= MaxDepth
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Code == "" || e.Retryable {
				t.Fatalf("Send(%q, %d): %v, want a permanent *Error", to, depth, err)
			}
			if valid {
				t.Fatalf("Send(%q, %d) refused a valid message: %v", to, depth, err)
			}
			return
		}
		if !valid {
			t.Fatalf("Send(%q, %d) routed an invalid message", to, depth)
		}
		got := w.last.Load()
		if nn.Module == "a" {
			got = local.Load()
		}
		if got == nil || got.To != to {
			t.Fatalf("Send(%q) for module %q did not reach it (local %v, wire %v)", to, nn.Module, local.Load(), w.last.Load())
		}
	})
}

func FuzzPolicyJSON(f *testing.F) {
	f.Add(`{"maxAttempts":3,"initialDelay":"10ms","backoffCoefficient":1.5,"maxDelay":"1s","timeout":"2s"}`)
	f.Add(`{"maxAttempts":-3}`)
	f.Add(`{"backoffCoefficient":1e309}`)
	f.Add(`{"maxAttempts":2,"initialDelay":"1281023h53m38.427387904s","maxDelay":"2562047h47m16.854775807s"}`)
	f.Add(`{"maxAttempt":3,"initialDelayMs":500}`)
	f.Add(`{"MaxAttempts":3}`)
	f.Fuzz(func(t *testing.T, s string) {
		var p RetryPolicy
		if err := p.UnmarshalJSON([]byte(s)); err != nil {
			if e := AsError(err); e.Code != CodeInvalidPolicy || e.Retryable {
				t.Fatalf("%s: %v, want a permanent invalid_policy error", s, err)
			}
			return
		}
		// Only the form's own keys, spelt exactly, are accepted.
		var raw map[string]json.RawMessage
		if err := json.Unmarshal([]byte(s), &raw); err != nil {
			t.Fatalf("accepted %s, which is not a JSON object: %v", s, err)
		}
		for k := range raw {
			if !slices.Contains(policyKeys, k) {
				t.Fatalf("accepted %s with the unknown key %q", s, k)
			}
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("decoded an invalid policy %+v: %v", p, err)
		}
		d := p.WithDefaults()
		for i := 1; i <= d.MaxAttempts; i++ {
			if x := d.Delay(i); x < 0 || x > d.MaxDelay {
				t.Fatalf("Delay(%d) = %v out of [0, %v]", i, x, d.MaxDelay)
			}
		}
	})
}

// Delay never overflows: a backoff that reaches 2^63 ns (math.MaxInt64
// rounds up to it as a float64) is capped at MaxDelay, not turned into a
// negative wait that retries at once.
func TestDelayOverflow(t *testing.T) {
	for _, p := range []RetryPolicy{
		{MaxAttempts: 10, InitialDelay: 1 << 62, BackoffCoefficient: 2, MaxDelay: math.MaxInt64},
		{MaxAttempts: 10, InitialDelay: 1 << 53, BackoffCoefficient: 4, MaxDelay: math.MaxInt64},
		{MaxAttempts: 10, InitialDelay: time.Hour, BackoffCoefficient: MaxBackoffCoefficient, MaxDelay: math.MaxInt64},
	} {
		if err := p.Validate(); err != nil {
			t.Fatalf("%+v: %v", p, err)
		}
		prev := time.Duration(0)
		for i := 1; i <= p.MaxAttempts; i++ {
			d := p.Delay(i)
			if d < prev || d > p.MaxDelay {
				t.Fatalf("%+v: Delay(%d) = %v after %v", p, i, d, prev)
			}
			prev = d
		}
	}
}

// TestTypedNilHandlerErrorIsSuccess: a handler whose error result is a nil
// *Error (a common Go slip: `var e *router.Error; return out, e`) has
// succeeded, through Send (local) and Dispatch alike.
func TestTypedNilHandlerErrorIsSuccess(t *testing.T) {
	r, err := New(Options{Module: "mod"})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Handle("node", func(ctx context.Context, msg *Message) ([]byte, error) {
		var e *Error
		return []byte("ok"), e
	}); err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]func() ([]byte, error){
		"Dispatch": func() ([]byte, error) {
			return r.Dispatch(context.Background(), &Message{To: "flow.mod.node:in", Payload: []byte("x")})
		},
		"Send": func() ([]byte, error) {
			return r.Send(context.Background(), &Message{To: "flow.mod.node:in", Payload: []byte("x")})
		},
	} {
		out, err := call()
		if err != nil || string(out) != "ok" {
			t.Errorf("%s = %q, %#v; want ok, nil", name, out, err)
		}
	}
}
