// Package routertest is the router's conformance suite over a real wire:
// every wire (the gRPC pool, the NATS core and JetStream wires) runs the
// same tests, so routing semantics — results, empty results, error codes and
// retryable flags, retry policies, depth, nested requests, cancellation —
// are the same whatever carries the message.
package routertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard/router"
)

// Fabric is one wire under test.
type Fabric struct {
	// Serve runs h as module on the wire until the test ends and returns
	// once the module receives messages.
	Serve func(t testing.TB, module string, h router.Handler)
	// Wire reaches every module served on the fabric.
	Wire router.Wire
	// Durable says that a message to a module nobody serves waits for it
	// (JetStream) instead of failing as unknown.
	Durable bool
}

// waitFor bounds every wait of the suite.
const waitFor = 30 * time.Second

// Run runs the suite on f. Module names are fixed, so each Run needs its own
// namespace (a fresh pool, a unique subject prefix).
func Run(t *testing.T, f Fabric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitFor)
	defer cancel()
	client := newRouter(t, "rt-client", f.Wire)

	var calls atomic.Int64
	var failFirst atomic.Int64
	type seen struct{ msg router.Message }
	var last atomic.Pointer[seen]
	f.Serve(t, "rt-remote", func(ctx context.Context, m *router.Message) ([]byte, error) {
		calls.Add(1)
		last.Store(&seen{msg: *m})
		switch string(m.Payload) {
		case "empty":
			return nil, nil
		case "permanent":
			return nil, router.Permanent("x_bad_input", "never works")
		case "transient":
			return nil, router.Transient("busy", "try again")
		case "quota":
			return nil, router.Transient("quota", "retryable but listed")
		case "flaky":
			if failFirst.Add(-1) >= 0 {
				return nil, router.Transient("busy", "try again")
			}
			return []byte("ok"), nil
		case "hang":
			if failFirst.Add(-1) >= 0 {
				// NATS does not carry the caller's cancellation: do not
				// hang until the server stops.
				select {
				case <-ctx.Done():
				case <-time.After(2 * time.Second):
				}
				return nil, router.Transient("hung", "gave up hanging")
			}
			return []byte("ok"), nil
		}
		return append([]byte("echo:"), m.Payload...), nil
	})
	fast := router.RetryPolicy{MaxAttempts: 5, InitialDelay: 10 * time.Millisecond, BackoffCoefficient: 2, MaxDelay: 40 * time.Millisecond}

	t.Run("round trip carries payload, names, edge and metadata", func(t *testing.T) {
		payload := []byte("bin\x00\xff\r\nary")
		out, err := client.Send(ctx, &router.Message{From: "f.rt-client.src:out", To: "f.rt-remote.n1:in", EdgeID: "edge-7",
			Payload: payload, Metadata: map[string]string{"k": "v", "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}})
		if err != nil || !bytes.Equal(out, append([]byte("echo:"), payload...)) {
			t.Fatalf("out=%q err=%v", out, err)
		}
		s := last.Load()
		if s.msg.From != "f.rt-client.src:out" || s.msg.To != "f.rt-remote.n1:in" || s.msg.EdgeID != "edge-7" || s.msg.ID == "" {
			t.Fatalf("handler saw %+v", s.msg)
		}
		if s.msg.Metadata["k"] != "v" || s.msg.Metadata["traceparent"] != "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" {
			t.Fatalf("metadata %v", s.msg.Metadata)
		}
	})
	t.Run("nil message is refused, not a panic", func(t *testing.T) {
		_, err := client.Send(ctx, nil)
		_, werr := f.Wire.Send(ctx, nil)
		_, derr := client.Dispatch(ctx, nil)
		for who, err := range map[string]error{"router": err, "wire": werr, "dispatch": derr} {
			if e := router.AsError(err); e == nil || e.Code != router.CodeInvalidName || e.Retryable {
				t.Errorf("%s: Send(nil) = %v, want a permanent invalid_name", who, err)
			}
		}
	})
	t.Run("empty result", func(t *testing.T) {
		out, err := client.Send(ctx, &router.Message{To: "f.rt-remote.n:in", Payload: []byte("empty")})
		if err != nil || len(out) != 0 {
			t.Fatalf("out=%q err=%v", out, err)
		}
	})
	t.Run("remote errors keep code, flag and message", func(t *testing.T) {
		for _, tc := range []struct {
			payload, code, msg string
			retryable          bool
		}{{"permanent", "x_bad_input", "never works", false}, {"transient", "busy", "try again", true}} {
			_, err := client.Send(ctx, &router.Message{To: "f.rt-remote.n:in", Payload: []byte(tc.payload)})
			var e *router.Error
			if !errors.As(err, &e) || e.Code != tc.code || e.Retryable != tc.retryable || e.Message != tc.msg {
				t.Fatalf("%s: err = %#v", tc.payload, err)
			}
		}
	})
	t.Run("no implicit retry", func(t *testing.T) {
		before := calls.Load()
		if _, err := client.SendWithPolicy(ctx, &router.Message{To: "f.rt-remote.n:in", Payload: []byte("permanent")}, fast); err == nil {
			t.Fatal("want error")
		}
		if _, err := client.Send(ctx, &router.Message{To: "f.rt-remote.n:in", EdgeID: "no-policy", Payload: []byte("transient")}); err == nil {
			t.Fatal("want error")
		}
		if n := calls.Load() - before; n != 2 {
			t.Fatalf("handler ran %d times for two failing sends, want 2", n)
		}
	})
	t.Run("retry policy until success and up to maxAttempts", func(t *testing.T) {
		failFirst.Store(2)
		before := calls.Load()
		out, err := client.SendWithPolicy(ctx, &router.Message{To: "f.rt-remote.n:in", Payload: []byte("flaky")}, fast)
		if err != nil || string(out) != "ok" || calls.Load()-before != 3 {
			t.Fatalf("out=%q err=%v attempts=%d", out, err, calls.Load()-before)
		}
		failFirst.Store(100)
		before = calls.Load()
		_, err = client.SendWithPolicy(ctx, &router.Message{To: "f.rt-remote.n:in", Payload: []byte("flaky")}, fast)
		if !strings.Contains(fmt.Sprint(err), "5 attempts") || calls.Load()-before != 5 {
			t.Fatalf("err=%v attempts=%d", err, calls.Load()-before)
		}
	})
	t.Run("nonRetryableErrorCodes", func(t *testing.T) {
		pol := fast
		pol.NonRetryableErrorCodes = []string{"quota"}
		before := calls.Load()
		_, err := client.SendWithPolicy(ctx, &router.Message{To: "f.rt-remote.n:in", Payload: []byte("quota")}, pol)
		if router.AsError(err).Code != "quota" || calls.Load()-before != 1 {
			t.Fatalf("err=%v attempts=%d", err, calls.Load()-before)
		}
	})
	t.Run("per-attempt timeout", func(t *testing.T) {
		failFirst.Store(2)
		pol := fast
		pol.Timeout = 300 * time.Millisecond
		before := calls.Load()
		out, err := client.SendWithPolicy(ctx, &router.Message{To: "f.rt-remote.n:in", Payload: []byte("hang")}, pol)
		if err != nil || string(out) != "ok" {
			t.Fatalf("out=%q err=%v attempts=%d", out, err, calls.Load()-before)
		}
		failFirst.Store(1)
		pol.MaxAttempts = 1
		_, err = client.SendWithPolicy(ctx, &router.Message{To: "f.rt-remote.n:in", Payload: []byte("hang")}, pol)
		if e := router.AsError(err); e == nil || e.Code != router.CodeDeadlineExceeded || !e.Retryable {
			t.Fatalf("timeout error: %v", err)
		}
	})
	t.Run("caller cancel", func(t *testing.T) {
		failFirst.Store(1)
		cctx, ccancel := context.WithCancel(ctx)
		errc := make(chan error, 1)
		before := calls.Load()
		go func() {
			_, err := client.Send(cctx, &router.Message{To: "f.rt-remote.n:in", Payload: []byte("hang")})
			errc <- err
		}()
		waitUntil(t, func() bool { return calls.Load() > before })
		ccancel()
		select {
		case err := <-errc:
			if e := router.AsError(err); e == nil || e.Code != router.CodeCanceled || e.Retryable {
				t.Fatalf("cancelled send: %v", err)
			}
		case <-time.After(waitFor):
			t.Fatal("a cancelled send did not return")
		}
	})
	t.Run("depth travels and 257 is refused", func(t *testing.T) {
		if _, err := client.Send(ctx, &router.Message{To: "f.rt-remote.n:in", Depth: 41}); err != nil {
			t.Fatal(err)
		}
		if s := last.Load(); s.msg.Depth != 41 {
			t.Fatalf("handler saw depth %d, want 41", s.msg.Depth)
		}
		before := calls.Load()
		_, err := client.Send(ctx, &router.Message{To: "f.rt-remote.n:in", Depth: 257})
		if router.AsError(err).Code != router.CodeDepthExceeded || calls.Load() != before {
			t.Fatalf("depth 257: %v", err)
		}
	})
	t.Run("depth loop across processes", func(t *testing.T) {
		var hops atomic.Int64
		for _, pair := range [][2]string{{"rt-ping", "rt-pong"}, {"rt-pong", "rt-ping"}} {
			r := newRouter(t, pair[0], f.Wire)
			next := pair[1]
			r.HandleDefault(func(ctx context.Context, m *router.Message) ([]byte, error) {
				hops.Add(1)
				return r.Send(ctx, &router.Message{To: "f." + next + ".n:in"})
			})
			f.Serve(t, pair[0], r.Dispatch)
		}
		_, err := client.Send(ctx, &router.Message{To: "f.rt-ping.n:in"})
		if e := router.AsError(err); e == nil || e.Code != router.CodeDepthExceeded || e.Retryable {
			t.Fatalf("loop: %v", err)
		}
		if n := hops.Load(); n != router.MaxDepth+1 {
			t.Fatalf("loop made %d hops, want %d", n, router.MaxDepth+1)
		}
	})
	t.Run("nested A to B to A does not deadlock", func(t *testing.T) {
		a := newRouter(t, "rt-nest-a", f.Wire)
		b := newRouter(t, "rt-nest-b", f.Wire)
		must(t, a.Handle("start", func(ctx context.Context, m *router.Message) ([]byte, error) {
			return a.Send(ctx, &router.Message{To: "f.rt-nest-b.mid:in", Payload: m.Payload})
		}))
		must(t, a.Handle("leaf", func(ctx context.Context, m *router.Message) ([]byte, error) {
			return append([]byte("leaf:"), m.Payload...), nil
		}))
		b.HandleDefault(func(ctx context.Context, m *router.Message) ([]byte, error) {
			return b.Send(ctx, &router.Message{To: "f.rt-nest-a.leaf:in", Payload: m.Payload})
		})
		f.Serve(t, "rt-nest-a", a.Dispatch)
		f.Serve(t, "rt-nest-b", b.Dispatch)
		var wg sync.WaitGroup
		errs := make(chan error, 32)
		for i := range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p := fmt.Sprint(i)
				out, err := client.Send(ctx, &router.Message{To: "f.rt-nest-a.start:in", Payload: []byte(p)})
				if err != nil || string(out) != "leaf:"+p {
					errs <- fmt.Errorf("nested %d: out=%q err=%v", i, out, err)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
	t.Run("64 concurrent senders", func(t *testing.T) {
		var wg sync.WaitGroup
		var bad atomic.Int64
		for i := range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := range 20 {
					p := fmt.Sprintf("%d-%d", i, j)
					out, err := client.Send(ctx, &router.Message{To: "f.rt-remote.n:in", Payload: []byte(p)})
					if err != nil || string(out) != "echo:"+p {
						bad.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		if bad.Load() != 0 {
			t.Fatalf("%d of 1280 concurrent sends failed or got another's reply", bad.Load())
		}
	})
	if !f.Durable {
		t.Run("unknown module", func(t *testing.T) {
			_, err := client.Send(ctx, &router.Message{To: "f.rt-ghost.n:in"})
			if e := router.AsError(err); e == nil || e.Code != router.CodeModuleUnknown || !e.Retryable {
				t.Fatalf("unknown module: %v", err)
			}
		})
	}
}

func newRouter(t testing.TB, module string, w router.Wire) *router.Router {
	t.Helper()
	r, err := router.New(router.Options{Module: module, Wire: w})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func waitUntil(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(2 * time.Millisecond)
	}
}
