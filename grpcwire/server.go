package grpcwire

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"runtime/debug"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-io/switchboard/grpcwire/modulepb"
	"github.com/switchboard-io/switchboard/router"
)

// KeepaliveMinTime is the shortest client ping interval the server accepts
// (clients ping every 10 s); PermitWithoutStream is on.
const KeepaliveMinTime = 5 * time.Second

// DefaultMaxConcurrentStreams bounds the concurrent calls one client
// connection may have in flight on a server (grpc-go's own default is
// unbounded); further calls wait on the client until a stream frees up.
const DefaultMaxConcurrentStreams = 1000

// DefaultGracePeriod is how long Serve lets in-flight calls finish after its
// context ends before it stops the server hard.
const DefaultGracePeriod = 10 * time.Second

// ServerOptions configure a Server.
type ServerOptions struct {
	// Logger receives the server's logs (nil: slog.Default()).
	Logger *slog.Logger
	// GracePeriod bounds the graceful stop of Serve (zero:
	// DefaultGracePeriod).
	GracePeriod time.Duration
	// MaxConcurrentStreams bounds the concurrent calls per client
	// connection (zero: DefaultMaxConcurrentStreams).
	MaxConcurrentStreams uint32
	// TLS, when set, serves TLS with its certificate (re-read when the
	// files change) and, with a CA, requires client certificates signed by
	// it (mutual TLS). Nil: plaintext.
	TLS *TLS
	// TracerProvider and Propagator instrument the server with otelgrpc,
	// as the TinySystems SDK does, when the provider can record
	// (router.Recording; set tracing up before creating the server): every
	// call is a server span continuing the caller's trace (nil: the global
	// provider; router.DefaultPropagator, W3C trace context). Either way
	// the caller's traceparent reaches the handler's context.
	TracerProvider trace.TracerProvider
	Propagator     propagation.TextMapPropagator
	// DisableReflection leaves the server reflection service out (it is
	// on by default, so grpcurl and similar tools can list the service).
	DisableReflection bool
	// GRPCOptions are appended to the server's own options. Credentials
	// set here (grpc.Creds) are used when TLS is nil and ignored when it
	// is set: TLS always decides (grpc-go keeps the last credentials given,
	// and cannot tell which option sets them, so TLS's go last).
	GRPCOptions []grpc.ServerOption
}

// Server serves module.ModuleService, the gRPC health service and (unless
// disabled) server reflection. Every incoming message goes to one
// router.Handler, usually a router's Dispatch.
type Server struct {
	gs     *grpc.Server
	health *health.Server
	log    *slog.Logger
	grace  time.Duration
}

// NewServer returns a server handing every incoming message to h, with the
// keepalive enforcement policy (MinTime 5 s, PermitWithoutStream),
// MaxConcurrentStreams, a recovery interceptor (a panicking handler fails
// its call with an "internal" error instead of killing the process), health
// (SERVING for "" and "module.ModuleService") and, unless disabled,
// reflection.
//
// It fails only when opts.TLS cannot serve (no certificate).
func NewServer(h router.Handler, opts ServerOptions) (*Server, error) {
	if h == nil {
		return nil, router.Permanent(router.CodeNoHandler, "grpcwire: nil handler")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.GracePeriod <= 0 {
		opts.GracePeriod = DefaultGracePeriod
	}
	if opts.MaxConcurrentStreams == 0 {
		opts.MaxConcurrentStreams = DefaultMaxConcurrentStreams
	}
	var tlsCreds grpc.ServerOption
	if opts.TLS != nil {
		creds, err := opts.TLS.ServerCredentials()
		if err != nil {
			return nil, err
		}
		tlsCreds = grpc.Creds(creds)
	}
	var sopts []grpc.ServerOption
	// Instrument only when spans can be recorded: any stats handler costs
	// grpc-go allocations on every call (see ServerStatsHandler).
	otel := router.Recording(opts.TracerProvider)
	if otel {
		sopts = append(sopts, grpc.StatsHandler(ServerStatsHandler(opts.TracerProvider, opts.Propagator)))
	}
	sopts = append(sopts,
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime:             KeepaliveMinTime,
			PermitWithoutStream: true,
		}),
		grpc.MaxConcurrentStreams(opts.MaxConcurrentStreams),
		grpc.ChainUnaryInterceptor(recoverUnary(opts.Logger)),
	)
	sopts = append(sopts, opts.GRPCOptions...)
	if tlsCreds != nil {
		// After GRPCOptions: a grpc.Creds among them must not turn a TLS
		// server into a plaintext one (grpc-go keeps the last).
		sopts = append(sopts, tlsCreds)
	}
	gs := grpc.NewServer(sopts...)
	modulepb.RegisterModuleServiceServer(gs, &service{h: h, otel: otel})
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus(modulepb.ModuleService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(gs, hs)
	if !opts.DisableReflection {
		reflection.Register(gs)
	}
	return &Server{gs: gs, health: hs, log: opts.Logger, grace: opts.GracePeriod}, nil
}

// GRPC returns the underlying *grpc.Server (to register more services
// before serving).
func (s *Server) GRPC() *grpc.Server { return s.gs }

// errNoListener is the error of a Serve given a nil listener (grpc-go
// would dereference it).
var errNoListener = errors.New("grpcwire: no listener to serve on (nil net.Listener)")

// Serve accepts connections on lis until Stop or GracefulStop.
func (s *Server) Serve(lis net.Listener) error {
	if lis == nil {
		return errNoListener
	}
	err := s.gs.Serve(lis)
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// GracefulStop marks the server NOT_SERVING, stops accepting and waits for
// in-flight calls to finish.
func (s *Server) GracefulStop() {
	s.health.Shutdown()
	s.gs.GracefulStop()
}

// Stop closes every connection and listener at once.
func (s *Server) Stop() {
	s.health.Shutdown()
	s.gs.Stop()
}

// Serve runs a Server for h on lis until ctx ends, then stops it gracefully
// (hard after the grace period). It returns nil after a stop caused by ctx.
func Serve(ctx context.Context, lis net.Listener, h router.Handler, opts ServerOptions) error {
	if lis == nil {
		return errNoListener
	}
	s, err := NewServer(h, opts)
	if err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(lis) }()
	s.log.Info("grpc server: serving", "addr", lis.Addr().String(), "tls", opts.TLS != nil)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	done := make(chan struct{})
	go func() { s.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(s.grace):
		s.log.Warn("grpc server: graceful stop timed out; stopping hard", "addr", lis.Addr().String(), "grace", s.grace)
		s.Stop()
		<-done
	}
	<-errc
	s.log.Info("grpc server: stopped", "addr", lis.Addr().String())
	return nil
}

// ServeEcho serves module as an echo module on lis until ctx ends: every
// node of the module returns the payload it receives. It is what
// `switchboard echo --name M` runs (the caller registers lis.Addr() in the
// catalog).
func ServeEcho(ctx context.Context, lis net.Listener, module string, opts ServerOptions) error {
	r, err := router.New(router.Options{Module: module, Logger: opts.Logger, TracerProvider: opts.TracerProvider, Propagator: opts.Propagator})
	if err != nil {
		return err
	}
	r.HandleDefault(router.Echo)
	return Serve(ctx, lis, r.Dispatch, opts)
}

type service struct {
	modulepb.UnimplementedModuleServiceServer
	h    router.Handler
	otel bool // otelgrpc put the caller's trace in the context
}

func (s *service) Message(ctx context.Context, req *modulepb.MessageRequest) (*modulepb.MessageResponse, error) {
	depth, err := depthFromIncoming(ctx)
	if err != nil {
		return nil, statusWithTrailer(ctx, err)
	}
	md := req.Metadata
	if !s.otel {
		md = traceToMetadata(ctx, md)
	}
	out, err := s.h(ctx, &router.Message{
		ID:       req.ID,
		From:     req.From,
		To:       req.To,
		EdgeID:   req.EdgeID,
		Payload:  req.Payload,
		Metadata: md,
		Depth:    depth,
	})
	if err != nil && router.AsError(err) != nil { // a typed nil *router.Error is no error, as for ToStatus
		return nil, statusWithTrailer(ctx, err)
	}
	return &modulepb.MessageResponse{Data: out}, nil
}

// traceToMetadata returns md with the traceparent and tracestate of the
// call's request metadata (an SDK client sends them there, not in field 6)
// when md has none, so the router's Dispatch continues the caller's trace.
func traceToMetadata(ctx context.Context, md map[string]string) map[string]string {
	tp := metadata.ValueFromIncomingContext(ctx, router.TraceParentKey)
	if len(tp) == 0 || md[router.TraceParentKey] != "" {
		return md
	}
	out := make(map[string]string, len(md)+2)
	maps.Copy(out, md)
	out[router.TraceParentKey] = tp[0]
	if ts := metadata.ValueFromIncomingContext(ctx, router.TraceStateKey); len(ts) > 0 {
		out[router.TraceStateKey] = ts[0]
	}
	return out
}

// recoverUnary turns a panic in a call's handler into a failed call with a
// permanent "internal" error (a panic is a bug; retrying the same message
// would panic again) and logs it with its stack.
func recoverUnary(log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
		defer func() {
			if v := recover(); v != nil {
				log.Error("grpc server: handler panicked", "method", info.FullMethod, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
				err = statusWithTrailer(ctx, router.Permanent(router.CodeInternal, fmt.Sprintf("handler panicked: %v", v)))
			}
		}()
		return handler(ctx, req)
	}
}

// statusWithTrailer is ToStatus(err) with the error's code and retryable
// flag also set in the call's trailers (ErrorCodeTrailer,
// ErrorRetryableTrailer); err is not nil.
func statusWithTrailer(ctx context.Context, err error) error {
	e := router.AsError(err)
	code, msg := wireText(e) // once, for the trailer and the status
	_ = grpc.SetTrailer(ctx, metadata.Pairs(ErrorCodeTrailer, trailerValue(code), ErrorRetryableTrailer, strconv.FormatBool(e.Retryable)))
	return statusOf(e, code, msg)
}
