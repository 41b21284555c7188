package pool

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard/grpcwire"
	"github.com/switchboard-io/switchboard/router"
	"github.com/switchboard-io/switchboard/router/routertest"
)

// TestRouterSuite runs the router's conformance suite over the gRPC wire
// (the NATS wires run it in package natswire).
func TestRouterSuite(t *testing.T) {
	p := New(Options{Logger: quiet})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	p.Start(ctx)
	routertest.Run(t, routertest.Fabric{
		Wire: p,
		Serve: func(t testing.TB, module string, h router.Handler) {
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			sctx, stop := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				_ = grpcwire.Serve(sctx, lis, h, grpcwire.ServerOptions{Logger: quiet})
			}()
			t.Cleanup(func() {
				// Forget the module with its server: a stale registration
				// would share its connection with a later module the kernel
				// gives the same port.
				p.Deregister(module)
				stop()
				select {
				case <-done:
				case <-time.After(30 * time.Second):
					t.Error("the gRPC server did not stop")
				}
			})
			p.Register(module, lis.Addr().String())
		},
	})
}
