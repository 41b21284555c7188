package pool

import (
	"context"
	"fmt"
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
	others  []string // addresses that cannot be dialled (nats://…)
	next    atomic.Uint64
}

// pick chooses the next target round-robin, skipping a connection that is
// dialled but not READY (transient failure: a crashed replica, or
// reconnecting) while another target is READY, so a dead replica does not
// take 1/N of the sends until its registration expires. With no READY
// target it returns the round-robin choice, whose call then fails fast or
// waits for the connection as grpc-go decides. A target never dialled yet
// (a lazy pool) is taken as chosen, so the send dials it.
func (rt *route) pick() *conn {
	n := uint64(len(rt.targets))
	i := rt.next.Add(1) - 1
	c := rt.targets[i%n]
	if n == 1 {
		return c
	}
	cc := c.cc.Load()
	if cc == nil || cc.GetState() == connectivity.Ready {
		return c
	}
	for j := uint64(1); j < n; j++ {
		o := rt.targets[(i+j)%n]
		if occ := o.cc.Load(); occ != nil && occ.GetState() == connectivity.Ready {
			return o
		}
	}
	return c
}

// Send delivers msg to a live instance of its destination module, chosen
// round-robin (READY connections preferred; see pick), over the shared
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
		c := rt.pick()
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
		return out, false, err
	}
	if e := router.AsError(err); e != nil && e.Code == router.CodeUnavailable {
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
