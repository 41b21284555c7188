package switchboard_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/discovery"
	_ "github.com/switchboard-io/switchboard/sqlite" // the embedded default backend
)

// A querier registers itself and keeps its registration alive; a router
// finds it by capability through the discovery cache.
func Example() {
	dir, _ := os.MkdirTemp("", "switchboard-example-")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	cat, err := switchboard.Open(ctx, "sqlite://"+filepath.Join(dir, "catalog.db"), switchboard.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cat.Close()

	// The querier: one call registers, heartbeats and reaps; Close deregisters.
	reg, err := switchboard.Bootstrap(ctx, cat, switchboard.Instance{
		Name:         "querier",
		Type:         switchboard.TypeQuerier,
		Address:      "127.0.0.1:50054",
		Capabilities: []string{switchboard.CapQueryExecution},
	}, switchboard.BootstrapOptions{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer reg.Close()

	// The router: lookups are served from memory, kept current by pushes.
	cache, err := discovery.New(ctx, cat, discovery.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cache.Close()
	if in, ok := cache.PickRoundRobin(switchboard.CapQueryExecution); ok {
		fmt.Println(in.Name, in.Address)
	}
	// Output: querier 127.0.0.1:50054
}
