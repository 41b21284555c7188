package pool

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard/router"
)

// Routing over the pool with real gRPC servers: remote errors keep their
// code and retryable flag, and edge retry policies act on them.

func routerOver(t *testing.T, p *Pool) *router.Router {
	t.Helper()
	r, err := router.New(router.Options{Module: "caller", Wire: p, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRemoteErrorsAndRetries(t *testing.T) {
	var failFirst atomic.Int64 // fail this many calls, then succeed
	srv := startServer(t, func(ctx context.Context, m *router.Message) ([]byte, error) {
		switch string(m.Payload) {
		case "permanent":
			return nil, router.Permanent("x_bad_input", "never works")
		case "quota":
			return nil, router.Transient("quota", "retryable but listed")
		case "flaky":
			if failFirst.Add(-1) >= 0 {
				return nil, router.Transient("busy", "try again")
			}
			return []byte("ok"), nil
		case "hang":
			if failFirst.Add(-1) >= 0 {
				<-ctx.Done()
				return nil, ctx.Err()
			}
			return []byte("ok"), nil
		}
		return m.Payload, nil
	})
	p := newPool(t, Options{})
	p.Register("remote", srv.addr)
	r := routerOver(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	fast := router.RetryPolicy{MaxAttempts: 5, InitialDelay: 10 * time.Millisecond, BackoffCoefficient: 2, MaxDelay: 40 * time.Millisecond}

	t.Run("permanent remote error is not retried", func(t *testing.T) {
		before := srv.calls.Load()
		_, err := r.SendWithPolicy(ctx, &router.Message{To: "f.remote.n:in", Payload: []byte("permanent")}, fast)
		var e *router.Error
		if !errors.As(err, &e) || e.Code != "x_bad_input" || e.Retryable || e.Message != "never works" {
			t.Fatalf("err = %#v", err)
		}
		if n := srv.calls.Load() - before; n != 1 {
			t.Fatalf("server saw %d attempts, want 1", n)
		}
	})
	t.Run("retryable remote error retried up to maxAttempts", func(t *testing.T) {
		failFirst.Store(100)
		before := srv.calls.Load()
		start := time.Now()
		_, err := r.SendWithPolicy(ctx, &router.Message{To: "f.remote.n:in", Payload: []byte("flaky")}, fast)
		elapsed := time.Since(start)
		var e *router.Error
		if !errors.As(err, &e) || e.Code != "busy" || !e.Retryable || !strings.Contains(err.Error(), "5 attempts") {
			t.Fatalf("err = %v", err)
		}
		if n := srv.calls.Load() - before; n != 5 {
			t.Fatalf("server saw %d attempts, want 5", n)
		}
		// Backoff 10+20+40+40 ms: a lower bound only (never an upper one).
		if elapsed < 110*time.Millisecond {
			t.Fatalf("4 backoffs took %v, want at least 110ms", elapsed)
		}
	})
	t.Run("retry succeeds once the remote recovers", func(t *testing.T) {
		failFirst.Store(2)
		before := srv.calls.Load()
		if err := r.SetEdgePolicy("edge-1", fast); err != nil {
			t.Fatal(err)
		}
		out, err := r.Send(ctx, &router.Message{To: "f.remote.n:in", EdgeID: "edge-1", Payload: []byte("flaky")})
		if err != nil || string(out) != "ok" || srv.calls.Load()-before != 3 {
			t.Fatalf("out=%q err=%v attempts=%d", out, err, srv.calls.Load()-before)
		}
	})
	t.Run("no policy means one attempt", func(t *testing.T) {
		failFirst.Store(100)
		before := srv.calls.Load()
		if _, err := r.Send(ctx, &router.Message{To: "f.remote.n:in", EdgeID: "no-policy", Payload: []byte("flaky")}); err == nil {
			t.Fatal("want error")
		}
		if n := srv.calls.Load() - before; n != 1 {
			t.Fatalf("server saw %d attempts, want 1", n)
		}
	})
	t.Run("nonRetryableErrorCodes honoured", func(t *testing.T) {
		pol := fast
		pol.NonRetryableErrorCodes = []string{"quota"}
		before := srv.calls.Load()
		_, err := r.SendWithPolicy(ctx, &router.Message{To: "f.remote.n:in", Payload: []byte("quota")}, pol)
		if codeOf(err) != "quota" || srv.calls.Load()-before != 1 {
			t.Fatalf("err=%v attempts=%d", err, srv.calls.Load()-before)
		}
		// Without the listing the same error is retried.
		before = srv.calls.Load()
		_, _ = r.SendWithPolicy(ctx, &router.Message{To: "f.remote.n:in", Payload: []byte("quota")}, fast)
		if n := srv.calls.Load() - before; n != 5 {
			t.Fatalf("unlisted retryable code: %d attempts, want 5", n)
		}
	})
	t.Run("per-attempt timeout", func(t *testing.T) {
		failFirst.Store(2)
		pol := fast
		pol.Timeout = 100 * time.Millisecond
		before := srv.calls.Load()
		out, err := r.SendWithPolicy(ctx, &router.Message{To: "f.remote.n:in", Payload: []byte("hang")}, pol)
		if err != nil || string(out) != "ok" || srv.calls.Load()-before != 3 {
			t.Fatalf("out=%q err=%v attempts=%d", out, err, srv.calls.Load()-before)
		}
		// One attempt only: the timeout error says so and is retryable.
		failFirst.Store(1)
		pol.MaxAttempts = 1
		_, err = r.SendWithPolicy(ctx, &router.Message{To: "f.remote.n:in", Payload: []byte("hang")}, pol)
		var e *router.Error
		if !errors.As(err, &e) || e.Code != router.CodeDeadlineExceeded || !e.Retryable {
			t.Fatalf("timeout error: %v", err)
		}
	})
	t.Run("depth travels and 257 is refused", func(t *testing.T) {
		before := srv.calls.Load()
		_, err := r.Send(ctx, &router.Message{To: "f.remote.n:in", Depth: 257})
		if codeOf(err) != router.CodeDepthExceeded || srv.calls.Load() != before {
			t.Fatalf("depth 257: %v (server calls %d)", err, srv.calls.Load()-before)
		}
	})
	t.Run("unknown module is retried by a policy, then reported", func(t *testing.T) {
		_, err := r.SendWithPolicy(ctx, &router.Message{To: "f.ghost.n:in"}, router.RetryPolicy{MaxAttempts: 2, InitialDelay: time.Millisecond})
		if codeOf(err) != router.CodeModuleUnknown || !strings.Contains(err.Error(), "2 attempts") {
			t.Fatalf("unknown: %v", err)
		}
	})
}

// TestDepthLoopAcrossProcesses: two "processes" (routers behind gRPC servers)
// that forward to each other forever are stopped by the depth limit.
func TestDepthLoopAcrossProcesses(t *testing.T) {
	p := newPool(t, Options{})
	mk := func(module, next string) *testServer {
		r, err := router.New(router.Options{Module: module, Wire: p, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		r.HandleDefault(func(ctx context.Context, m *router.Message) ([]byte, error) {
			return r.Send(ctx, &router.Message{To: "f." + next + ".n:in"})
		})
		return startServer(t, r.Dispatch)
	}
	a := mk("ping", "pong")
	b := mk("pong", "ping")
	p.Register("ping", a.addr)
	p.Register("pong", b.addr)
	client, _ := router.New(router.Options{Wire: p, Logger: quiet})
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	_, err := client.Send(ctx, &router.Message{To: "f.ping.n:in"})
	var e *router.Error
	if !errors.As(err, &e) || e.Code != router.CodeDepthExceeded || e.Retryable {
		t.Fatalf("loop: %v", err)
	}
	if total := a.calls.Load() + b.calls.Load(); total != router.MaxDepth+1 {
		t.Fatalf("loop made %d hops, want %d", total, router.MaxDepth+1)
	}
}
