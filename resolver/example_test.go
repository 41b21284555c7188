package resolver_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/discovery"
	"github.com/switchboard-io/switchboard/grpcwire"
	"github.com/switchboard-io/switchboard/resolver"
	"github.com/switchboard-io/switchboard/router"
	_ "github.com/switchboard-io/switchboard/sqlite" // the embedded default backend
)

// Any grpc-go client dials "switchboard:///<capability or name>" and is
// balanced over the live instances the discovery cache holds.
func ExampleNewBuilder() {
	quiet := slog.New(slog.DiscardHandler)
	dir, _ := os.MkdirTemp("", "resolver-example-")
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cat, err := switchboard.Open(ctx, "sqlite://"+filepath.Join(dir, "catalog.db"), switchboard.Options{Logger: quiet})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cat.Close()

	// A gRPC server (with the standard health service) registered with
	// the capability "query_execution".
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	served := make(chan error, 1)
	go func() { served <- grpcwire.Serve(ctx, ln, router.Echo, grpcwire.ServerOptions{Logger: quiet}) }()
	defer func() { cancel(); <-served }()
	reg, err := switchboard.Bootstrap(ctx, cat, switchboard.Instance{Name: "querier", Type: switchboard.TypeQuerier,
		Address: ln.Addr().String(), Capabilities: []string{switchboard.CapQueryExecution}}, switchboard.BootstrapOptions{Logger: quiet})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer reg.Close()

	cache, err := discovery.New(ctx, cat, discovery.Options{Logger: quiet})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cache.Close()
	cc, err := grpc.NewClient("switchboard:///query_execution",
		grpc.WithResolvers(resolver.NewBuilder(cache, resolver.Options{Logger: quiet})),
		grpc.WithDefaultServiceConfig(resolver.RoundRobin),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cc.Close()
	res, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
	fmt.Println(res.GetStatus(), err)
	// Output: SERVING <nil>
}
