package pool

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/switchboard-io/switchboard/internal/testkit"
	"github.com/switchboard-io/switchboard/router"
)

// stuckCloser is a dialer whose connections' Close blocks until release is
// closed, which makes grpc-go's ClientConn.Close block with it.
type stuckCloser struct {
	entered chan struct{} // closed when a Close is first blocked
	release chan struct{}
	once    sync.Once
	relOnce sync.Once
}

func newStuckCloser(t *testing.T) *stuckCloser {
	s := &stuckCloser{entered: make(chan struct{}), release: make(chan struct{})}
	t.Cleanup(s.open)
	return s
}

func (s *stuckCloser) open() { s.relOnce.Do(func() { close(s.release) }) }

func (s *stuckCloser) dialOption() grpc.DialOption {
	return grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		return &stuckConn{Conn: c, s: s}, nil
	})
}

type stuckConn struct {
	net.Conn
	s *stuckCloser
}

func (c *stuckConn) Close() error {
	c.s.once.Do(func() { close(c.s.entered) })
	<-c.s.release
	return c.Conn.Close()
}

// TestLastDrainedCallDoesNotWaitForTheClose: the last call to end on a
// connection whose module left gets its reply without waiting for the
// connection's shutdown (before, it ran ClientConn.Close on the caller's
// path); Close still waits for that shutdown, so no goroutine outlives it;
// until the connection is shut down ConnectionList shows it, draining.
func TestLastDrainedCallDoesNotWaitForTheClose(t *testing.T) {
	g := newGate(t)
	s := startServer(t, func(ctx context.Context, m *router.Message) ([]byte, error) { g.wait(ctx); return []byte("done"), nil })
	stuck := newStuckCloser(t)
	p := New(Options{Logger: quiet, DialOptions: []grpc.DialOption{stuck.dialOption()}})
	t.Cleanup(func() { stuck.open(); p.Close() })
	p.Register("mod", s.addr)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	res := sendAsync(ctx, p, "f.mod.n:in", "")
	g.awaitCall(t)
	p.Deregister("mod")
	if got, want := p.ConnectionList(), []Connection{{Addr: s.addr, Draining: true, Calls: 1}}; !slices.Equal(got, want) {
		t.Fatalf("ConnectionList during the drain = %+v, want %+v", got, want)
	}
	g.open()
	select {
	case r := <-res:
		if r.err != nil || string(r.out) != "done" {
			t.Fatalf("send = %q, %v; want the handler's answer", r.out, r.err)
		}
	case <-time.After(waitFor):
		t.Fatal("the last call of the drain got no reply while the connection's close was blocked: it waits for ClientConn.Close")
	}
	select {
	case <-stuck.entered:
	case <-time.After(waitFor):
		t.Fatal("the drained connection was never closed")
	}
	if got, want := p.ConnectionList(), []Connection{{Addr: s.addr, Draining: true}}; !slices.Equal(got, want) {
		t.Fatalf("ConnectionList while the drained connection closes = %+v, want %+v", got, want)
	}

	self := goroutineID()
	closed := make(chan struct{})
	go func() {
		p.Close()
		close(closed)
	}()
	testkit.WaitUntil(t, "Close waiting for the pool's goroutines", func() bool {
		select {
		case <-closed:
			t.Fatal("Close returned while the drained connection was still closing")
		default:
		}
		return closeIsWaiting()
	})
	stuck.open()
	select {
	case <-closed:
	case <-time.After(waitFor):
		t.Fatal("Close did not return once the drained connection closed")
	}
	if gs := goroutinesIn("pool.(*Pool).drainConn", self); len(gs) > 0 {
		t.Fatalf("drain goroutine still running after Close:\n%s", gs[0])
	}
	testkit.WaitUntil(t, "the old connection closed at the server", func() bool { return s.lis.Open.Load() == 0 })
	if c := p.ConnectionList(); len(c) != 0 {
		t.Fatalf("ConnectionList after Close = %+v", c)
	}
}

// TestDrainTimeoutCutsAHungCall: a call in flight to an instance that left
// the catalog and hangs (its handler never answers, the call has no
// deadline of its own) ends after the drain timeout with a retryable
// "unavailable" saying so, and the connection is closed; before, it ran to
// its own deadline, holding the connection open.
func TestDrainTimeoutCutsAHungCall(t *testing.T) {
	g := newGate(t) // never opened before the test ends
	s := startServer(t, func(ctx context.Context, m *router.Message) ([]byte, error) { g.wait(ctx); return nil, nil })
	p := newPool(t, Options{DrainTimeout: 50 * time.Millisecond})
	p.Register("mod", s.addr)
	res := sendAsync(context.Background(), p, "f.mod.n:in", "")
	g.awaitCall(t)
	p.Deregister("mod")
	var err error
	select {
	case r := <-res:
		err = r.err
	case <-time.After(waitFor):
		t.Fatal("the call to the hung instance that left did not end with the drain timeout")
	}
	var e *router.Error
	if !errors.As(err, &e) || e.Code != router.CodeUnavailable || !e.Retryable ||
		!strings.Contains(e.Message, "left the catalog and did not answer within the drain timeout") || !strings.Contains(e.Message, s.addr) {
		t.Fatalf("send error = %#v (%v); want a retryable unavailable naming the address and the drain timeout", e, err)
	}
	testkit.WaitUntil(t, "the drained connection closed", func() bool {
		return s.lis.Open.Load() == 0 && len(p.ConnectionList()) == 0
	})
}

// TestDrainTimeoutOption: zero and negative mean the pool's call timeout,
// so that by default no call is cut sooner than one without a deadline.
func TestDrainTimeoutOption(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		if got := New(Options{Logger: quiet, DrainTimeout: d}).drainFor; got != DefaultCallTimeout {
			t.Errorf("DrainTimeout %v: drains for %v, want the default call timeout %v", d, got, DefaultCallTimeout)
		}
		if got := New(Options{Logger: quiet, DrainTimeout: d, CallTimeout: time.Minute}).drainFor; got != time.Minute {
			t.Errorf("DrainTimeout %v, CallTimeout 1m: drains for %v, want 1m", d, got)
		}
	}
	if got := New(Options{Logger: quiet, DrainTimeout: time.Second}).drainFor; got != time.Second {
		t.Errorf("DrainTimeout 1s: drains for %v", got)
	}
}

// TestConnectionListLiveAndDrainingOnOneAddress: a module back on an
// address while calls to its old instance there drain has a new
// connection; ConnectionList shows both, the live one first.
func TestConnectionListLiveAndDrainingOnOneAddress(t *testing.T) {
	g := newGate(t)
	s := startServer(t, func(ctx context.Context, m *router.Message) ([]byte, error) { g.wait(ctx); return nil, nil })
	p := newPool(t, Options{})
	p.Register("mod", s.addr)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	sendAsync(ctx, p, "f.mod.n:in", "")
	g.awaitCall(t)
	p.Deregister("mod")
	p.Register("mod", s.addr)
	want := []Connection{{Addr: s.addr}, {Addr: s.addr, Draining: true, Calls: 1}}
	if got := p.ConnectionList(); !slices.Equal(got, want) {
		t.Fatalf("ConnectionList = %+v, want %+v", got, want)
	}
	g.open()
	testkit.WaitUntil(t, "the drained connection forgotten", func() bool { return len(p.ConnectionList()) == 1 })
}
