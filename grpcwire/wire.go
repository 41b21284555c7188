// Package grpcwire is the gRPC fallback wire between modules: the
// module.ModuleService protocol (module.proto, generated code in modulepb),
// a server that hands every incoming message to a router.Handler, and the
// client half used by the address pool.
//
// Failures cross the wire as gRPC status errors carrying a
// modulepb.ErrorDetail (code, retryable, message) in the status details, and
// also as x-error-code / x-error-retryable trailing metadata for peers that
// do not decode details (a code over MaxErrorCodeLen or a message over
// MaxErrorMessageLen is cut short, so an oversized error cannot break the
// connection). The caller rebuilds a *router.Error, so errors.As
// and retry policies work across the hop. The hop depth travels in the
// x-message-depth request metadata.
//
// A status without that detail comes from a peer that is not Switchboard (a
// TinySystems SDK module sends its handler errors as status Unknown with
// the text only): it is a permanent "remote_error", never retried, while
// transport failures (Unavailable) stay retryable; see FromStatus.
//
// TLS and mutual TLS (TLS, from [transport] tls_cert, tls_key, tls_ca) are
// re-read when their files change; WatchHandshakes lets the pool tell a
// security mismatch (CodeTLS, permanent) from a peer that is down. Trace
// context travels in the request metadata (otelgrpc, as the TinySystems
// SDK; PropagateTrace where spans are not recorded).
package grpcwire

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/stats"

	"github.com/switchboard-io/switchboard/grpcwire/modulepb"
	"github.com/switchboard-io/switchboard/internal/textcut"
	"github.com/switchboard-io/switchboard/router"
)

// Trailing metadata keys that mirror the status details for peers that do
// not decode them.
const (
	ErrorCodeTrailer      = "x-error-code"
	ErrorRetryableTrailer = "x-error-retryable"
)

// Client keepalive: ping every 10 s when idle, 3 s for the ack,
// also without active RPCs.
const (
	KeepaliveTime    = 10 * time.Second
	KeepaliveTimeout = 3 * time.Second
)

// DialOptions returns the options every module connection uses: plaintext
// and the client keepalive. Extra options are appended.
func DialOptions(extra ...grpc.DialOption) []grpc.DialOption {
	return append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{
			Time:                KeepaliveTime,
			Timeout:             KeepaliveTimeout,
			PermitWithoutStream: true,
		}),
	}, extra...)
}

// ClientStatsHandler returns the otelgrpc client instrumentation of module
// connections, as the TinySystems SDK uses: a client span per call, and the
// trace context of the caller's context written into the request metadata,
// where SDK and Switchboard servers read it. Nil tp: the global provider;
// nil prop: router.DefaultPropagator. The pool installs it only when its
// provider can record (router.Recording), because any stats handler costs
// grpc-go a dozen allocations per call; without it, PropagateTrace carries
// the trace context on.
func ClientStatsHandler(tp trace.TracerProvider, prop propagation.TextMapPropagator) stats.Handler {
	return otelgrpc.NewClientHandler(otelOptions(tp, prop)...)
}

// ServerStatsHandler is the server half of ClientStatsHandler: a server span
// per call, continuing the caller's traceparent request metadata. NewServer
// installs it only when its provider can record; without it, the server
// copies traceparent and tracestate from the request metadata into the
// message's Metadata, where the router's Dispatch continues the trace.
func ServerStatsHandler(tp trace.TracerProvider, prop propagation.TextMapPropagator) stats.Handler {
	return otelgrpc.NewServerHandler(otelOptions(tp, prop)...)
}

// PropagateTrace writes the trace context of ctx into its outgoing gRPC
// metadata (traceparent, tracestate) when ctx carries one, for connections
// without ClientStatsHandler, so a process that does not record spans still
// passes the trace on. It returns ctx unchanged, at the cost of one lookup,
// when there is no trace.
func PropagateTrace(ctx context.Context, prop propagation.TextMapPropagator) context.Context {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	if prop == nil {
		prop = router.DefaultPropagator()
	}
	c := propagation.MapCarrier{}
	prop.Inject(ctx, c)
	kv := make([]string, 0, 2*len(c))
	for k, v := range c {
		kv = append(kv, k, v)
	}
	return metadata.AppendToOutgoingContext(ctx, kv...)
}

func otelOptions(tp trace.TracerProvider, prop propagation.TextMapPropagator) []otelgrpc.Option {
	if prop == nil {
		prop = router.DefaultPropagator()
	}
	opts := []otelgrpc.Option{otelgrpc.WithPropagators(prop)}
	if tp != nil {
		opts = append(opts, otelgrpc.WithTracerProvider(tp))
	}
	return opts
}

// Call sends msg over c and returns the destination's result. The depth goes
// in x-message-depth when positive. Every failure is returned as a
// *router.Error rebuilt from what the server sent: the ErrorDetail in the
// status details, else the x-error-code / x-error-retryable trailers (a peer
// that does not send details), else the gRPC status (transport failures).
// A message the wire cannot carry — a string field or metadata entry that
// is not valid UTF-8 — fails with a permanent router.CodeInvalidArgument naming
// the field, not as a remote failure. CallLost also says whether the
// transport failed under the call.
func Call(ctx context.Context, c modulepb.ModuleServiceClient, msg *router.Message) ([]byte, error) {
	data, _, err := CallLost(ctx, c, msg)
	return data, err
}

// CallLost is Call, and also reports whether the call was lost: whether
// the transport failed under it — which grpc-go reports as Unavailable, or
// as Canceled when the connection is closed, without Switchboard's error
// detail or trailers — so that the error is not what the destination's
// server sent. The pool reads it to keep anything else as it came, however
// the connection fares afterwards, and to tell a lost call on a connection
// it closed meanwhile. A call is lost when its error is not a gRPC status
// (nothing came back), or is an Unavailable or Canceled status with
// neither a modulepb.ErrorDetail in its details nor an x-error-code
// trailer (only a Switchboard peer sends them; any counts, even one
// without a code); a lost call always has an error. It is not lost when:
//
//   - the call succeeded, also with a response that reports its handler's
//     failure in-band (HasError, an old peer's way: a "remote_error");
//   - the status has a code the transport does not produce: any code but
//     Unavailable and Canceled (a remote handler's error, the caller's
//     deadline, a message over a size limit);
//   - the message never left: nil, no client, or a field that is not valid
//     UTF-8 (router.CodeInvalidArgument).
func CallLost(ctx context.Context, c modulepb.ModuleServiceClient, msg *router.Message) (data []byte, lost bool, err error) {
	if msg == nil {
		return nil, false, router.NoMessage()
	}
	if c == nil {
		return nil, false, router.Permanent(router.CodeUnavailable, "grpcwire: no client to send "+strconv.Quote(msg.To)+" with (nil ModuleServiceClient)")
	}
	if msg.Depth > 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, router.DepthHeader, strconv.Itoa(msg.Depth))
	}
	var trailer metadata.MD
	resp, err := c.Message(ctx, &modulepb.MessageRequest{
		ID:       msg.ID,
		From:     msg.From,
		To:       msg.To,
		Payload:  msg.Payload,
		EdgeID:   msg.EdgeID,
		Metadata: msg.Metadata,
	}, grpc.Trailer(&trailer))
	if err != nil {
		if status.Code(err) == codes.Internal {
			// protobuf refuses to marshal a string field that is not
			// UTF-8: the message never left, and no peer failed.
			if e := invalidUTF8(msg); e != nil {
				return nil, false, e
			}
		}
		return nil, !isAnswer(err, trailer), fromCall(err, trailer)
	}
	if resp.HasError {
		// An old peer reporting its handler's failure in-band: a remote
		// handler failure without a code of ours, like a bare status.
		return nil, false, &router.Error{Code: router.CodeRemoteError, Message: resp.Error}
	}
	return resp.Data, false, nil
}

// isAnswer reports whether err, the error of a call whose trailing metadata
// is trailer, is not the transport's: a status with a Switchboard error
// detail or error-code trailer, or with a code the transport does not
// produce (a remote handler's error, the caller's deadline, a message over
// a size limit).
func isAnswer(err error, trailer metadata.MD) bool {
	st, ok := status.FromError(err)
	if !ok {
		return false // not a status: nothing came back
	}
	if c := st.Code(); c != codes.Unavailable && c != codes.Canceled {
		return true
	}
	for _, d := range st.Details() {
		if _, ok := d.(*modulepb.ErrorDetail); ok {
			return true
		}
	}
	return len(trailer.Get(ErrorCodeTrailer)) > 0
}

// invalidUTF8 is the permanent router.CodeInvalidArgument error of a message with
// a string field that is not valid UTF-8, which the gRPC wire cannot carry
// (protobuf strings are UTF-8), naming the field; nil when all are valid.
func invalidUTF8(msg *router.Message) *router.Error {
	bad := func(field, v string) *router.Error {
		return router.Permanent(router.CodeInvalidArgument, fmt.Sprintf("message %s %q is not valid UTF-8, which the gRPC wire cannot carry", field, v))
	}
	for _, f := range [...]struct{ name, v string }{{"ID", msg.ID}, {"From", msg.From}, {"To", msg.To}, {"EdgeID", msg.EdgeID}} {
		if !utf8.ValidString(f.v) {
			return bad(f.name, f.v)
		}
	}
	for k, v := range msg.Metadata {
		if !utf8.ValidString(k) {
			return bad("metadata key", k)
		}
		if !utf8.ValidString(v) {
			return bad("metadata value of "+strconv.Quote(k)+":", v)
		}
	}
	return nil
}

// FromStatus rebuilds the *router.Error a server sent: from the
// ErrorDetail in the status details when present, else from the gRPC code.
// A status without the detail did not come from a Switchboard handler:
//
//   - Unavailable (connection refused or lost: the transport failed) →
//     "unavailable", retryable; DeadlineExceeded → "deadline_exceeded",
//     retryable; Canceled → "canceled";
//   - Unknown and Internal → "remote_error", NOT retryable, the text kept:
//     that is how a TinySystems SDK module's handler error arrives, and the
//     SDK never retries a remote module's error;
//   - ResourceExhausted (a message over a size limit) →
//     "resource_exhausted", not retryable;
//   - any other code → its snake_case name, not retryable.
//
// Errors that are not gRPC statuses go through router.AsError. It returns
// nil for nil.
func FromStatus(err error) *router.Error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return router.AsError(err)
	}
	if ed := errorDetail(st); ed != nil {
		return &router.Error{Code: ed.Code, Retryable: ed.Retryable, Message: ed.Message}
	}
	code, retryable := fromGRPCCode(st.Code())
	return &router.Error{Code: code, Retryable: retryable, Message: st.Message()}
}

// fromCall rebuilds the error of a failed call whose trailing metadata is
// trailer: as FromStatus, except that a gRPC status without ErrorDetail
// takes its code from the x-error-code / x-error-retryable trailers when
// the peer sent them.
func fromCall(err error, trailer metadata.MD) *router.Error {
	if st, ok := status.FromError(err); ok && errorDetail(st) == nil {
		if e, ok := FromTrailer(trailer, st.Message()); ok {
			return e
		}
	}
	return FromStatus(err)
}

// errorDetail returns the ErrorDetail with a code in st's details, or nil.
func errorDetail(st *status.Status) *modulepb.ErrorDetail {
	for _, d := range st.Details() {
		if ed, ok := d.(*modulepb.ErrorDetail); ok && ed.Code != "" {
			return ed
		}
	}
	return nil
}

// FromTrailer rebuilds an error from the x-error-code / x-error-retryable
// trailing metadata and the status message; ok is false when md has no
// error code.
func FromTrailer(md metadata.MD, msg string) (e *router.Error, ok bool) {
	cs := md.Get(ErrorCodeTrailer)
	if len(cs) == 0 || cs[0] == "" {
		return nil, false
	}
	r := md.Get(ErrorRetryableTrailer)
	retryable := len(r) > 0 && ParseBool(r[0])
	return &router.Error{Code: cs[0], Retryable: retryable, Message: msg}, true
}

// ParseBool reads a retryable flag leniently: "true", "1", "yes" (any case)
// are true, everything else false.
func ParseBool(s string) bool {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true", "1", "yes", "t":
		return true
	}
	return false
}

// ToStatus turns a handler's error into the gRPC status error a server
// returns: a gRPC code chosen from the error's code, and an ErrorDetail
// with code, retryable flag and message (both valid UTF-8, cut to
// MaxErrorCodeLen and MaxErrorMessageLen). It returns nil for nil (and for
// a nil *router.Error).
func ToStatus(err error) error {
	e := router.AsError(err)
	if e == nil {
		return nil
	}
	code, msg := wireText(e)
	return statusOf(e, code, msg)
}

// statusOf is ToStatus of e, whose code and message as they are sent
// (wireText) are code and msg.
func statusOf(e *router.Error, code, msg string) error {
	st := status.New(toGRPCCode(code), msg)
	if withDetail, derr := st.WithDetails(&modulepb.ErrorDetail{Code: code, Retryable: e.Retryable, Message: msg}); derr == nil {
		st = withDetail
	}
	return st.Err()
}

// Bounds of the code and message of an error sent in a status: they travel
// in the call's trailers (grpc-message, the details, x-error-code), and a
// trailer block over the peer's header limit (16 MiB in grpc-go, far less
// in proxies) is a connection error that fails every call on the
// connection, the sender's module's and every other's. Longer texts are cut
// (at a character boundary) and say how much was cut.
const (
	MaxErrorCodeLen    = 256
	MaxErrorMessageLen = 8 << 10
)

// wireText returns the code and message of e as they are sent: valid UTF-8,
// cut to MaxErrorCodeLen and MaxErrorMessageLen, and CodeInternal for an
// empty code.
func wireText(e *router.Error) (code, msg string) {
	full := strings.ToValidUTF8(e.Message, "\uFFFD")
	msg = textcut.Prefix(full, MaxErrorMessageLen)
	if n := len(full) - len(msg); n > 0 {
		msg += fmt.Sprintf("%s (%d more bytes cut)", textcut.Marker, n)
	}
	return wireCode(e), msg
}

// wireCode is the code of e as wireText sends it.
func wireCode(e *router.Error) string {
	code := textcut.Prefix(strings.ToValidUTF8(e.Code, "\uFFFD"), MaxErrorCodeLen)
	if code == "" {
		return router.CodeInternal
	}
	return code
}

func toGRPCCode(code string) codes.Code {
	switch code {
	case router.CodeUnavailable, router.CodeModuleUnknown, router.CodeMisrouted:
		return codes.Unavailable
	case router.CodeDeadlineExceeded:
		return codes.DeadlineExceeded
	case router.CodeCanceled:
		return codes.Canceled
	case router.CodeInvalidName, router.CodeInvalidPolicy:
		return codes.InvalidArgument
	case router.CodeDepthExceeded, router.CodeNotDialable:
		return codes.FailedPrecondition
	case router.CodeNoHandler:
		return codes.NotFound
	case router.CodeInternal:
		return codes.Internal
	}
	return codes.Unknown
}

func fromGRPCCode(c codes.Code) (string, bool) {
	switch c {
	case codes.Unavailable:
		return router.CodeUnavailable, true
	case codes.DeadlineExceeded:
		return router.CodeDeadlineExceeded, true
	case codes.Canceled:
		return router.CodeCanceled, false
	case codes.Unknown, codes.Internal:
		return router.CodeRemoteError, false
	case codes.ResourceExhausted:
		return router.CodeResourceExhausted, false
	}
	return snake(c.String()), false
}

// snake turns "InvalidArgument" into "invalid_argument".
func snake(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			if i > 0 {
				b.WriteByte('_')
			}
			c += 'a' - 'A'
		}
		b.WriteByte(c)
	}
	return b.String()
}

// trailerValue makes s safe for a non-binary metadata value: printable
// ASCII only, anything else replaced by '_'.
func trailerValue(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if b[j] < 0x20 || b[j] > 0x7e {
					b[j] = '_'
				}
			}
			return string(b)
		}
	}
	return s
}

// depthFromIncoming reads x-message-depth of an incoming call (0 when
// absent).
func depthFromIncoming(ctx context.Context) (int, error) {
	vs := metadata.ValueFromIncomingContext(ctx, router.DepthHeader)
	if len(vs) == 0 {
		return 0, nil
	}
	return router.ParseDepth(vs[0])
}
