package remote_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/httpapi"
	"github.com/switchboard-io/switchboard/remote"
)

// serveCounting runs an API server over cat on 127.0.0.1:0 and returns its
// URL and the count of the instance writes it is sent (PUT and DELETE
// under /v1/instances).
func serveCounting(t *testing.T, cat switchboard.Catalog) (string, *atomic.Int64) {
	t.Helper()
	api := httpapi.New(cat, httpapi.Options{Logger: quiet, ReapInterval: -1})
	writes := new(atomic.Int64)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/instances") {
			writes.Add(1)
		}
		api.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		api.Close()
		hs.Close()
	})
	return hs.URL, writes
}

// toldTTL is what the catalog tells of its default TTL, if it tells.
func toldTTL(c switchboard.Catalog) (time.Duration, bool) {
	d, ok := c.(switchboard.TTLDefaulter)
	if !ok {
		return 0, false
	}
	return d.DefaultTTL(), true
}

// TestBootstrapChecksServerDefaultTTL: over a server whose catalog tells
// its default TTL, the remote catalog tells it too, and a Bootstrap whose
// heartbeat interval does not fit it is refused before anything is
// written: the server is sent no write, and the row its id held is kept.
// Over a server that does not say (its catalog does not tell; to the
// client, the same as a server older than it), the remote catalog tells
// zero and Bootstrap checks after the write, which it undoes, as before.
func TestBootstrapChecksServerDefaultTTL(t *testing.T) {
	for _, tc := range []struct {
		name   string
		hide   bool          // the server's catalog does not tell its default TTL
		told   time.Duration // what the remote catalog tells
		writes int64         // the refused Bootstraps' writes
	}{
		{"server tells its default TTL", false, 2 * time.Second, 0},
		{"server does not say", true, 0, 4}, // PUT, PUT back; PUT, DELETE
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			sq, err := switchboard.Open(ctx, "sqlite://"+t.TempDir()+"/c.db",
				switchboard.Options{DefaultTTL: 2 * time.Second, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { sq.Close() })
			served := sq
			if tc.hide {
				served = struct{ switchboard.Catalog }{sq} // only the Catalog methods
			}
			url, writes := serveCounting(t, served)
			c := client(t, url, remote.Config{})
			if d, ok := toldTTL(c); !ok || d != tc.told {
				t.Fatalf("the remote catalog tells the default TTL %v (TTLDefaulter: %v), want %v", d, ok, tc.told)
			}

			before := switchboard.Instance{ID: "fixed", Name: "kept", Type: switchboard.TypeWriter, Address: "127.0.0.1:4317", TTL: time.Hour, Version: "1"}
			if _, err := sq.Register(ctx, before); err != nil {
				t.Fatal(err)
			}
			again := before
			again.Name, again.TTL, again.Version = "other-name", 0, "2" // the default TTL: 2 s
			if _, err := switchboard.Bootstrap(ctx, c, again, switchboard.BootstrapOptions{HeartbeatInterval: 3 * time.Second, Logger: quiet}); !errors.Is(err, switchboard.ErrInvalid) ||
				!strings.Contains(err.Error(), "HeartbeatInterval") {
				t.Fatalf("Bootstrap with a heartbeat longer than half the default TTL: %v", err)
			}
			got, err := sq.Get(ctx, "fixed")
			if err != nil || got.Name != "kept" || got.TTL != time.Hour || got.Version != "1" {
				t.Fatalf("the row the id held before: %+v, %v", got, err)
			}
			fresh := before
			fresh.ID, fresh.Name, fresh.TTL = "new-id", "fresh", 0
			if _, err := switchboard.Bootstrap(ctx, c, fresh, switchboard.BootstrapOptions{HeartbeatInterval: 3 * time.Second, Logger: quiet}); !errors.Is(err, switchboard.ErrInvalid) {
				t.Fatalf("Bootstrap: %v", err)
			}
			if _, err := sq.Get(ctx, "new-id"); !errors.Is(err, switchboard.ErrNotFound) {
				t.Fatalf("a refused Bootstrap left its row: %v", err)
			}
			if n := writes.Load(); n != tc.writes {
				t.Fatalf("the server was sent %d writes by the refused Bootstraps, want %d", n, tc.writes)
			}
		})
	}
}

// TestDefaultTTLNotSaid: a server that cannot be asked, or whose
// default_ttl is not a positive duration, makes the remote catalog tell
// zero (not known), never a default it was not given.
func TestDefaultTTLNotSaid(t *testing.T) {
	for name, body := range map[string]string{
		"absent":       `{"backend":"sqlite","healthy":true}`,
		"not duration": `{"default_ttl":"soon"}`,
		"negative":     `{"default_ttl":"-2s"}`,
		"zero":         `{"default_ttl":"0s"}`,
		"not JSON":     `<html>`,
	} {
		t.Run(name, func(t *testing.T) {
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Write([]byte(body))
			}))
			defer hs.Close()
			if d, ok := toldTTL(client(t, hs.URL, remote.Config{})); !ok || d != 0 {
				t.Fatalf("DefaultTTL() = %v (TTLDefaulter: %v), want 0", d, ok)
			}
		})
	}
	t.Run("unreachable", func(t *testing.T) {
		hs := httptest.NewServer(http.NotFoundHandler())
		url := hs.URL
		hs.Close()
		if d, ok := toldTTL(client(t, url, remote.Config{})); !ok || d != 0 {
			t.Fatalf("DefaultTTL() = %v (TTLDefaulter: %v), want 0", d, ok)
		}
	})
}
