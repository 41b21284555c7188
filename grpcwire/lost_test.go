package grpcwire

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/switchboard-io/switchboard/grpcwire/modulepb"
	"github.com/switchboard-io/switchboard/router"
)

// answerService answers as its request's payload says: with data, in-band,
// or with a status that has (or lacks) Switchboard's detail and trailers.
type answerService struct {
	modulepb.UnimplementedModuleServiceServer
}

func (answerService) Message(ctx context.Context, req *modulepb.MessageRequest) (*modulepb.MessageResponse, error) {
	trailer := func(code string) { grpc.SetTrailer(ctx, metadata.Pairs(ErrorCodeTrailer, code)) }
	withDetail := func(c codes.Code, ed *modulepb.ErrorDetail) error {
		st, err := status.New(c, "with detail").WithDetails(ed)
		if err != nil {
			return status.Error(codes.Internal, err.Error())
		}
		return st.Err()
	}
	switch string(req.Payload) {
	case "ok":
		return &modulepb.MessageResponse{Data: []byte("done")}, nil
	case "in-band":
		return &modulepb.MessageResponse{HasError: true, Error: "handler failed in-band"}, nil
	case "handler error":
		return nil, ToStatus(router.Permanent("quota", "no more"))
	case "foreign":
		return nil, status.Error(codes.Unknown, "component: invalid settings")
	case "unavailable":
		return nil, status.Error(codes.Unavailable, "plain")
	case "unavailable+detail":
		return nil, ToStatus(router.Transient(router.CodeUnavailable, "printer offline"))
	case "unavailable+codeless detail":
		return nil, withDetail(codes.Unavailable, &modulepb.ErrorDetail{})
	case "unavailable+trailer":
		trailer("busy")
		return nil, status.Error(codes.Unavailable, "try later")
	case "unavailable+empty trailer":
		trailer("")
		return nil, status.Error(codes.Unavailable, "try later")
	case "canceled":
		return nil, status.Error(codes.Canceled, "plain")
	case "canceled+detail":
		return nil, ToStatus(router.Permanent(router.CodeCanceled, "job withdrawn"))
	}
	return nil, status.Error(codes.InvalidArgument, "unknown payload "+string(req.Payload))
}

// dialAnswerService serves answerService (receiving at most 1 KiB) on
// 127.0.0.1:0 until the test ends and returns a client connection to it.
func dialAnswerService(t *testing.T, extra ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.MaxRecvMsgSize(1 << 10))
	modulepb.RegisterModuleServiceServer(gs, answerService{})
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(), DialOptions(extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// TestCallLost: whether the transport failed under a call — or its outcome
// is the peer's answer, or the message never left, which the pool keeps as
// they came however the connection fares — case by case, with the error
// that comes with it (Call's: Call is CallLost without the flag).
func TestCallLost(t *testing.T) {
	cc := dialAnswerService(t)
	client := modulepb.NewModuleServiceClient(cc)

	// A connection closed before the call: grpc-go's Canceled.
	closedCC := dialAnswerService(t)
	closedCC.Close()
	// A port nobody listens on: grpc-go's Unavailable.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := lis.Addr().String()
	lis.Close()
	deadCC, err := grpc.NewClient(deadAddr, DialOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer deadCC.Close()
	// A client interceptor that fails with a plain Go error: not a status.
	plainCC := dialAnswerService(t, grpc.WithUnaryInterceptor(func(context.Context, string, any, any, *grpc.ClientConn, grpc.UnaryInvoker, ...grpc.CallOption) error {
		return errors.New("interceptor says no")
	}))

	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancelExpired := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancelExpired()

	for _, tc := range []struct {
		name      string
		ctx       context.Context // nil: a live context
		client    modulepb.ModuleServiceClient
		msg       *router.Message
		lost      bool
		code      string // "" for success
		retryable bool
	}{
		{name: "response", msg: payload("ok")},
		{name: "in-band error (HasError)", msg: payload("in-band"), code: router.CodeRemoteError},
		{name: "Switchboard handler error", msg: payload("handler error"), code: "quota"},
		{name: "foreign status Unknown", msg: payload("foreign"), code: router.CodeRemoteError},
		{name: "message over the peer's size limit", msg: &router.Message{To: "f.b.n:in", Payload: make([]byte, 2<<10)}, code: router.CodeResourceExhausted},
		{name: "caller's deadline", ctx: expired, msg: payload("ok"), code: router.CodeDeadlineExceeded, retryable: true},
		{name: "Unavailable with ErrorDetail", msg: payload("unavailable+detail"), code: router.CodeUnavailable, retryable: true},
		{name: "Unavailable with an ErrorDetail without code", msg: payload("unavailable+codeless detail"), code: router.CodeUnavailable, retryable: true},
		{name: "Unavailable with x-error-code", msg: payload("unavailable+trailer"), code: "busy"},
		{name: "Unavailable with an empty x-error-code", msg: payload("unavailable+empty trailer"), code: router.CodeUnavailable, retryable: true},
		{name: "Canceled with ErrorDetail", msg: payload("canceled+detail"), code: router.CodeCanceled},
		{name: "bare Unavailable sent by the peer", msg: payload("unavailable"), lost: true, code: router.CodeUnavailable, retryable: true},
		{name: "bare Canceled sent by the peer", msg: payload("canceled"), lost: true, code: router.CodeCanceled},
		{name: "nobody listening", client: modulepb.NewModuleServiceClient(deadCC), msg: payload("ok"), lost: true, code: router.CodeUnavailable, retryable: true},
		{name: "connection closed", client: modulepb.NewModuleServiceClient(closedCC), msg: payload("ok"), lost: true, code: router.CodeCanceled},
		{name: "caller canceled", ctx: canceled, msg: payload("ok"), lost: true, code: router.CodeCanceled},
		{name: "not a gRPC status", client: modulepb.NewModuleServiceClient(plainCC), msg: payload("ok"), lost: true, code: router.CodeInternal, retryable: true},
		{name: "invalid UTF-8 never left", msg: &router.Message{To: "f.b.n:in", From: "f.a.\xff:out"}, code: router.CodeInvalidArgument},
		{name: "nil message", msg: nil, code: router.CodeInvalidName},
		{name: "nil client", client: nilClient{}, msg: payload("ok"), code: router.CodeUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := tc.ctx
			if ctx == nil {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
			}
			c := tc.client
			switch c.(type) {
			case nil:
				c = client
			case nilClient:
				c = nil
			}
			data, lost, err := CallLost(ctx, c, tc.msg)
			if lost != tc.lost {
				t.Errorf("lost = %v, want %v (error %v)", lost, tc.lost, err)
			}
			if tc.code == "" {
				if err != nil || string(data) != "done" {
					t.Fatalf("CallLost = %q, %v; want \"done\"", data, err)
				}
			} else {
				var e *router.Error
				if !errors.As(err, &e) || e.Code != tc.code || e.Retryable != tc.retryable {
					t.Fatalf("error = %v; want code %q, retryable %v", err, tc.code, tc.retryable)
				}
			}
		})
	}
}

// nilClient in a TestCallLost case stands for a nil client.
type nilClient struct{ modulepb.ModuleServiceClient }

func payload(p string) *router.Message {
	return &router.Message{To: "f.b.n:in", Payload: []byte(p)}
}
