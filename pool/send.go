package pool

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc/connectivity"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/grpcwire"
	"github.com/switchboard-io/switchboard/grpcwire/modulepb"
	"github.com/switchboard-io/switchboard/router"
)

// route is the send-side view of one module, immutable once published.
type route struct {
	targets []*conn  // dialable instances' connections, ordered by instance id
	sched   []uint32 // weighted round-robin cycle of indexes into targets
	zsched  []uint32 // the same over the targets of the pool's zone; nil when they are too few
	addrs   []*conn  // the distinct connections of targets
	others  []string // addresses that cannot be dialled (nats://…)
	next    atomic.Uint64
	znext   atomic.Uint64
}

// usable reports whether c may take a send now: not ejected, and READY or
// never dialled yet (a lazy pool: the send dials it).
func usable(c *conn) bool {
	if c.isEjected() {
		return false
	}
	cc := c.cc.Load()
	return cc == nil || cc.GetState() == connectivity.Ready
}

// pick chooses the target of a send: among the targets of the pool's zone
// when the route prefers it and one of them is usable, otherwise among
// all (see from).
func (rt *route) pick(least bool) *conn {
	if len(rt.targets) == 1 {
		return rt.targets[0]
	}
	if rt.zsched != nil {
		if c := rt.from(rt.zsched, &rt.znext, least, true); c != nil {
			return c
		}
	}
	return rt.from(rt.sched, &rt.next, least, false)
}

// from chooses a target of the cycle s: the next by weighted round robin
// (or, with least, the less busy of two drawn by weight; see pickLeast),
// skipping a connection that is not usable (ejected, or dialled but not
// READY: a crashed replica, or reconnecting) while another target is, so a
// dead replica does not take its share of the sends until its registration
// expires. The skip walks on along the cycle, so the others keep their
// relative weights. With no usable target it returns nil when strict,
// otherwise the first one that is not ejected, else the scheduled choice,
// whose call then fails fast or waits for the connection as grpc-go
// decides.
func (rt *route) from(s []uint32, next *atomic.Uint64, least, strict bool) *conn {
	if least {
		if c := rt.pickLeast(s); c != nil {
			return c
		}
	}
	n := uint64(len(s))
	i := next.Add(1) - 1
	c := rt.targets[s[i%n]]
	if usable(c) {
		return c
	}
	var fallback *conn
	if !c.isEjected() {
		fallback = c
	}
	for j := uint64(1); j < n; j++ {
		o := rt.targets[s[(i+j)%n]]
		if o == c {
			continue
		}
		if usable(o) {
			return o
		}
		if fallback == nil && !o.isEjected() {
			fallback = o
		}
	}
	switch {
	case strict:
		return nil
	case fallback != nil:
		return fallback
	}
	return c
}

// pickLeast is the power of two choices: two targets drawn at random in
// proportion to their weights (two slots of the cycle s), and the usable
// one with fewer calls in flight (the first on a tie, so that idle targets
// share the sends by weight); nil when neither is usable.
func (rt *route) pickLeast(s []uint32) *conn {
	n := uint64(len(s))
	ca, cb := rt.targets[s[rand.Uint64N(n)]], rt.targets[s[rand.Uint64N(n)]]
	switch ua, ub := usable(ca), usable(cb); {
	case ua && ub:
		if cb.inFlight() < ca.inFlight() {
			return cb
		}
		return ca
	case ua:
		return ca
	case ub:
		return cb
	}
	return nil
}

// Send delivers msg to a live instance of its destination module, chosen
// by weight (usable connections preferred; see pick), over the shared
// connection of the instance's address, within CallTimeout when ctx has no
// deadline. It implements router.Wire. Failures are *router.Error:
// CodeModuleUnknown when the module has no address (retryable),
// CodeNotDialable when it has only nats:// addresses, CodeUnavailable when
// the connection fails (retryable too when the instance left and did not
// answer within Options.DrainTimeout), grpcwire.CodeTLS when the two sides'
// transport security does not match (permanent), or the remote side's
// error as it sent it — also when the instance leaves or moves as it
// answers. A send that finds its connection closed (the module moved or
// left) takes the module's new route.
func (p *Pool) Send(ctx context.Context, msg *router.Message) ([]byte, error) {
	if msg == nil {
		return nil, router.NoMessage()
	}
	nn, err := router.ParseTo(msg.To)
	if err != nil {
		return nil, err
	}
	for try := 0; ; try++ {
		rt := (*p.routes.Load())[nn.Module]
		if rt == nil {
			if p.ctx.Err() != nil {
				return nil, router.Permanent(router.CodeUnavailable, "address pool is closed")
			}
			return nil, router.Transient(router.CodeModuleUnknown, fmt.Sprintf("module %q address is unknown (not discovered yet, or gone)", nn.Module))
		}
		if len(rt.targets) == 0 {
			return nil, router.Permanent(router.CodeNotDialable, fmt.Sprintf("module %q is known only at %s", nn.Module, undialable(rt.others)))
		}
		c := rt.pick(p.least)
		if testHookPicked != nil {
			testHookPicked()
		}
		if !c.use() {
			// The module moved or left since rt was read; its new route
			// was published before c was closed.
			if try < maxTries {
				continue
			}
			return nil, router.Transient(router.CodeUnavailable, fmt.Sprintf("module %q moved %d times during the send", nn.Module, try+1))
		}
		out, closed, err := p.sendOn(ctx, c, msg, nn.Module)
		if closed && try < maxTries {
			continue // the module moved before the connection was dialled
		}
		return out, err
	}
}

// maxTries bounds the retries of a send whose route changes under it.
const maxTries = 3

// testHookPicked, when set, runs in Send between the choice of a
// connection and its use (tests only).
var testHookPicked func()

// sendOn sends msg over c, taken by c.use. closed reports that c was closed
// before it could be dialled: the caller takes the new route.
func (p *Pool) sendOn(ctx context.Context, c *conn, msg *router.Message, module string) (out []byte, closed bool, err error) {
	defer c.done()
	client, err := p.client(c)
	if err != nil {
		return nil, c.isClosed(), err
	}
	out, lost, err := p.call(ctx, client, msg)
	if !lost {
		// A status the remote side sent is its answer, as it sent it,
		// however the connection fares afterwards; a message that never
		// left (a field the wire cannot carry) keeps its permanent error.
		if e := router.AsError(err); e == nil || (e.Code != router.CodeDeadlineExceeded && e.Code != router.CodeCanceled) {
			c.answered()
		}
		return out, false, err
	}
	if e := router.AsError(err); e != nil && e.Code == router.CodeUnavailable {
		if ctx.Err() == nil && !c.isClosed() {
			p.transportFailed(c)
		}
		if herr, final := c.hs.Load().Err(); herr != nil {
			// grpc-go reports a failed security handshake as Unavailable,
			// like a peer that is down; it is not: no retry will help.
			if final {
				return nil, false, router.Permanent(grpcwire.CodeTLS, herr.Error())
			}
			return nil, false, router.Transient(router.CodeUnavailable, e.Message+"; "+herr.Error())
		}
	}
	if c.isClosed() && ctx.Err() == nil {
		// The transport failed under the call on a connection that was
		// closed meanwhile: the instance left and the drain timeout cut
		// the call, or the pool closed.
		if c.expired.Load() {
			return nil, false, router.Transient(router.CodeUnavailable, fmt.Sprintf(
				"instance of %q at %s left the catalog and did not answer within the drain timeout (%s): %v", module, c.addr, p.drainFor, err))
		}
		why := fmt.Sprintf("instance of %q left", module)
		if p.ctx.Err() != nil {
			why = "address pool closed"
		}
		return nil, false, router.Transient(router.CodeUnavailable, fmt.Sprintf("connection to %s closed during the call (%s): %v", c.addr, why, err))
	}
	return nil, false, err
}

// undialable describes addresses the gRPC wire does not dial: NATS
// subjects, and invalid addresses with what is wrong with them.
func undialable(addrs []string) string {
	parts := make([]string, len(addrs))
	for i, a := range addrs {
		if err := switchboard.ValidateAddress(a); err != nil {
			parts[i] = "an invalid " + err.Error()
		} else {
			parts[i] = strconv.Quote(a) + ", which the gRPC wire does not dial"
		}
	}
	return strings.Join(parts, "; ")
}

// call is one gRPC call, bounded by the pool's CallTimeout when ctx has no
// deadline of its own; lost is grpcwire.CallLost's.
func (p *Pool) call(ctx context.Context, client modulepb.ModuleServiceClient, msg *router.Message) (out []byte, lost bool, err error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.timeout)
		defer cancel()
	}
	if !p.otel {
		ctx = grpcwire.PropagateTrace(ctx, p.prop)
	}
	return grpcwire.CallLost(ctx, client, msg)
}
