package grpcwire

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/switchboard-io/switchboard/grpcwire/modulepb"
	"github.com/switchboard-io/switchboard/internal/testkit"
	"github.com/switchboard-io/switchboard/router"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// startServerOpts is startServer with options.
func startServerOpts(t *testing.T, h router.Handler, opts ServerOptions) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, lis, h, opts) }()
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

// TestHandlerPanicIsAnError: a panicking handler fails its call with a
// permanent internal error and the server goes on serving.
func TestHandlerPanicIsAnError(t *testing.T) {
	cc := startServerOpts(t, func(ctx context.Context, m *router.Message) ([]byte, error) {
		if string(m.Payload) == "panic" {
			panic("boom")
		}
		return m.Payload, nil
	}, ServerOptions{Logger: quiet})
	c := modulepb.NewModuleServiceClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := Call(ctx, c, &router.Message{To: "f.m.n:in", Payload: []byte("panic")})
	var e *router.Error
	if !errors.As(err, &e) || e.Code != router.CodeInternal || e.Retryable || e.Message != "handler panicked: boom" {
		t.Fatalf("panic: %#v", err)
	}
	if out, err := Call(ctx, c, &router.Message{To: "f.m.n:in", Payload: []byte("after")}); err != nil || string(out) != "after" {
		t.Fatalf("after the panic: %q %v", out, err)
	}
}

// TestMaxConcurrentStreams: no more calls run at once on one connection
// than the server allows; the others wait and then succeed.
func TestMaxConcurrentStreams(t *testing.T) {
	var inFlight, maxInFlight atomic.Int64
	release := make(chan struct{})
	cc := startServerOpts(t, func(ctx context.Context, m *router.Message) ([]byte, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			old := maxInFlight.Load()
			if n <= old || maxInFlight.CompareAndSwap(old, n) {
				break
			}
		}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return m.Payload, nil
	}, ServerOptions{Logger: quiet, MaxConcurrentStreams: 2})
	c := modulepb.NewModuleServiceClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := Call(ctx, c, &router.Message{To: "f.m.n:in", Payload: []byte("x")})
			errs <- err
		}()
	}
	testkit.WaitUntil(t, "two calls in the handler", func() bool { return inFlight.Load() == 2 })
	// Give the other four every chance to (wrongly) start.
	time.Sleep(200 * time.Millisecond)
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if m := maxInFlight.Load(); m != 2 {
		t.Fatalf("%d calls ran at once, the limit is 2", m)
	}
}

func TestReflectionCanBeDisabled(t *testing.T) {
	cc := startServerOpts(t, router.Echo, ServerOptions{Logger: quiet, DisableReflection: true})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := reflectionpb.NewServerReflectionClient(cc).ServerReflectionInfo(ctx)
	if err == nil {
		// Send reports io.EOF once the server has ended the stream; Recv
		// then returns the status.
		_ = stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}})
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("reflection with DisableReflection: %v, want Unimplemented", err)
	}
	// The module service itself still answers.
	if out, err := Call(ctx, modulepb.NewModuleServiceClient(cc), &router.Message{To: "f.m.n:in", Payload: []byte("x")}); err != nil || string(out) != "x" {
		t.Fatalf("call: %q %v", out, err)
	}
}
