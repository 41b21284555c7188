package pool

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/switchboard-io/switchboard/grpcwire/modulepb"
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

// sdkLikeService answers like a TinySystems SDK module: a handler error is
// returned as a plain Go error, which grpc-go sends as status Unknown with
// the error's text, no details and no trailers.
type sdkLikeService struct {
	modulepb.UnimplementedModuleServiceServer
	calls atomic.Int64
}

func (s *sdkLikeService) Message(ctx context.Context, req *modulepb.MessageRequest) (*modulepb.MessageResponse, error) {
	s.calls.Add(1)
	if string(req.Payload) == "fail" {
		return nil, errors.New("component: invalid settings")
	}
	return &modulepb.MessageResponse{Data: req.Payload}, nil
}

// startSDKLike serves an sdkLikeService on loopback with grpc-go defaults
// plus a small receive limit.
func startSDKLike(t *testing.T, maxRecv int) (*sdkLikeService, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	svc := &sdkLikeService{}
	gs := grpc.NewServer(grpc.MaxRecvMsgSize(maxRecv))
	modulepb.RegisterModuleServiceServer(gs, svc)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	return svc, lis.Addr().String()
}

// TestForeignErrorsAreNotRetried: an SDK handler error (status Unknown, no
// Switchboard detail) is a permanent remote_error delivered once even under
// a retrying policy; a message over the peer's size limit
// (ResourceExhausted) is not retried; a refused connection still is.
func TestForeignErrorsAreNotRetried(t *testing.T) {
	svc, addr := startSDKLike(t, 1024)
	p := newPool(t, Options{})
	p.Register("sdk-mod", addr)
	r := routerOver(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	retrying := router.RetryPolicy{MaxAttempts: 3, InitialDelay: time.Millisecond}
	if err := r.SetEdgePolicy("edge-retry", retrying); err != nil {
		t.Fatal(err)
	}
	if out, err := r.Send(ctx, &router.Message{To: "f.sdk-mod.n:in", EdgeID: "edge-retry", Payload: []byte("ok")}); err != nil || string(out) != "ok" {
		t.Fatalf("plain send: %q %v", out, err)
	}

	before := svc.calls.Load()
	_, err := r.Send(ctx, &router.Message{To: "f.sdk-mod.n:in", EdgeID: "edge-retry", Payload: []byte("fail")})
	var e *router.Error
	if !errors.As(err, &e) || e.Code != router.CodeRemoteError || e.Retryable || e.Message != "component: invalid settings" {
		t.Fatalf("SDK handler error: %#v", err)
	}
	if n := svc.calls.Load() - before; n != 1 {
		t.Fatalf("SDK handler ran %d times under a 3-attempt policy, want exactly 1", n)
	}

	before = svc.calls.Load()
	_, err = r.Send(ctx, &router.Message{To: "f.sdk-mod.n:in", EdgeID: "edge-retry", Payload: make([]byte, 4096)})
	if !errors.As(err, &e) || e.Code != router.CodeResourceExhausted || e.Retryable || strings.Contains(err.Error(), "attempts") {
		t.Fatalf("oversized message: %#v", err)
	}
	if n := svc.calls.Load() - before; n != 0 {
		t.Fatalf("oversized message reached the handler %d times", n)
	}

	// A transport failure before any handler ran stays retryable.
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := l.Addr().String()
	l.Close()
	p.Register("gone", dead)
	_, err = r.SendWithPolicy(ctx, &router.Message{To: "f.gone.n:in"}, router.RetryPolicy{MaxAttempts: 2, InitialDelay: time.Millisecond})
	if !errors.As(err, &e) || e.Code != router.CodeUnavailable || !e.Retryable || !strings.Contains(err.Error(), "2 attempts") {
		t.Fatalf("refused connection: %v", err)
	}
}

// TestDefaultCallTimeout: a send whose context has no deadline still gets
// one (the pool's CallTimeout), so a peer that never answers cannot hold the
// caller forever; a caller's own deadline is kept.
func TestDefaultCallTimeout(t *testing.T) {
	deadlines := make(chan time.Duration, 4)
	srv := startServer(t, func(ctx context.Context, m *router.Message) ([]byte, error) {
		d, ok := ctx.Deadline()
		if !ok {
			deadlines <- -1
		} else {
			deadlines <- time.Until(d)
		}
		if string(m.Payload) == "hang" {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return nil, nil
	})
	p := newPool(t, Options{})
	p.Register("remote", srv.addr)
	if _, err := p.Send(context.Background(), &router.Message{To: "f.remote.n:in"}); err != nil {
		t.Fatal(err)
	}
	if d := <-deadlines; d <= 0 || d > DefaultCallTimeout {
		t.Fatalf("handler saw deadline in %v, want within (0, %v]", d, DefaultCallTimeout)
	}
	short := newPool(t, Options{CallTimeout: 100 * time.Millisecond})
	short.Register("remote", srv.addr)
	_, err := short.Send(context.Background(), &router.Message{To: "f.remote.n:in", Payload: []byte("hang")})
	<-deadlines
	var e *router.Error
	if !errors.As(err, &e) || e.Code != router.CodeDeadlineExceeded || !e.Retryable {
		t.Fatalf("hanging peer: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	if _, err := short.Send(ctx, &router.Message{To: "f.remote.n:in"}); err != nil {
		t.Fatal(err)
	}
	if d := <-deadlines; d <= 10*time.Minute {
		t.Fatalf("the caller's one-hour deadline became %v", d)
	}
}

// TestNegativeCallTimeoutIsTheDefault: a negative CallTimeout gave every
// send without a deadline an expired context (each failed at once with
// deadline_exceeded); it is read as the default, as zero is.
func TestNegativeCallTimeoutIsTheDefault(t *testing.T) {
	srv := startServer(t, router.Echo)
	p := newPool(t, Options{CallTimeout: -time.Second})
	p.Register("remote", srv.addr)
	out, err := p.Send(context.Background(), &router.Message{To: "f.remote.n:in", Payload: []byte("hi")})
	if err != nil || string(out) != "hi" {
		t.Fatalf("Send = %q, %v; want the echo", out, err)
	}
}

// TestMessageIDKeptAcrossAttempts: retries are at-least-once, and every
// attempt carries the same message ID so a receiver can deduplicate.
func TestMessageIDKeptAcrossAttempts(t *testing.T) {
	ids := make(chan string, 3)
	srv := startServer(t, func(ctx context.Context, m *router.Message) ([]byte, error) {
		ids <- m.ID
		if len(ids) < 3 {
			return nil, router.Transient("busy", "again")
		}
		return nil, nil
	})
	p := newPool(t, Options{})
	p.Register("remote", srv.addr)
	r := routerOver(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if _, err := r.SendWithPolicy(ctx, &router.Message{To: "f.remote.n:in"}, router.RetryPolicy{MaxAttempts: 3, InitialDelay: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	first := <-ids
	if first == "" {
		t.Fatal("the router sent no message ID")
	}
	for i := 2; i <= 3; i++ {
		if id := <-ids; id != first {
			t.Fatalf("attempt %d carried ID %q, the first %q", i, id, first)
		}
	}
}
