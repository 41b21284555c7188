package httpapi_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/httpapi"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

// clockless is a catalog whose clock cannot be read, with an error that
// names what an anonymous prober must not learn.
type clockless struct{ switchboard.Catalog }

const leakyError = "dial tcp db-7.internal.example:5432 (user=sb dbname=catalog): SELECT now(): connection refused"

func (clockless) Now(context.Context) (time.Time, error) { return time.Time{}, errors.New(leakyError) }

// TestHealthzDetailNeedsToken: /healthz needs no token, but with a Token
// configured only a request that carries it hears why the catalog failed
// (hosts, DSN fragments, SQL); any other gets the status alone. Without a
// Token configured, everyone gets the detail, as before.
func TestHealthzDetailNeedsToken(t *testing.T) {
	const token = "healthz-token"
	s := serveOn(t, clockless{testkit.OpenSQLite(t)}, httpapi.Options{Token: token, ReapInterval: -1})
	for _, hdr := range [][]string{nil, {"Authorization", "Bearer wrong"}, {"Authorization", "Basic " + token}} {
		code, b := call(t, "GET", s.url+"/healthz", nil, hdr...)
		if code != 503 || strings.TrimSpace(string(b)) != `{"status":"unavailable"}` {
			t.Errorf("healthz with %q: %d %s; want 503 with the status alone", hdr, code, b)
		}
	}
	code, b := call(t, "GET", s.url+"/healthz", nil, "Authorization", "Bearer "+token)
	expectError(t, code, b, 503, "unavailable", "")
	if !strings.Contains(string(b), leakyError) {
		t.Errorf("healthz with the token: %s; want the catalog's error", b)
	}

	open := serveOn(t, clockless{testkit.OpenSQLite(t)}, httpapi.Options{ReapInterval: -1})
	code, b = call(t, "GET", open.url+"/healthz", nil)
	expectError(t, code, b, 503, "unavailable", "")
	if !strings.Contains(string(b), leakyError) {
		t.Errorf("healthz without a token configured: %s; want the catalog's error", b)
	}

	// A healthy catalog: 200 for everyone, token or not.
	ok := start(t, httpapi.Options{Token: token, ReapInterval: -1})
	if code, b := call(t, "GET", ok.url+"/healthz", nil); code != 200 || strings.TrimSpace(string(b)) != `{"status":"ok"}` {
		t.Errorf("healthz of a healthy server without the token: %d %s", code, b)
	}
}
