package grpcwire

import (
	"context"
	"strings"
	"testing"

	"github.com/switchboard-io/switchboard/grpcwire/modulepb"
	"github.com/switchboard-io/switchboard/router"
)

// TestNilInputsDoNotPanic: ToStatus(nil) is nil (as FromStatus(nil) is),
// also for a typed nil *router.Error, NewServer refuses a nil handler, and
// Call refuses a nil message with a permanent error instead of panicking.
func TestNilInputsDoNotPanic(t *testing.T) {
	if err := ToStatus(nil); err != nil {
		t.Fatalf("ToStatus(nil) = %v", err)
	}
	var typed *router.Error
	if err := ToStatus(typed); err != nil {
		t.Fatalf("ToStatus((*router.Error)(nil)) = %v", err)
	}
	if _, err := NewServer(nil, ServerOptions{}); err == nil {
		t.Fatal("NewServer(nil) accepted a server that would fail every call")
	}
	cc := startServer(t, router.Echo)
	_, err := Call(context.Background(), modulepb.NewModuleServiceClient(cc), nil)
	if e := router.AsError(err); e == nil || e.Retryable {
		t.Fatalf("Call(nil) = %v, want a permanent error", err)
	}
	// A nil client is an error too (it used to be a nil dereference).
	_, err = Call(context.Background(), nil, &router.Message{To: "f.b.n:in"})
	if e := router.AsError(err); e == nil || e.Retryable || !strings.Contains(e.Message, "no client") {
		t.Fatalf("Call(nil client) = %v, want a permanent error saying there is no client", err)
	}
}

// TestTypedNilHandlerErrorIsNoError: a handler returning a nil
// *router.Error as its error (a non-nil interface) succeeded, as ToStatus
// reads it; the server used to dereference it and answer with a
// "handler panicked" internal error.
func TestTypedNilHandlerErrorIsNoError(t *testing.T) {
	cc := startServer(t, func(ctx context.Context, m *router.Message) ([]byte, error) {
		var e *router.Error
		return []byte("ok"), e
	})
	out, err := Call(context.Background(), modulepb.NewModuleServiceClient(cc), &router.Message{To: "f.b.n:in"})
	if err != nil || string(out) != "ok" {
		t.Fatalf("Call = %q, %v; want \"ok\"", out, err)
	}
}

// TestNilListenerIsAnError: Serve, ServeEcho and Server.Serve refuse a nil
// listener with an error; they used to crash the process from a goroutine
// (grpc-go dereferences it, and Serve logged lis.Addr()).
func TestNilListenerIsAnError(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Serve(ctx, nil, router.Echo, ServerOptions{}); err == nil || !strings.Contains(err.Error(), "listener") {
		t.Fatalf("Serve(nil listener) = %v; want an error about the listener", err)
	}
	if err := ServeEcho(ctx, nil, "echo", ServerOptions{}); err == nil || !strings.Contains(err.Error(), "listener") {
		t.Fatalf("ServeEcho(nil listener) = %v; want an error about the listener", err)
	}
	s, err := NewServer(router.Echo, ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(nil); err == nil || !strings.Contains(err.Error(), "listener") {
		t.Fatalf("Server.Serve(nil) = %v; want an error about the listener", err)
	}
}
