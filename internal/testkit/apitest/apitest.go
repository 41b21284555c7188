// Package apitest runs the HTTP API (httpapi) for tests: a server over a
// catalog on a real listener at 127.0.0.1:0, stopped at cleanup. Only
// tests import it.
package apitest

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/httpapi"
)

// Serve runs an API server over cat with opts (a nil Logger discards the
// logs) and returns its http:// URL and the server. At cleanup the server
// is closed and shut down within 5 s; cat stays open.
func Serve(t testing.TB, cat switchboard.Catalog, opts httpapi.Options) (string, *httpapi.Server) {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	api := httpapi.New(cat, opts)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	t.Cleanup(func() {
		api.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(ctx)
	})
	return "http://" + ln.Addr().String(), api
}
