// Package router routes messages between module nodes by name.
//
// A destination is a full node name, "<flow>.<module>.<node>:<port>" (the
// node may contain dots). A message to a node of the router's own module is
// dispatched to a local Handler; a message to another module goes out
// through a Wire — the gRPC address pool (package pool), the NATS wire
// (package natswire), or Select choosing between them per target — with the
// same semantics either way. Every failure that crosses a wire is an *Error
// with a code and a retryable flag, so an edge's RetryPolicy can act on it;
// nothing retries unless the policy asks for it. The hop depth travels with
// every message and a message deeper than MaxDepth is refused (loop
// protection).
//
// # Trace context
//
// Every attempt of a send is a "switchboard.send" span and every delivery a
// "switchboard.handle" span (OpenTelemetry; attributes AttrNode, AttrModule,
// AttrAttempt, AttrErrorCode, …), children of the span in the caller's
// context, so a message crossing several modules is one trace. The router
// writes the W3C trace context (TraceParentKey "traceparent",
// TraceStateKey "tracestate") into a copy of Message.Metadata of every
// message it hands to a wire, replacing whatever an earlier hop left under
// the propagator's keys (a tracestate the new span does not have is
// dropped, not kept next to the new traceparent), and Dispatch continues
// the trace from the context when the wire put a span there (grpcwire's
// otelgrpc handler does) or else from those Metadata keys. A wire therefore
// must carry Metadata both ways, with "traceparent" and "tracestate" as
// headers of that very name (what the TinySystems SDK reads and writes on
// NATS); a wire with its own instrumentation may carry them its own way
// too. With no tracer provider set the spans are no-ops and nothing is
// copied or injected.
//
// The package is transport-neutral: it imports no gRPC or NATS code.
package router

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-io/switchboard"
)

// MaxDepth is the deepest hop count a message may have; deeper messages are
// refused with a permanent CodeDepthExceeded error.
const MaxDepth = 256

// DepthHeader is the metadata key (gRPC) and header (NATS) that carries the
// hop depth between processes.
const DepthHeader = "x-message-depth"

// ParseDepth reads a DepthHeader value as a wire received it: a decimal
// from 0 upward. A malformed value is a permanent invalid_argument error
// that quotes it.
func ParseDepth(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, Permanent(CodeInvalidArgument, "malformed "+DepthHeader+" "+strconv.Quote(s))
	}
	return n, nil
}

// Message is one message between nodes.
type Message struct {
	// ID identifies the message; the router fills it in when empty.
	ID string
	// From is the sender's full node name (informational).
	From string
	// To is the destination: "<flow>.<module>.<node>[:<port>]".
	To string
	// EdgeID names the flow edge the message travels on; it selects the
	// retry policy.
	EdgeID string
	// Payload is the body, opaque to the router.
	Payload []byte
	// Metadata is carried unchanged to the destination.
	Metadata map[string]string
	// Depth is the hop count: 0 for a message sent from outside any
	// handler. A message sent from inside a handler gets at least the
	// handled message's depth + 1 (see Router.Send).
	Depth int
}

// Handler handles a message delivered to a node and returns its result.
type Handler func(ctx context.Context, msg *Message) ([]byte, error)

// Wire carries a message to another module and returns the destination's
// result. Failures should be *Error values (wires rebuild them from what the
// remote side sent).
type Wire interface {
	Send(ctx context.Context, msg *Message) ([]byte, error)
}

// Echo is a Handler that returns the payload unchanged.
func Echo(_ context.Context, msg *Message) ([]byte, error) { return msg.Payload, nil }

// Options configure a Router.
type Options struct {
	// Module is this process's module (sanitised name). Messages to its
	// nodes are dispatched locally. Empty for a pure client.
	Module string
	// Wire carries messages to other modules. Nil: only local delivery.
	Wire Wire
	// Logger receives the router's logs (nil: slog.Default()).
	Logger *slog.Logger
	// TracerProvider makes the send and handle spans (nil: the global
	// provider, otel.GetTracerProvider(), a no-op until one is set).
	TracerProvider trace.TracerProvider
	// Propagator writes and reads the trace context in Message.Metadata
	// (nil: DefaultPropagator, W3C traceparent / tracestate).
	Propagator propagation.TextMapPropagator
}

// Router dispatches messages locally or over its Wire. It is safe for
// concurrent use.
type Router struct {
	module string
	wire   Wire
	log    *slog.Logger
	tr     tracing

	mu       sync.RWMutex
	handlers map[string]Handler // "node" or "node:port"
	fallback Handler
	policies map[string]RetryPolicy // edge id → policy (defaults applied)

	idPrefix string
	idSeq    atomic.Uint64
}

// New returns a router for opts.Module (may be empty) sending to other
// modules through opts.Wire.
func New(opts Options) (*Router, error) {
	if opts.Module != "" && !switchboard.IsSanitized(opts.Module) {
		return nil, Permanent(CodeInvalidName, fmt.Sprintf("router module %q is not a sanitised name", opts.Module))
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	return &Router{
		module:   opts.Module,
		wire:     opts.Wire,
		log:      opts.Logger,
		tr:       newTracing(opts.TracerProvider, opts.Propagator),
		handlers: map[string]Handler{},
		policies: map[string]RetryPolicy{},
		idPrefix: hex.EncodeToString(b[:]) + "-",
	}, nil
}

// Module returns the router's own module name.
func (r *Router) Module() string { return r.module }

// Handle registers h for a node of the router's module: node is "<node>"
// (every port) or "<node>:<port>" (that port only, preferred over the
// node-wide handler); the node may contain dots ("node.sub"). It replaces an earlier handler for the same key.
func (r *Router) Handle(node string, h Handler) error {
	if h == nil {
		return Permanent(CodeNoHandler, "router: nil handler for "+node)
	}
	if r.module == "" {
		return Permanent(CodeInvalidName, "router: Handle needs Options.Module")
	}
	if _, err := switchboard.ParseNodeName("f." + r.module + "." + node); err != nil {
		return Permanent(CodeInvalidName, "router: node "+strconv.Quote(node)+": "+err.Error())
	}
	r.mu.Lock()
	r.handlers[node] = h
	r.mu.Unlock()
	return nil
}

// HandleDefault registers h for every node of the router's module that has
// no handler of its own (an echo module uses it).
func (r *Router) HandleDefault(h Handler) {
	r.mu.Lock()
	r.fallback = h
	r.mu.Unlock()
}

// SetEdgePolicy sets the retry policy of an edge after validating it. Sends
// on other edges make one attempt. The router keeps its own copy of
// p.NonRetryableErrorCodes: the caller may reuse the slice.
func (r *Router) SetEdgePolicy(edgeID string, p RetryPolicy) error {
	if err := p.Validate(); err != nil {
		return err
	}
	p = p.WithDefaults()
	p.NonRetryableErrorCodes = slices.Clone(p.NonRetryableErrorCodes)
	r.mu.Lock()
	r.policies[edgeID] = p
	r.mu.Unlock()
	return nil
}

// EdgePolicy returns (a copy of) the policy of an edge, defaults applied.
func (r *Router) EdgePolicy(edgeID string) RetryPolicy {
	p := r.edgePolicy(edgeID)
	p.NonRetryableErrorCodes = slices.Clone(p.NonRetryableErrorCodes)
	return p
}

// edgePolicy returns the stored policy of an edge, not to be modified.
func (r *Router) edgePolicy(edgeID string) RetryPolicy {
	r.mu.RLock()
	p, ok := r.policies[edgeID]
	r.mu.RUnlock()
	if !ok {
		return RetryPolicy{}.WithDefaults()
	}
	return p
}

type depthKey struct{}

// WithDepth returns a context saying that the code running under it handles
// a message of the given depth; Router.Send derives nested depths from it.
func WithDepth(ctx context.Context, depth int) context.Context {
	return context.WithValue(ctx, depthKey{}, depth)
}

// DepthFrom returns the depth of the message being handled under ctx and
// whether there is one.
func DepthFrom(ctx context.Context) (int, bool) {
	d, ok := ctx.Value(depthKey{}).(int)
	return d, ok
}

// Send delivers msg using the retry policy of msg.EdgeID (one attempt when
// the edge has none).
func (r *Router) Send(ctx context.Context, msg *Message) ([]byte, error) {
	if msg == nil {
		return nil, NoMessage()
	}
	return r.SendWithPolicy(ctx, msg, r.edgePolicy(msg.EdgeID))
}

// SendWithPolicy delivers msg to its destination, locally or over the wire,
// with policy p (validated; zero fields take the defaults). The destination
// must name a port ("<flow>.<module>.<node>:<port>"; the node may contain
// dots), as TinySystems SDK receivers require. When called
// from inside a handler, the message's depth is raised to the handled
// message's depth + 1. Failures are *Error values (a local handler's own
// error is returned as is); after several attempts the last failure is
// returned wrapped with the attempt count. A retry that could not start
// before ctx's deadline is not waited for: the send fails at once with the
// last failure. When ctx ends while waiting to retry, the error is ctx's
// (code canceled or deadline_exceeded), the last failure kept in its chain.
// It sets msg.ID when empty and may raise msg.Depth: a *Message is not to be
// shared by concurrent sends.
func (r *Router) SendWithPolicy(ctx context.Context, msg *Message, p RetryPolicy) ([]byte, error) {
	if msg == nil {
		return nil, NoMessage()
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	p = p.WithDefaults()
	if d, ok := DepthFrom(ctx); ok && msg.Depth <= d {
		msg.Depth = d + 1
	}
	if err := checkDepth(msg.Depth); err != nil {
		return nil, err
	}
	nn, err := ParseTo(msg.To)
	if err != nil {
		return nil, err
	}
	if err := nn.RequirePort(); err != nil {
		return nil, Permanent(CodeInvalidName, "destination "+err.Error())
	}
	if msg.ID == "" {
		msg.ID = r.idPrefix + strconv.FormatUint(r.idSeq.Add(1), 10)
	}
	for attempt := 1; ; attempt++ {
		out, err := r.attempt(ctx, nn.Module, msg, p.Timeout, attempt)
		if err == nil {
			return out, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		e := AsError(err)
		if attempt >= p.MaxAttempts || !p.shouldRetry(e) {
			if attempt > 1 {
				return nil, fmt.Errorf("%s: gave up after %d attempts: %w", msg.To, attempt, err)
			}
			return nil, err
		}
		delay := p.Delay(attempt)
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= delay {
			// The next attempt would start at or after the caller's
			// deadline: fail now rather than wait for nothing.
			return nil, fmt.Errorf("%s: gave up after %d attempts (the next, in %v, would start after the deadline): %w", msg.To, attempt, delay, err)
		}
		r.log.Debug("router: retrying", "to", msg.To, "edge", msg.EdgeID, "attempt", attempt, "code", e.Code, "delay", delay)
		if serr := sleep(ctx, delay); serr != nil {
			// The caller's context ended while waiting to retry: its error
			// is the send's (errors.Is(err, context.Canceled), code
			// canceled), not the last failure, which a caller or an
			// upstream retry policy would take for a retryable one.
			ce := AsError(serr)
			return nil, fmt.Errorf("%s: gave up after %d attempts: %w while waiting to retry (%w; last failure: %w)",
				msg.To, attempt, serr, &Error{Code: ce.Code, Retryable: ce.Retryable, Message: "the caller's context ended"}, err)
		}
	}
}

// attempt makes one attempt of a send, in its own span.
func (r *Router) attempt(ctx context.Context, module string, msg *Message, timeout time.Duration, n int) (out []byte, err error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	local := module == r.module
	ctx, span := r.tr.startSend(ctx, module, msg, n, local)
	defer func() { end(span, err) }()
	if local {
		return r.dispatch(ctx, msg)
	}
	if r.wire == nil {
		return nil, Transient(CodeModuleUnknown, fmt.Sprintf("module %q is not this process's module and no wire is configured", module))
	}
	out, err = r.wire.Send(ctx, r.tr.inject(ctx, msg))
	if err != nil && pastDeadline(ctx) {
		// The attempt's own deadline: make the error say so whatever the
		// wire reported.
		if e := AsError(err); e.Code != CodeDeadlineExceeded {
			return nil, &Error{Code: CodeDeadlineExceeded, Retryable: true, Message: "attempt timed out: " + err.Error()}
		}
	}
	return out, err
}

// Dispatch delivers a message that arrived from a wire to the local handler
// of its node. Servers (grpcwire, the NATS wire) call it for every incoming
// message. It refuses messages deeper than MaxDepth, malformed names,
// messages for another module (CodeMisrouted) and nodes without a handler.
func (r *Router) Dispatch(ctx context.Context, msg *Message) (out []byte, err error) {
	if msg == nil {
		return nil, NoMessage()
	}
	ctx, span := r.tr.startHandle(ctx, r.module, msg, true)
	defer func() { end(span, err) }()
	if err := checkDepth(msg.Depth); err != nil {
		return nil, err
	}
	nn, err := ParseTo(msg.To)
	if err != nil {
		return nil, err
	}
	if nn.Module != r.module {
		return nil, Transient(CodeMisrouted, fmt.Sprintf("this process serves module %q, not %q", r.module, nn.Module))
	}
	return r.handle(ctx, msg)
}

// dispatch delivers a message of this module sent by this process, in a
// handle span.
func (r *Router) dispatch(ctx context.Context, msg *Message) (out []byte, err error) {
	ctx, span := r.tr.startHandle(ctx, r.module, msg, false)
	defer func() { end(span, err) }()
	return r.handle(ctx, msg)
}

func (r *Router) handle(ctx context.Context, msg *Message) ([]byte, error) {
	h := r.lookup(msg.To)
	if h == nil {
		return nil, Permanent(CodeNoHandler, fmt.Sprintf("module %q has no handler for %s", r.module, msg.To))
	}
	out, err := h(WithDepth(ctx, msg.Depth), msg)
	if e, ok := err.(*Error); ok && e == nil {
		// A handler that returned a nil *Error as its error succeeded
		// (as grpcwire's ToStatus reads it): not a non-nil error holding
		// nothing, which every caller would take for a failure.
		return out, nil
	}
	return out, err
}

// lookup finds the handler for a full node name already parsed as valid:
// "node:port", then "node", then the default handler.
func (r *Router) lookup(to string) Handler {
	// "<flow>.<module>.<node>[:<port>]": the key is what follows the
	// second dot.
	_, rest, _ := strings.Cut(to, ".")
	_, key, _ := strings.Cut(rest, ".")
	node, _, _ := strings.Cut(key, ":")
	r.mu.RLock()
	defer r.mu.RUnlock()
	if h, ok := r.handlers[key]; ok {
		return h
	}
	if h, ok := r.handlers[node]; ok {
		return h
	}
	return r.fallback
}

// pastDeadline reports whether ctx's deadline has passed, even if its timer
// has not fired yet (on a loaded machine the peer's reply to its own
// deadline can arrive first).
func pastDeadline(ctx context.Context) bool {
	if ctx.Err() == context.DeadlineExceeded {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

func checkDepth(d int) error {
	if d > MaxDepth {
		return Permanent(CodeDepthExceeded, fmt.Sprintf("message depth %d exceeds %d (a routing loop?)", d, MaxDepth))
	}
	if d < 0 {
		return Permanent(CodeDepthExceeded, fmt.Sprintf("message depth %d is negative", d))
	}
	return nil
}

// ParseTo parses a destination full node name and returns it, or a
// permanent CodeInvalidName *Error that says what is wrong.
func ParseTo(to string) (switchboard.NodeName, error) {
	nn, err := switchboard.ParseNodeName(to)
	if err != nil {
		return nn, Permanent(CodeInvalidName, "destination "+err.Error())
	}
	return nn, nil
}
