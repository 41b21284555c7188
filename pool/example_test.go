package pool_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/grpcwire"
	"github.com/switchboard-io/switchboard/pool"
	"github.com/switchboard-io/switchboard/router"
	_ "github.com/switchboard-io/switchboard/sqlite" // the embedded default backend
)

// A module serves the gRPC wire and registers its address; a router in
// another module sends to it by node name through the pool, which follows
// the catalog's modules.
func ExampleConnect() {
	quiet := slog.New(slog.DiscardHandler)
	dir, _ := os.MkdirTemp("", "pool-example-")
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cat, err := switchboard.Open(ctx, "sqlite://"+filepath.Join(dir, "catalog.db"), switchboard.Options{Logger: quiet})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cat.Close()

	// The module "greeter": its router's handlers behind a gRPC server.
	greeter, _ := router.New(router.Options{Module: "greeter", Logger: quiet})
	greeter.HandleDefault(func(_ context.Context, m *router.Message) ([]byte, error) {
		return []byte("hello, " + string(m.Payload)), nil
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	served := make(chan error, 1)
	go func() { served <- grpcwire.Serve(ctx, ln, greeter.Dispatch, grpcwire.ServerOptions{Logger: quiet}) }()
	defer func() { cancel(); <-served }()
	reg, err := switchboard.Bootstrap(ctx, cat, switchboard.Instance{Name: "greeter", Type: pool.ModuleType, Address: ln.Addr().String()},
		switchboard.BootstrapOptions{Logger: quiet})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer reg.Close()

	// The sender: Connect returns once the catalog's current modules are known.
	pl, err := pool.Connect(ctx, cat, pool.Options{Logger: quiet})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pl.Close()
	client, _ := router.New(router.Options{Wire: pl, Logger: quiet})
	out, err := client.Send(ctx, &router.Message{To: "flow.greeter.node:in", Payload: []byte("grpc")})
	fmt.Println(string(out), err)
	// Output: hello, grpc <nil>
}
