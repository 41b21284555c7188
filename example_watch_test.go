package switchboard_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/switchboard-io/switchboard"
	_ "github.com/switchboard-io/switchboard/sqlite" // the embedded default backend
)

// A watch starts with the current set, then synced, then every change. A
// heartbeat is not a change; a deregistration is removed/deregistered.
func ExampleCatalog_watch() {
	dir, _ := os.MkdirTemp("", "switchboard-example-")
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cat, err := switchboard.Open(ctx, "sqlite://"+filepath.Join(dir, "catalog.db"), switchboard.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cat.Close()
	if _, err := cat.Register(ctx, switchboard.Instance{ID: "w-1", Name: "writer", Type: switchboard.TypeWriter,
		Address: "10.0.0.1:50051", Capabilities: []string{switchboard.CapStorage}}); err != nil {
		fmt.Println(err)
		return
	}

	events, err := cat.Watch(ctx, switchboard.Query{Capability: switchboard.CapStorage})
	if err != nil {
		fmt.Println(err)
		return
	}
	next := func() switchboard.Event { return <-events }
	fmt.Println(next().Kind, next().Kind) // the current set, then synced

	cat.Register(ctx, switchboard.Instance{ID: "w-2", Name: "writer", Type: switchboard.TypeWriter,
		Address: "10.0.0.2:50051", Capabilities: []string{switchboard.CapStorage}})
	cat.Heartbeat(ctx, "w-1", "w-2") // no event
	cat.Deregister(ctx, "w-1")
	for range 2 {
		ev := next()
		fmt.Println(ev.Kind, ev.Reason, ev.Instance.ID)
	}
	// Output:
	// added synced
	// added  w-2
	// removed deregistered w-1
}

// Bootstrap registers, heartbeats and reaps until Close, which
// deregisters. Its heartbeat interval is derived from the TTL unless set.
func ExampleBootstrap() {
	dir, _ := os.MkdirTemp("", "switchboard-example-")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	cat, err := switchboard.Open(ctx, "sqlite://"+filepath.Join(dir, "catalog.db"), switchboard.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cat.Close()

	reg, err := switchboard.Bootstrap(ctx, cat, switchboard.Instance{
		Name:         "Billing API", // stored sanitised, as the TinySystems SDK does
		Type:         "api",
		Address:      "127.0.0.1:8081",
		Capabilities: []string{"payments"},
		TTL:          2 * time.Second, // heartbeats every 667ms: min(3s, TTL/3)
	}, switchboard.BootstrapOptions{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println(err)
		return
	}
	in := reg.Instance()
	fmt.Println(in.Name, in.TTL, switchboard.HeartbeatFor(in.TTL).Round(time.Millisecond))

	reg.Close()
	_, err = cat.Get(ctx, reg.ID())
	fmt.Println(errors.Is(err, switchboard.ErrNotFound))
	// Output:
	// billing-api 2s 667ms
	// true
}
