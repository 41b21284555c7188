package pool

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/switchboard-io/switchboard/grpcwire/modulepb"
	"github.com/switchboard-io/switchboard/internal/testkit"
	"github.com/switchboard-io/switchboard/router"
)

// gate holds calls until released and says when one has arrived.
type gate struct {
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func newGate(t *testing.T) *gate {
	g := &gate{entered: make(chan struct{}, 100), release: make(chan struct{})}
	t.Cleanup(g.open)
	return g
}

func (g *gate) open() { g.once.Do(func() { close(g.release) }) }

// wait is called by the handler: it returns when the gate opens, or when
// the server stops the call.
func (g *gate) wait(ctx context.Context) {
	g.entered <- struct{}{}
	select {
	case <-g.release:
	case <-ctx.Done():
	}
}

func (g *gate) awaitCall(t *testing.T) {
	t.Helper()
	select {
	case <-g.entered:
	case <-time.After(waitFor):
		t.Fatal("the call never reached the handler")
	}
}

// gatedRawService answers like a foreign (non-Switchboard) module once its
// gate opens: a plain Go error (status Unknown) or an in-band error.
type gatedRawService struct {
	modulepb.UnimplementedModuleServiceServer
	g     *gate
	inBnd bool
}

func (s *gatedRawService) Message(ctx context.Context, req *modulepb.MessageRequest) (*modulepb.MessageResponse, error) {
	s.g.wait(ctx)
	if s.inBnd {
		return &modulepb.MessageResponse{HasError: true, Error: "handler failed in-band"}, nil
	}
	return nil, errors.New("component: invalid settings")
}

func startGatedRaw(t *testing.T, s *gatedRawService) (string, *testkit.CountingListener) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lis := &testkit.CountingListener{Listener: l}
	gs := grpc.NewServer()
	modulepb.RegisterModuleServiceServer(gs, s)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	return l.Addr().String(), lis
}

// TestAnswerKeptWhenTheModuleLeavesDuringTheCall: a module that leaves (or
// moves) while a call to it is in flight does not turn the answer that
// then arrives into an error: the old connection is closed only once the
// call is over, and a remote error stays what the remote side sent —
// before, a permanent answer (invalid_argument, a foreign remote_error, a
// permanent unavailable) became a retryable "unavailable" whenever the
// connection was closed at that moment, and closing the connection failed
// the call outright.
func TestAnswerKeptWhenTheModuleLeavesDuringTheCall(t *testing.T) {
	type want struct {
		out, code string
		retryable bool
	}
	cases := []struct {
		name  string
		start func(t *testing.T, g *gate) (string, *testkit.CountingListener)
		want  want
	}{
		{"success", func(t *testing.T, g *gate) (string, *testkit.CountingListener) {
			s := startServer(t, func(ctx context.Context, m *router.Message) ([]byte, error) { g.wait(ctx); return []byte("done"), nil })
			return s.addr, s.lis
		}, want{out: "done"}},
		{"permanent invalid_argument", func(t *testing.T, g *gate) (string, *testkit.CountingListener) {
			s := startServer(t, func(ctx context.Context, m *router.Message) ([]byte, error) {
				g.wait(ctx)
				return nil, router.Permanent("invalid_argument", "bad settings")
			})
			return s.addr, s.lis
		}, want{code: "invalid_argument"}},
		{"permanent unavailable sent by the handler", func(t *testing.T, g *gate) (string, *testkit.CountingListener) {
			s := startServer(t, func(ctx context.Context, m *router.Message) ([]byte, error) {
				g.wait(ctx)
				return nil, router.Permanent(router.CodeUnavailable, "the printer is gone for good")
			})
			return s.addr, s.lis
		}, want{code: router.CodeUnavailable}},
		{"retryable error sent by the handler", func(t *testing.T, g *gate) (string, *testkit.CountingListener) {
			s := startServer(t, func(ctx context.Context, m *router.Message) ([]byte, error) {
				g.wait(ctx)
				return nil, router.Transient("busy", "try later")
			})
			return s.addr, s.lis
		}, want{code: "busy", retryable: true}},
		{"foreign status", func(t *testing.T, g *gate) (string, *testkit.CountingListener) {
			return startGatedRaw(t, &gatedRawService{g: g})
		}, want{code: router.CodeRemoteError}},
		{"foreign in-band error", func(t *testing.T, g *gate) (string, *testkit.CountingListener) {
			return startGatedRaw(t, &gatedRawService{g: g, inBnd: true})
		}, want{code: router.CodeRemoteError}},
	}
	for _, tc := range cases {
		for _, how := range []string{"deregistered", "moved"} {
			t.Run(tc.name+"/"+how, func(t *testing.T) {
				g := newGate(t)
				addr, lis := tc.start(t, g)
				p := newPool(t, Options{})
				p.Register("mod", addr)
				ctx, cancel := context.WithTimeout(context.Background(), waitFor)
				defer cancel()
				res := sendAsync(ctx, p, "f.mod.n:in", "x")
				g.awaitCall(t)
				if how == "moved" {
					p.Register("mod", startServer(t, nil).addr)
				} else {
					p.Deregister("mod")
				}
				for _, a := range p.Connections() {
					if a == addr {
						t.Fatalf("the old address still has a connection entry: %v", p.Connections())
					}
				}
				if !slices.Contains(p.ConnectionList(), Connection{Addr: addr, Draining: true, Calls: 1}) {
					t.Fatalf("ConnectionList = %+v; want %s draining, one call on it", p.ConnectionList(), addr)
				}
				if n := lis.Open.Load(); n != 1 {
					t.Fatalf("%d connections open at the old address during the call, want 1 (kept until the call ends)", n)
				}
				g.open()
				r := <-res
				if tc.want.code == "" {
					if r.err != nil || string(r.out) != tc.want.out {
						t.Fatalf("send = %q, %v; want %q", r.out, r.err, tc.want.out)
					}
				} else {
					var e *router.Error
					if !errors.As(r.err, &e) || e.Code != tc.want.code || e.Retryable != tc.want.retryable {
						t.Fatalf("send error = %#v (%v); want code %q retryable %v, as the remote side sent it", e, r.err, tc.want.code, tc.want.retryable)
					}
				}
				testkit.WaitUntil(t, "the old connection closed once its call ended, and forgotten", func() bool {
					return lis.Open.Load() == 0 && !slices.ContainsFunc(p.ConnectionList(), func(c Connection) bool { return c.Draining })
				})
			})
		}
	}
}

// TestSendPickingAConnectionAsItsModuleMoves: a send that chose the old
// connection of a module that moves before the call starts takes the new
// route instead of failing on the closed connection.
func TestSendPickingAConnectionAsItsModuleMoves(t *testing.T) {
	s1, s2 := startServer(t, nil), startServer(t, nil)
	p := newPool(t, Options{})
	p.Register("mod", s1.addr)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if _, err := send(ctx, p, "f.mod.n:in", "warm"); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	testHookPicked = func() { once.Do(func() { p.Register("mod", s2.addr) }) }
	t.Cleanup(func() { testHookPicked = nil })
	if out, err := send(ctx, p, "f.mod.n:in", "x"); err != nil || out != "x" {
		t.Fatalf("send while the module moved = %q, %v", out, err)
	}
	if s1.calls.Load() != 1 || s2.calls.Load() != 1 {
		t.Fatalf("calls: old address %d (want 1: the warm-up), new %d (want 1)", s1.calls.Load(), s2.calls.Load())
	}
}

// onLog is a slog handler that runs fn, once, in the goroutine logging the
// first record with message msg.
type onLog struct {
	msg  string
	fn   func()
	once *sync.Once
}

func (h onLog) Enabled(context.Context, slog.Level) bool { return true }
func (h onLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h onLog) WithGroup(string) slog.Handler            { return h }
func (h onLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.once.Do(h.fn)
	}
	return nil
}

// TestSendAsTheOldConnectionClosesTakesTheNewRoute: the new route of a
// module that moves is published before its old connection is closed, so
// a send made as that connection closes (here: from the log line the pool
// writes then) reaches the new address. Before, the connection was closed
// first and such a send failed with "unavailable".
func TestSendAsTheOldConnectionClosesTakesTheNewRoute(t *testing.T) {
	s1, s2 := startServer(t, nil), startServer(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	var p *Pool
	var out string
	var err error
	ran := false
	p = newPool(t, Options{Logger: slog.New(onLog{msg: "address pool: closing connection", once: new(sync.Once), fn: func() {
		ran = true
		out, err = send(ctx, p, "f.mod.n:in", "x")
	}})})
	// The new address is in use already (connection made), so the send
	// made while the pool's lock is held needs nothing that takes it.
	p.Register("other", s2.addr)
	p.Register("mod", s1.addr)
	for _, to := range []string{"f.other.n:in", "f.mod.n:in"} {
		if _, err := send(ctx, p, to, "warm"); err != nil {
			t.Fatal(err)
		}
	}
	p.Register("mod", s2.addr)
	if !ran {
		t.Fatal("the pool did not log closing the old connection")
	}
	if err != nil || out != "x" {
		t.Fatalf("send as the old connection closed = %q, %v; want it to take the new route", out, err)
	}
	if s1.calls.Load() != 1 || s2.calls.Load() != 2 {
		t.Fatalf("calls: old address %d (want 1), new %d (want 2)", s1.calls.Load(), s2.calls.Load())
	}
}

// TestMovesUnderLoadLoseNoSend: a module moved back and forth between two
// live servers while sends stream to it loses none of them.
func TestMovesUnderLoadLoseNoSend(t *testing.T) {
	slow := func(ctx context.Context, m *router.Message) ([]byte, error) {
		time.Sleep(time.Millisecond) // keep calls in flight across the moves
		return m.Payload, nil
	}
	s1, s2 := startServer(t, slow), startServer(t, slow)
	p := newPool(t, Options{})
	p.Register("mod", s1.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitFor)
	defer cancel()
	stop := make(chan struct{})
	var ok, failed atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if out, err := send(ctx, p, "f.mod.n:in", "x"); err != nil || out != "x" {
					if failed.Add(1) <= 5 {
						t.Errorf("send during moves: %q, %v", out, err)
					}
				} else {
					ok.Add(1)
				}
			}
		}()
	}
	addrs := [2]string{s1.addr, s2.addr}
	for i := 1; i <= 100 && ctx.Err() == nil; i++ {
		p.Register("mod", addrs[i%2])
		// Let some sends through on each route.
		for n := ok.Load(); ok.Load() < n+4 && ctx.Err() == nil && failed.Load() == 0; {
			time.Sleep(100 * time.Microsecond)
		}
	}
	close(stop)
	wg.Wait()
	if f := failed.Load(); f != 0 {
		t.Fatalf("%d of %d sends failed while the module moved", f, f+ok.Load())
	}
	if ctx.Err() != nil {
		t.Fatal("sends did not progress")
	}
}

// TestCloseShutsDrainingConnections: Close does not leave behind a
// connection kept open for a call in flight after its module left.
func TestCloseShutsDrainingConnections(t *testing.T) {
	g := newGate(t)
	s := startServer(t, func(ctx context.Context, m *router.Message) ([]byte, error) { g.wait(ctx); return nil, nil })
	p := New(Options{Logger: quiet})
	p.Register("mod", s.addr)
	res := sendAsync(context.Background(), p, "f.mod.n:in", "")
	g.awaitCall(t)
	p.Deregister("mod")
	p.Close()
	testkit.WaitUntil(t, "the draining connection closed by Close", func() bool { return s.lis.Open.Load() == 0 })
	select {
	case r := <-res:
		if r.err == nil {
			t.Fatal("a call cut by Close succeeded")
		}
	case <-time.After(waitFor):
		t.Fatal("the call in flight did not end with Close")
	}
	g.open()
}

// TestUnsentMessageStaysInvalidAsItsModuleLeaves: a message the wire
// cannot carry (a field that is not valid UTF-8) fails with the permanent
// invalid_argument that grpcwire gives it also when its module leaves
// during the send: it never left, so no transport failed under it, and it
// must not become the retryable "connection closed during the call" of a
// call that did (grpcwire.CallLost does not count it as lost).
func TestUnsentMessageStaysInvalidAsItsModuleLeaves(t *testing.T) {
	s := startServer(t, nil)
	var p *Pool
	// The module leaves as the call starts, its connection taken: closed
	// for new sends, and drained for this one.
	leave := grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		p.Deregister("mod")
		return invoke(ctx, method, req, reply, cc, opts...)
	})
	p = newPool(t, Options{DialOptions: []grpc.DialOption{leave}})
	p.Register("mod", s.addr)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	_, err := p.Send(ctx, &router.Message{To: "f.mod.n:in", From: "f.a.\xff:out"})
	var e *router.Error
	if !errors.As(err, &e) || e.Code != router.CodeInvalidArgument || e.Retryable {
		t.Fatalf("send = %v; want the permanent %s of a message that never left", err, router.CodeInvalidArgument)
	}
	if p.Modules()["mod"] != nil {
		t.Fatal("the module did not leave during the send")
	}
	if n := s.calls.Load(); n != 0 {
		t.Fatalf("the server handled %d calls; the message should never have left", n)
	}
}
