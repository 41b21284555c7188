package grpcwire

import (
	"context"
	"errors"
	"net"
	"strconv"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/switchboard-io/switchboard/grpcwire/modulepb"
	"github.com/switchboard-io/switchboard/router"
)

// startServer serves h on 127.0.0.1:0 until the test ends and returns a
// client connection to it.
func startServer(t *testing.T, h router.Handler) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, lis, h, ServerOptions{}) }()
	cc, err := grpc.NewClient(lis.Addr().String(), DialOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cc.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return cc
}

func TestRoundTrip(t *testing.T) {
	type seen struct{ msg router.Message }
	got := make(chan seen, 1)
	cc := startServer(t, func(ctx context.Context, m *router.Message) ([]byte, error) {
		got <- seen{msg: *m}
		return append([]byte("echo:"), m.Payload...), nil
	})
	c := modulepb.NewModuleServiceClient(cc)
	msg := &router.Message{ID: "id1", From: "f.a.x", To: "f.b.y:in", EdgeID: "e", Payload: []byte("hi"), Metadata: map[string]string{"k": "v"}, Depth: 7}
	out, err := Call(context.Background(), c, msg)
	if err != nil || string(out) != "echo:hi" {
		t.Fatalf("Call = %q, %v", out, err)
	}
	s := <-got
	if s.msg.ID != "id1" || s.msg.From != "f.a.x" || s.msg.To != "f.b.y:in" || s.msg.EdgeID != "e" || s.msg.Metadata["k"] != "v" || s.msg.Depth != 7 {
		t.Fatalf("server saw %+v", s.msg)
	}
}

func TestErrorsCrossTheWire(t *testing.T) {
	cc := startServer(t, func(ctx context.Context, m *router.Message) ([]byte, error) {
		switch string(m.Payload) {
		case "perm":
			return nil, router.Permanent("quota_exceeded", "no more")
		case "transient":
			return nil, router.Transient("busy", "try later")
		case "plain":
			return nil, errors.New("plain failure")
		}
		return nil, nil
	})
	c := modulepb.NewModuleServiceClient(cc)
	for _, tc := range []struct {
		payload   string
		code      string
		retryable bool
		msg       string
	}{
		{"perm", "quota_exceeded", false, "no more"},
		{"transient", "busy", true, "try later"},
		{"plain", router.CodeInternal, true, "plain failure"},
	} {
		_, err := Call(context.Background(), c, &router.Message{To: "f.b.n", Payload: []byte(tc.payload)})
		var e *router.Error
		if !errors.As(err, &e) || e.Code != tc.code || e.Retryable != tc.retryable || e.Message != tc.msg {
			t.Errorf("%s: got %#v", tc.payload, err)
		}
	}
	// The trailers mirror the details for peers that do not decode them.
	var tr metadata.MD
	_, err := c.Message(context.Background(), &modulepb.MessageRequest{To: "f.b.n", Payload: []byte("perm")}, grpc.Trailer(&tr))
	e, ok := FromTrailer(tr, "m")
	if err == nil || !ok || e.Code != "quota_exceeded" || e.Retryable {
		t.Fatalf("trailer: %v %v %+v", err, ok, e)
	}
	// Malformed depth is refused.
	ctx := metadata.AppendToOutgoingContext(context.Background(), router.DepthHeader, "x")
	_, err = c.Message(ctx, &modulepb.MessageRequest{To: "f.b.n"})
	if e := FromStatus(err); e == nil || e.Retryable {
		t.Fatalf("malformed depth: %v", err)
	}
}

// trailerOnlyService is a peer that reports its errors as x-error-code /
// x-error-retryable trailers and a plain gRPC status, without ErrorDetail
// (as a non-Go implementation may).
type trailerOnlyService struct {
	modulepb.UnimplementedModuleServiceServer
}

func (trailerOnlyService) Message(ctx context.Context, req *modulepb.MessageRequest) (*modulepb.MessageResponse, error) {
	switch string(req.Payload) {
	case "perm":
		grpc.SetTrailer(ctx, metadata.Pairs(ErrorCodeTrailer, "quota_exceeded", ErrorRetryableTrailer, "false"))
		return nil, status.Error(codes.Unknown, "no more")
	case "transient":
		grpc.SetTrailer(ctx, metadata.Pairs(ErrorCodeTrailer, "busy", ErrorRetryableTrailer, "1"))
		return nil, status.Error(codes.FailedPrecondition, "try later")
	case "both":
		// The details win over the trailers.
		grpc.SetTrailer(ctx, metadata.Pairs(ErrorCodeTrailer, "from_trailer", ErrorRetryableTrailer, "true"))
		return nil, ToStatus(router.Permanent("from_detail", "detail"))
	}
	return nil, status.Error(codes.Unavailable, "plain")
}

func TestErrorFromTrailersOnly(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	modulepb.RegisterModuleServiceServer(gs, trailerOnlyService{})
	go gs.Serve(lis)
	defer gs.Stop()
	cc, err := grpc.NewClient(lis.Addr().String(), DialOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	c := modulepb.NewModuleServiceClient(cc)
	for _, tc := range []struct {
		payload   string
		code      string
		retryable bool
		msg       string
	}{
		{"perm", "quota_exceeded", false, "no more"},
		{"transient", "busy", true, "try later"},
		{"both", "from_detail", false, "detail"},
		{"plain", router.CodeUnavailable, true, "plain"},
	} {
		_, err := Call(context.Background(), c, &router.Message{To: "f.b.n", Payload: []byte(tc.payload)})
		var e *router.Error
		if !errors.As(err, &e) || e.Code != tc.code || e.Retryable != tc.retryable || e.Message != tc.msg {
			t.Errorf("%s: got %#v", tc.payload, err)
		}
	}
}

func TestTransportErrors(t *testing.T) {
	// A closed port: unavailable, retryable.
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := lis.Addr().String()
	lis.Close()
	cc, err := grpc.NewClient(addr, DialOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	_, err = Call(context.Background(), modulepb.NewModuleServiceClient(cc), &router.Message{To: "f.b.n"})
	var e *router.Error
	if !errors.As(err, &e) || e.Code != router.CodeUnavailable || !e.Retryable {
		t.Fatalf("closed port: %v", err)
	}
	// A deadline: deadline_exceeded, retryable.
	block := make(chan struct{})
	defer close(block)
	cc2 := startServer(t, func(ctx context.Context, m *router.Message) ([]byte, error) {
		select {
		case <-block:
		case <-ctx.Done():
		}
		return nil, ctx.Err()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = Call(ctx, modulepb.NewModuleServiceClient(cc2), &router.Message{To: "f.b.n"})
	if !errors.As(err, &e) || e.Code != router.CodeDeadlineExceeded || !e.Retryable {
		t.Fatalf("deadline: %v", err)
	}
}

func TestHealthAndReflection(t *testing.T) {
	cc := startServer(t, router.Echo)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, svc := range []string{"", "module.ModuleService"} {
		resp, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("health %q: %v %v", svc, resp, err)
		}
	}
	stream, err := reflectionpb.NewServerReflectionClient(cc).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range resp.GetListServicesResponse().GetService() {
		found = found || s.Name == "module.ModuleService"
	}
	if !found {
		t.Fatalf("reflection does not list module.ModuleService: %v", resp)
	}
	stream.CloseSend()
}

func TestServeEcho(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeEcho(ctx, lis, "echo-mod", ServerOptions{}) }()
	cc, _ := grpc.NewClient(lis.Addr().String(), DialOptions()...)
	defer cc.Close()
	c := modulepb.NewModuleServiceClient(cc)
	out, err := Call(context.Background(), c, &router.Message{To: "f.echo-mod.any:port", Payload: []byte("ping")})
	if err != nil || string(out) != "ping" {
		t.Fatalf("echo: %q %v", out, err)
	}
	_, err = Call(context.Background(), c, &router.Message{To: "f.other.any", Payload: []byte("ping")})
	var e *router.Error
	if !errors.As(err, &e) || e.Code != router.CodeMisrouted {
		t.Fatalf("misrouted: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func FuzzErrorMapping(f *testing.F) {
	f.Add("quota", true, "msg")
	f.Add("", false, "")
	f.Fuzz(func(t *testing.T, code string, retryable bool, msg string) {
		in := &router.Error{Code: code, Retryable: retryable, Message: msg}
		out := FromStatus(ToStatus(in))
		if out == nil {
			t.Fatal("nil")
		}
		if code != "" && utf8.ValidString(code) && len(code) <= MaxErrorCodeLen && (out.Code != code || out.Retryable != retryable) {
			t.Fatalf("%+v -> %+v", in, out)
		}
		if !utf8.ValidString(out.Code) || len(out.Code) > MaxErrorCodeLen || !utf8.ValidString(out.Message) || len(out.Message) > MaxErrorMessageLen+64 {
			t.Fatalf("%+v -> %+v: code or message not valid UTF-8 or over its bound", in, out)
		}
		if len(msg) <= MaxErrorMessageLen && utf8.ValidString(msg) && out.Message != msg {
			t.Fatalf("message %q -> %q", msg, out.Message)
		}
		md := metadata.Pairs(ErrorCodeTrailer, code, ErrorRetryableTrailer, strconv.FormatBool(retryable))
		if e, ok := FromTrailer(md, msg); ok && (e.Code != code || e.Retryable != retryable) {
			t.Fatalf("trailer %+v -> %+v", in, e)
		}
	})
}
