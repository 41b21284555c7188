// Command services is a pair of services that register in a catalog and
// find each other: "quotes", an HTTP service that registers itself with the
// capability "quotes", and "web", which looks the capability up in its
// discovery cache, calls the instance it picks, and sees it leave when
// quotes shuts down.
//
//	go run ./examples/services [-dsn sqlite://.data/switchboard.db]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/discovery"
	_ "github.com/switchboard-io/switchboard/postgres" // postgres:// DSNs
	_ "github.com/switchboard-io/switchboard/remote"   // http:// DSNs: a switchboard serve
	_ "github.com/switchboard-io/switchboard/sqlite"   // sqlite:// DSNs, the default
)

func main() {
	dsn := flag.String("dsn", switchboard.DefaultDSN, "catalog DSN")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, *dsn, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "services:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, dsn string, out io.Writer) error {
	quiet := slog.New(slog.DiscardHandler)
	cat, err := switchboard.Open(ctx, dsn, switchboard.Options{Logger: quiet})
	if err != nil {
		return err
	}
	defer cat.Close()

	// web's view of the catalog: every change is pushed to it, and
	// changed is signalled after each one.
	cache, err := discovery.New(ctx, cat, discovery.Options{Logger: quiet})
	if err != nil {
		return err
	}
	defer cache.Close()
	changed := make(chan struct{}, 1)
	defer cache.Subscribe(func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	})()

	// quotes: an HTTP server on a free port, registered with its address.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "Simplicity is prerequisite for reliability.")
	})}
	go srv.Serve(ln)
	defer srv.Close()
	reg, err := switchboard.Bootstrap(ctx, cat, switchboard.Instance{
		Name:         "quotes",
		Type:         "api",
		Address:      ln.Addr().String(),
		Capabilities: []string{"quotes"},
		TTL:          5 * time.Second,
	}, switchboard.BootstrapOptions{Logger: quiet})
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "quotes: registered")

	// web: wait until the capability is served, pick an instance, call it.
	in, err := waitFor(ctx, changed, func() (switchboard.Instance, bool) { return cache.PickRoundRobin("quotes") })
	if err != nil {
		return err
	}
	resp, err := http.Get("http://" + in.Address + "/")
	if err != nil {
		return err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "web: found %s (%s) and called it: %s\n", in.Name, in.Type, body)

	// quotes shuts down: Close deregisters, and web's cache drops it at once.
	if err := reg.Close(); err != nil {
		return err
	}
	fmt.Fprintln(out, "quotes: deregistered")
	if _, err := waitFor(ctx, changed, func() (struct{}, bool) { return struct{}{}, len(cache.ByCapability("quotes")) == 0 }); err != nil {
		return err
	}
	fmt.Fprintln(out, "web: no instance serves quotes any more")
	return nil
}

// waitFor returns what check finds once it finds it, checking again after
// each change of the cache, until ctx ends.
func waitFor[T any](ctx context.Context, changed <-chan struct{}, check func() (T, bool)) (T, error) {
	for {
		if v, ok := check(); ok {
			return v, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			var zero T
			return zero, errors.Join(errors.New("the catalog did not show the change"), ctx.Err())
		}
	}
}
