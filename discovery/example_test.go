package discovery_test

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

// openCatalog opens a catalog in a new directory, with two writers and a
// querier registered; cleanup closes it and removes the directory.
func openCatalog(ctx context.Context) (cat switchboard.Catalog, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "discovery-example-")
	if err != nil {
		return nil, nil, err
	}
	cat, err = switchboard.Open(ctx, "sqlite://"+filepath.Join(dir, "catalog.db"), switchboard.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	for _, in := range []switchboard.Instance{
		{ID: "w-1", Name: "writer", Type: switchboard.TypeWriter, Address: "10.0.0.1:50051", Capabilities: []string{switchboard.CapStorage}},
		{ID: "w-2", Name: "writer", Type: switchboard.TypeWriter, Address: "10.0.0.2:50051", Capabilities: []string{switchboard.CapStorage}},
		{ID: "q-1", Name: "querier", Type: switchboard.TypeQuerier, Address: "10.0.0.3:50054", Capabilities: []string{switchboard.CapQueryExecution}},
	} {
		if _, err := cat.Register(ctx, in); err != nil {
			cat.Close()
			os.RemoveAll(dir)
			return nil, nil, err
		}
	}
	return cat, func() { cat.Close(); os.RemoveAll(dir) }, nil
}

// Lookups by capability, name and type are served from memory; picks
// spread calls over the members of a capability.
func ExampleNew() {
	ctx := context.Background()
	cat, cleanup, err := openCatalog(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cleanup()

	cache, err := discovery.New(ctx, cat, discovery.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cache.Close()

	for _, in := range cache.ByCapability(switchboard.CapStorage) {
		fmt.Println(in.ID, in.Address)
	}
	fmt.Println(cache.Count(switchboard.Query{Type: switchboard.TypeQuerier}), "querier")
	a, _ := cache.PickRoundRobin(switchboard.CapStorage)
	b, _ := cache.PickRoundRobin(switchboard.CapStorage)
	fmt.Println("round robin visits both:", a.ID != b.ID)
	stale, _ := cache.Stale()
	fmt.Println("stale:", stale)
	// Output:
	// w-1 10.0.0.1:50051
	// w-2 10.0.0.2:50051
	// 1 querier
	// round robin visits both: true
	// stale: false
}

// Subscribe signals each new version of the cache: wait on it for a
// change instead of polling.
func ExampleCache_Subscribe() {
	ctx := context.Background()
	cat, cleanup, err := openCatalog(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cleanup()
	cache, err := discovery.New(ctx, cat, discovery.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cache.Close()
	changed := make(chan struct{}, 1)
	defer cache.Subscribe(func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	})()

	cat.Deregister(ctx, "w-1")
	for len(cache.ByCapability(switchboard.CapStorage)) != 1 {
		<-changed
	}
	in, _ := cache.PickRandom(switchboard.CapStorage)
	fmt.Println(in.ID)
	// Output: w-2
}

// A Picker spreads calls by weight: w-2, registered with weight 300, gets
// three picks in four, smoothly, as nginx's weighted round robin does.
func ExampleCache_NewPicker() {
	ctx := context.Background()
	cat, cleanup, err := openCatalog(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cleanup()
	if _, err := cat.Register(ctx, switchboard.Instance{ID: "w-2", Name: "writer", Type: switchboard.TypeWriter,
		Address: "10.0.0.2:50051", Capabilities: []string{switchboard.CapStorage}, Weight: 300}); err != nil {
		fmt.Println(err)
		return
	}
	cache, err := discovery.New(ctx, cat, discovery.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cache.Close()

	p, err := cache.NewPicker(switchboard.Query{Capability: switchboard.CapStorage}, discovery.PickOptions{
		Policy: discovery.WeightedRoundRobin,
		Zone:   discovery.PreferZone("eu-1", 2), // no instance is in eu-1: all of them
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for range 8 {
		in, _ := p.Pick()
		fmt.Print(in.ID, " ")
	}
	fmt.Println()
	// Output: w-2 w-2 w-1 w-2 w-2 w-2 w-1 w-2
}
