package remote_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/httpapi"
	_ "github.com/switchboard-io/switchboard/remote"
)

// Example serves a SQLite catalog over HTTP and uses it through an
// http:// DSN, exactly as any other catalog.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "switchboard-example-")
	defer os.RemoveAll(dir)
	quiet := switchboard.Options{Logger: slog.New(slog.DiscardHandler)}

	// The server side: `switchboard serve` does this with a real listener.
	db, err := switchboard.Open(ctx, "sqlite://"+filepath.Join(dir, "catalog.db"), quiet)
	if err != nil {
		panic(err)
	}
	defer db.Close()
	api := httpapi.New(db, httpapi.Options{Logger: quiet.Logger})
	defer api.Close()
	srv := httptest.NewServer(api)
	defer srv.Close()

	// The client side: any program, given the server's address.
	cat, err := switchboard.Open(ctx, srv.URL, quiet)
	if err != nil {
		panic(err)
	}
	defer cat.Close()
	reg, err := switchboard.Bootstrap(ctx, cat, switchboard.Instance{
		Name: "Querier", Type: switchboard.TypeQuerier, Address: "127.0.0.1:50054",
		Capabilities: []string{switchboard.CapQueryExecution},
	}, switchboard.BootstrapOptions{Logger: quiet.Logger})
	if err != nil {
		panic(err)
	}
	list, _ := cat.List(ctx, switchboard.Query{Capability: switchboard.CapQueryExecution})
	fmt.Println(len(list), list[0].Name, list[0].Address)
	reg.Close()
	list, _ = cat.List(ctx, switchboard.Query{})
	fmt.Println(len(list))
	// Output:
	// 1 querier 127.0.0.1:50054
	// 0
}
