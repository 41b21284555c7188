package grpcwire

import (
	"context"
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
}
