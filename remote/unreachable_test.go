package remote_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/remote"
)

// TestUnreachableServer: a request or a watch to a server that refuses
// connections is switchboard.ErrUnreachable and remote.ErrUnavailable (a
// retry may cure it), naming the server; a request the caller cancelled is
// neither.
func TestUnreachableServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now: connections are refused
	c, err := remote.Open(t.Context(), base, remote.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, switchboard.ErrUnreachable) || !errors.Is(err, remote.ErrUnavailable) ||
			!strings.Contains(err.Error(), base) || !strings.Contains(err.Error(), "cannot reach the catalog") {
			t.Fatalf("%s: %v (unreachable %v, unavailable %v)", what, err,
				errors.Is(err, switchboard.ErrUnreachable), errors.Is(err, remote.ErrUnavailable))
		}
	}
	_, err = c.Get(t.Context(), "x")
	check("Get", err)
	_, err = c.Watch(t.Context(), switchboard.Query{})
	check("Watch", err)

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = c.Get(ctx, "x")
	if err == nil || errors.Is(err, switchboard.ErrUnreachable) || errors.Is(err, remote.ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Get: %v", err)
	}
}

// TestTLSFailureIsNotUnreachable: a server whose certificate the client
// does not trust, or a plain HTTP server behind an https:// DSN, is
// reached: its error is neither ErrUnreachable nor ErrUnavailable, since
// no retry cures it.
func TestTLSFailureIsNotUnreachable(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) })
	untrusted := httptest.NewTLSServer(h)
	defer untrusted.Close()
	plain := httptest.NewServer(h)
	defer plain.Close()
	for name, base := range map[string]string{
		"unknown CA":          untrusted.URL,
		"https to plain HTTP": strings.Replace(plain.URL, "http://", "https://", 1),
	} {
		t.Run(name, func(t *testing.T) {
			c, err := remote.Open(t.Context(), base, remote.Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_, err = c.Get(t.Context(), "x")
			if err == nil || errors.Is(err, switchboard.ErrUnreachable) || errors.Is(err, remote.ErrUnavailable) || !strings.Contains(err.Error(), base) {
				t.Fatalf("Get: %v (unreachable %v, unavailable %v)", err,
					errors.Is(err, switchboard.ErrUnreachable), errors.Is(err, remote.ErrUnavailable))
			}
		})
	}
}
