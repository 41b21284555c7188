package pool

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"

	"github.com/switchboard-io/switchboard/grpcwire"
	"github.com/switchboard-io/switchboard/grpcwire/modulepb"
	"github.com/switchboard-io/switchboard/router"
)

// conn is one address's connection, created on first use.
//
// A connection no module uses any more is closed in two steps: close marks
// it closed, so no new send takes it (the send takes the route published
// before the close instead), and the *grpc.ClientConn is shut down once the
// sends already on it have their answers. grpc-go's ClientConn.Close is not
// graceful (it fails the calls in flight), so the pool drains them itself:
// the last send to end closes idle, and the pool's drain goroutine
// (Pool.drainConn) shuts the connection down, off that send's path. A call
// to a peer that is gone ends on its own (keepalive, deadline), but one to
// a peer that hangs may not: after the drain timeout the drain goroutine
// shuts the connection down all the same, and marks it expired so that the
// calls it cuts say why. Pool.Close shuts every connection at once,
// draining or not.
type conn struct {
	addr   string
	module string // the module that first registered the address (for logs)

	cc     atomic.Pointer[grpc.ClientConn]
	client atomic.Pointer[modulepb.ModuleServiceClient]
	hs     atomic.Pointer[grpcwire.HandshakeWatch] // set with cc

	// users counts the sends on the connection; closedBit is set in it
	// when the connection is closed, and the send that brings the count
	// of a closed connection to zero closes idle.
	users    atomic.Int64
	idle     chan struct{} // closed when no send is left on the closed connection
	idleOnce sync.Once
	expired  atomic.Bool // shut down by the drain timeout with sends still on it
	shut     sync.Once
	mu       sync.Mutex // serialises dial and close: closedBit is set under it

	// Outlier ejection (eject.go): consecutive transport failures, and
	// whether and until when (unix ns) the address is ejected. ejections
	// and lastUntil are written under Pool.ejectMu.
	log       *slog.Logger
	fails     atomic.Int32
	ejected   atomic.Bool
	until     atomic.Int64
	ejections int
	lastUntil int64
}

func newConn(addr, module string, log *slog.Logger) *conn {
	return &conn{addr: addr, module: module, log: log, idle: make(chan struct{})}
}

const closedBit = 1 << 62

// isClosed reports whether the connection was closed (no new dial, no new
// send).
func (c *conn) isClosed() bool { return c.users.Load()&closedBit != 0 }

// use takes the connection for one send; false when it is closed (its
// module moved or left). A true use is ended with done.
func (c *conn) use() bool {
	if c.users.Add(1)&closedBit != 0 {
		c.done()
		return false
	}
	return true
}

// done ends one use; the last use of a closed connection closes idle (it
// does not wait for the shutdown: Pool.drainConn does it).
func (c *conn) done() {
	if c.users.Add(-1) == closedBit {
		// Also reached by a send that merely found the connection closed,
		// possibly one closed with nothing to drain: idle is then closed
		// with no drain goroutine waiting on it, which is harmless.
		c.idleOnce.Do(func() { close(c.idle) })
	}
}

// inFlight is the number of sends on the connection.
func (c *conn) inFlight() int64 {
	return c.users.Load() &^ closedBit
}

// close stops new sends from taking the connection and shuts it down now
// when none is in flight; it reports whether sends are still draining (the
// last of them closes idle; the caller starts Pool.drainConn).
func (c *conn) close() (draining bool) {
	c.mu.Lock()
	old := c.users.Or(closedBit)
	c.mu.Unlock()
	if old&^closedBit == 0 {
		c.shutdown()
		return false
	}
	return true
}

// closeNow closes the connection at once, failing the calls in flight
// (the pool is closing).
func (c *conn) closeNow() {
	c.close()
	c.shutdown()
}

func (c *conn) shutdown() {
	c.shut.Do(func() {
		// Under mu: a dial either stored its cc before, or sees closed.
		c.mu.Lock()
		cc := c.cc.Load()
		c.mu.Unlock()
		if cc != nil {
			_ = cc.Close()
		}
	})
}

// retryNow makes a connection in TRANSIENT_FAILURE reconnect at once.
func (c *conn) retryNow() {
	if cc := c.cc.Load(); cc != nil && cc.GetState() == connectivity.TransientFailure {
		cc.ResetConnectBackoff()
	}
}

// client returns the connection's client, creating the *grpc.ClientConn
// once (single-flight under c.mu) and connecting it at once.
func (p *Pool) client(c *conn) (modulepb.ModuleServiceClient, error) {
	if cl := c.client.Load(); cl != nil {
		return *cl, nil
	}
	cl, cc, err := p.dial(c)
	if cc != nil {
		// Started outside c.mu: p.mu is taken before c.mu elsewhere. On a
		// closed pool no watch is started; Close closes cc (cc was stored
		// in c before c.close ran, or closedBit would have stopped dial).
		p.mu.Lock()
		p.goLocked(func() { p.watch(c, cc) })
		p.mu.Unlock()
	}
	return cl, err
}

// dial is client's slow path under c.mu; cc is non-nil when it created the
// connection.
func (p *Pool) dial(c *conn) (modulepb.ModuleServiceClient, *grpc.ClientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl := c.client.Load(); cl != nil {
		return *cl, nil, nil
	}
	if c.isClosed() {
		return nil, nil, router.Transient(router.CodeUnavailable, fmt.Sprintf("connection to %s is closed (module moved or left)", c.addr))
	}
	creds, hs := grpcwire.WatchHandshakes(p.creds)
	cc, err := grpc.NewClient(dialTarget(c.addr), p.dialOptions(grpc.WithTransportCredentials(creds))...)
	if err != nil {
		p.log.Warn("grpc client: connection failed", "addr", c.addr, "err", err)
		return nil, nil, router.Permanent(router.CodeNotDialable, fmt.Sprintf("cannot create a client for %s: %v", c.addr, err))
	}
	cc.Connect()
	cl := modulepb.NewModuleServiceClient(cc)
	c.hs.Store(hs)
	c.cc.Store(cc)
	c.client.Store(&cl)
	return cl, cc, nil
}

// dialOptions are the options of one connection with the pool's transport
// credentials creds. With Options.TLS they come last, so TLS wins over any
// credentials in Options.DialOptions; without it, plaintext comes before
// Options.DialOptions, so credentials set there are used (grpc-go keeps the
// last of several).
func (p *Pool) dialOptions(creds grpc.DialOption) []grpc.DialOption {
	opts := slices.Clip(p.dialOpts)
	if p.tls {
		opts = append(append(opts, p.userOpts...), creds)
	} else {
		opts = append(append(opts, creds), p.userOpts...)
	}
	return opts
}

// dialTarget is the gRPC target of a host:port address: always through the
// DNS resolver (grpc.NewClient's default), so a host that happens to be a
// resolver scheme ("unix:8080", "dns:53", "passthrough:9000") is not read as
// one, and with the '%' of an IPv6 zone escaped ("[fe80::1%eth0]:8080"),
// which the target's URL syntax would otherwise reject.
func dialTarget(addr string) string {
	return "dns:///" + strings.ReplaceAll(addr, "%", "%25")
}

// prewarm creates the connection in the background so the first message
// does not pay the dial.
func (p *Pool) prewarm(c *conn) {
	_, _ = p.client(c)
}

// watch logs the connection's life: pre-warmed when it first becomes ready,
// failed on every transition to TRANSIENT_FAILURE; it reconnects an idle
// connection at once. It ends when the
// connection is closed.
func (p *Pool) watch(c *conn, cc *grpc.ClientConn) {
	ready := false
	for {
		s := cc.GetState()
		switch s {
		case connectivity.Ready:
			if !ready {
				ready = true
				p.log.Info("address pool: connection pre-warmed", "module", c.module, "addr", c.addr)
			}
		case connectivity.Idle:
			// The connection went idle (the peer closed it or restarted):
			// reconnect now, so a dead peer shows as TRANSIENT_FAILURE and is
			// skipped, and a live one is ready before the next send.
			cc.Connect()
		case connectivity.TransientFailure:
			p.log.Warn("grpc client: connection failed", "addr", c.addr, "module", c.module)
			p.transportFailed(c)
		case connectivity.Shutdown:
			return
		}
		if !cc.WaitForStateChange(p.ctx, s) {
			return // pool closed; Close closes cc
		}
	}
}
