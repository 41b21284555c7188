package pool

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/connectivity"

	"github.com/switchboard-io/switchboard/grpcwire"
	"github.com/switchboard-io/switchboard/internal/testkit"
	"github.com/switchboard-io/switchboard/router"
)

// waitFor is generous: the test machine is a loaded 2-core box.
const waitFor = 30 * time.Second

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// testServer is a real module server on 127.0.0.1:0.
type testServer struct {
	addr  string
	lis   *testkit.CountingListener
	calls atomic.Int64
	stop  func()
}

// startServer serves h (Echo when nil) on a fresh loopback port until the
// test ends or stop is called.
func startServer(t testing.TB, h router.Handler) *testServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &testServer{addr: l.Addr().String(), lis: &testkit.CountingListener{Listener: l}}
	if h == nil {
		h = router.Echo
	}
	inner := h
	h = func(ctx context.Context, m *router.Message) ([]byte, error) {
		s.calls.Add(1)
		return inner(ctx, m)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = grpcwire.Serve(ctx, s.lis, h, grpcwire.ServerOptions{Logger: quiet, GracePeriod: time.Second})
	}()
	var once sync.Once
	s.stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(s.stop)
	return s
}

func newPool(t *testing.T, opts Options) *Pool {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quiet
	}
	p := New(opts)
	ctx, cancel := context.WithCancel(context.Background())
	p.Start(ctx)
	t.Cleanup(cancel)
	return p
}

func send(ctx context.Context, p *Pool, to, payload string) (string, error) {
	out, err := p.Send(ctx, &router.Message{To: to, Payload: []byte(payload)})
	return string(out), err
}

// sendResult is the outcome of one Send.
type sendResult struct {
	out []byte
	err error
}

// sendAsync sends to `to` through p on a goroutine of its own (a call the
// test holds open, or cuts); the channel receives the outcome.
func sendAsync(ctx context.Context, p *Pool, to, payload string) <-chan sendResult {
	res := make(chan sendResult, 1)
	go func() {
		out, err := p.Send(ctx, &router.Message{To: to, Payload: []byte(payload)})
		res <- sendResult{out, err}
	}()
	return res
}

func codeOf(err error) string {
	var e *router.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

func TestThousandConcurrentFirstSendsDialOnce(t *testing.T) {
	for _, lazy := range []bool{true, false} {
		name := "prewarmed"
		if lazy {
			name = "lazy"
		}
		t.Run(name, func(t *testing.T) {
			srv := startServer(t, nil)
			p := newPool(t, Options{Lazy: lazy})
			p.Register("mod-a", srv.addr)
			ctx, cancel := context.WithTimeout(context.Background(), waitFor)
			defer cancel()
			start := make(chan struct{})
			var wg sync.WaitGroup
			var failed atomic.Int64
			for i := 0; i < 1000; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					if out, err := send(ctx, p, "f.mod-a.n", "x"); err != nil || out != "x" {
						failed.Add(1)
						t.Errorf("send: %q %v", out, err)
					}
				}()
			}
			close(start)
			wg.Wait()
			if failed.Load() != 0 {
				t.Fatalf("%d sends failed", failed.Load())
			}
			if n := srv.lis.Accepted.Load(); n != 1 {
				t.Fatalf("accepted %d connections, want exactly 1", n)
			}
			if srv.calls.Load() != 1000 {
				t.Fatalf("server got %d calls", srv.calls.Load())
			}
		})
	}
}

func TestSharedConnectionLifecycle(t *testing.T) {
	s1 := startServer(t, nil)
	s2 := startServer(t, nil)
	p := newPool(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()

	// Two modules on one address share one connection.
	p.Register("mod-a", s1.addr)
	p.Register("mod-b", s1.addr)
	for _, to := range []string{"f.mod-a.n", "f.mod-b.n", "f.mod-a.n", "f.mod-b.n"} {
		if _, err := send(ctx, p, to, "x"); err != nil {
			t.Fatal(err)
		}
	}
	if n := s1.lis.Accepted.Load(); n != 1 {
		t.Fatalf("two modules on one address made %d connections", n)
	}
	if c := p.Connections(); len(c) != 1 || c[0] != s1.addr {
		t.Fatalf("connections: %v", c)
	}

	// Deregistering one keeps the shared connection.
	p.Deregister("mod-a")
	if c := p.Connections(); len(c) != 1 {
		t.Fatalf("connection dropped while still shared: %v", c)
	}
	if _, err := send(ctx, p, "f.mod-b.n", "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := send(ctx, p, "f.mod-a.n", "x"); codeOf(err) != router.CodeModuleUnknown {
		t.Fatalf("deregistered module: %v", err)
	}
	if s1.lis.Accepted.Load() != 1 || s1.lis.Open.Load() != 1 {
		t.Fatalf("accepted %d open %d", s1.lis.Accepted.Load(), s1.lis.Open.Load())
	}

	// Moving the last module off the address closes the old connection.
	p.Register("mod-b", s2.addr)
	testkit.WaitUntil(t, "old connection closed at the server", func() bool { return s1.lis.Open.Load() == 0 })
	if c := p.Connections(); len(c) != 1 || c[0] != s2.addr {
		t.Fatalf("connections after move: %v", c)
	}
	before := s2.calls.Load()
	if _, err := send(ctx, p, "f.mod-b.n", "x"); err != nil {
		t.Fatal(err)
	}
	if s2.calls.Load() != before+1 || s1.lis.Accepted.Load() != 1 {
		t.Fatal("message did not go to the new address")
	}

	// Re-registering at the same address changes nothing.
	p.Register("mod-b", s2.addr)
	if s2.lis.Accepted.Load() != 1 {
		t.Fatalf("re-register at the same address redialled: %d", s2.lis.Accepted.Load())
	}

	// Deregistering the last user closes it.
	p.Deregister("mod-b")
	testkit.WaitUntil(t, "connection closed after deregister", func() bool { return s2.lis.Open.Load() == 0 })
	if c := p.Connections(); len(c) != 0 {
		t.Fatalf("connections: %v", c)
	}
}

func TestNatsAddressesNeverDialled(t *testing.T) {
	var dials atomic.Int64
	dialer := grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		dials.Add(1)
		return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	})
	p := newPool(t, Options{DialOptions: []grpc.DialOption{dialer}})
	p.Register("mod-n", "nats://tinymodule.mod-n.msg")
	p.AddInstance("mod-m", "i1", "nats://tinymodule.mod-m.msg")
	_, err := send(context.Background(), p, "f.mod-n.x", "x")
	var e *router.Error
	if !errors.As(err, &e) || e.Code != router.CodeNotDialable || e.Retryable || !strings.Contains(e.Message, "nats://") {
		t.Fatalf("send to nats-only module: %v", err)
	}
	if c := p.Connections(); len(c) != 0 {
		t.Fatalf("connections for nats addresses: %v", c)
	}
	// A dialable replica next to a nats one takes all the traffic.
	srv := startServer(t, nil)
	p.AddInstance("mod-m", "i2", srv.addr)
	for i := 0; i < 5; i++ {
		if _, err := send(context.Background(), p, "f.mod-m.x", "x"); err != nil {
			t.Fatal(err)
		}
	}
	if srv.calls.Load() != 5 {
		t.Fatalf("dialable replica got %d of 5", srv.calls.Load())
	}
	if d := dials.Load(); d != 1 {
		t.Fatalf("dialler called %d times, want 1 (the host:port only)", d)
	}
}

func TestRunContextClosesEverything(t *testing.T) {
	s1 := startServer(t, nil)
	s2 := startServer(t, nil)
	p := New(Options{Logger: quiet})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	p.Register("mod-a", s1.addr)
	p.AddInstance("mod-b", "i1", s2.addr)
	for _, to := range []string{"f.mod-a.n", "f.mod-b.n"} {
		if _, err := send(context.Background(), p, to, "x"); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "all connections closed", func() bool { return s1.lis.Open.Load() == 0 && s2.lis.Open.Load() == 0 })
	if c := p.Connections(); len(c) != 0 {
		t.Fatalf("connections after close: %v", c)
	}
	if _, err := send(context.Background(), p, "f.mod-a.n", "x"); codeOf(err) != router.CodeUnavailable {
		t.Fatalf("send after close: %v", err)
	}
	p.Register("mod-a", s1.addr) // ignored
	if len(p.Connections()) != 0 || s1.lis.Accepted.Load() != 1 {
		t.Fatal("register after close dialled")
	}
}

func TestReplicasRoundRobin(t *testing.T) {
	srvs := []*testServer{startServer(t, nil), startServer(t, nil), startServer(t, nil)}
	p := newPool(t, Options{})
	for i, s := range srvs {
		p.AddInstance("mod-r", []string{"i1", "i2", "i3"}[i], s.addr)
	}
	// Sends prefer READY connections: wait for the pre-warm of all three.
	testkit.WaitUntil(t, "three READY connections", func() bool {
		n := 0
		for _, st := range p.States() {
			if st == connectivity.Ready {
				n++
			}
		}
		return n == 3
	})
	ctx := context.Background()
	for i := 0; i < 30; i++ {
		if _, err := send(ctx, p, "f.mod-r.n", "x"); err != nil {
			t.Fatal(err)
		}
	}
	for i, s := range srvs {
		if s.calls.Load() != 10 {
			t.Fatalf("replica %d got %d of 30", i, s.calls.Load())
		}
	}
	// A replica that leaves stops receiving at once.
	p.RemoveInstance("mod-r", "i2")
	for i := 0; i < 30; i++ {
		if _, err := send(ctx, p, "f.mod-r.n", "x"); err != nil {
			t.Fatal(err)
		}
	}
	if srvs[1].calls.Load() != 10 || srvs[0].calls.Load() != 25 || srvs[2].calls.Load() != 25 {
		t.Fatalf("after removal: %d %d %d", srvs[0].calls.Load(), srvs[1].calls.Load(), srvs[2].calls.Load())
	}
	testkit.WaitUntil(t, "removed replica's connection closed", func() bool { return srvs[1].lis.Open.Load() == 0 })
	if m := p.Modules()["mod-r"]; len(m) != 2 {
		t.Fatalf("modules: %v", p.Modules())
	}
	p.RemoveInstance("mod-r", "i1")
	p.RemoveInstance("mod-r", "i3")
	if _, err := send(ctx, p, "f.mod-r.n", "x"); codeOf(err) != router.CodeModuleUnknown {
		t.Fatalf("all replicas gone: %v", err)
	}
}

func TestUnknownModuleAndBadNames(t *testing.T) {
	p := newPool(t, Options{})
	_, err := send(context.Background(), p, "f.nobody.n", "x")
	var e *router.Error
	if !errors.As(err, &e) || e.Code != router.CodeModuleUnknown || !e.Retryable || !strings.Contains(err.Error(), `"nobody"`) {
		t.Fatalf("unknown module: %v", err)
	}
	for _, to := range []string{"", "nobody", "f.Nobody.n", "a.b..d", "f.b.n:"} {
		if _, err := send(context.Background(), p, to, "x"); codeOf(err) != router.CodeInvalidName {
			t.Errorf("%q: %v", to, err)
		}
	}
}

func TestDeadAddressIsUnavailable(t *testing.T) {
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	p := newPool(t, Options{})
	p.Register("mod-d", addr)
	_, err := send(context.Background(), p, "f.mod-d.n", "x")
	var e *router.Error
	if !errors.As(err, &e) || e.Code != router.CodeUnavailable || !e.Retryable {
		t.Fatalf("dead address: %v", err)
	}
}

// TestRoundRobinSkipsFailedReplica: once a replica's connection is in
// TRANSIENT_FAILURE (its process died), sends go to the READY replica
// instead of failing 1/N of the time until the registration expires.
func TestRoundRobinSkipsFailedReplica(t *testing.T) {
	a := startServer(t, nil)
	b := startServer(t, nil)
	p := newPool(t, Options{})
	p.AddInstance("mod", "a", a.addr)
	p.AddInstance("mod", "b", b.addr)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	testkit.WaitUntil(t, "both pre-warmed connections READY", func() bool {
		s := p.States()
		return s[a.addr] == connectivity.Ready && s[b.addr] == connectivity.Ready
	})
	for i := 0; i < 4; i++ {
		if _, err := send(ctx, p, "f.mod.n:in", "x"); err != nil {
			t.Fatal(err)
		}
	}
	if a.calls.Load() != 2 || b.calls.Load() != 2 {
		t.Fatalf("round-robin over two ready replicas: %d/%d", a.calls.Load(), b.calls.Load())
	}
	b.stop()
	testkit.WaitUntil(t, "the dead replica's connection in TRANSIENT_FAILURE", func() bool {
		return p.States()[b.addr] == connectivity.TransientFailure
	})
	before := a.calls.Load()
	for i := 0; i < 20; i++ {
		if _, err := send(ctx, p, "f.mod.n:in", "x"); err != nil {
			t.Fatalf("send %d with one replica down: %v", i, err)
		}
	}
	if n := a.calls.Load() - before; n != 20 {
		t.Fatalf("the ready replica got %d of 20 sends", n)
	}
	// With no READY replica left the send fails fast with unavailable.
	a.stop()
	testkit.WaitUntil(t, "both connections in TRANSIENT_FAILURE", func() bool {
		s := p.States()
		return s[a.addr] == connectivity.TransientFailure && s[b.addr] == connectivity.TransientFailure
	})
	if _, err := send(ctx, p, "f.mod.n:in", "x"); codeOf(err) != router.CodeUnavailable {
		t.Fatalf("all replicas down: %v", err)
	}
}

// TestNewRegistrationRetriesAFailedAddressAtOnce: a module that registers on
// an address whose connection waits out a reconnect backoff (a restarted
// module back on its old port, or another module on a port the kernel
// handed out again while a stale registration still holds it) is reached
// at once, not when the backoff ends. The backoff here is an hour, so the
// send can only succeed through the reset.
func TestNewRegistrationRetriesAFailedAddressAtOnce(t *testing.T) {
	old := startServer(t, nil)
	p := newPool(t, Options{DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
		Backoff:           backoff.Config{BaseDelay: time.Hour, Multiplier: 1, MaxDelay: time.Hour},
		MinConnectTimeout: 5 * time.Second,
	})}})
	p.AddInstance("mod-old", "1", old.addr)
	testkit.WaitUntil(t, "the connection READY", func() bool { return p.States()[old.addr] == connectivity.Ready })
	old.stop()
	testkit.WaitUntil(t, "the connection in TRANSIENT_FAILURE", func() bool {
		return p.States()[old.addr] == connectivity.TransientFailure
	})
	l, err := net.Listen("tcp", old.addr)
	if err != nil {
		t.Skipf("the old port is taken again: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = grpcwire.Serve(ctx, l, router.Echo, grpcwire.ServerOptions{Logger: quiet})
	}()
	t.Cleanup(func() { cancel(); <-done })
	p.AddInstance("mod-new", "2", old.addr)
	testkit.WaitUntil(t, "a send to the new module answered", func() bool {
		out, err := send(context.Background(), p, "f.mod-new.n:in", "x")
		return err == nil && out == "x"
	})
}
