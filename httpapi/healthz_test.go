package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
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

// failingNow is a catalog whose clock read fails with err.
type failingNow struct {
	switchboard.Catalog
	err error
}

func (f failingNow) Now(context.Context) (time.Time, error) { return time.Time{}, f.err }

// TestHealthzCodes: the detail of /healthz (with the token, or none
// configured) has the code any endpoint gives the catalog's error: a
// missing catalog is no_catalog, a busy one busy (with Retry-After), any
// other failure unavailable. A request without the configured token still
// gets the status alone.
func TestHealthzCodes(t *testing.T) {
	const token = "healthz-token"
	for _, tc := range []struct {
		err        error
		code       string
		retryAfter bool
	}{
		{fmt.Errorf("%w at /data/sb.db (nothing has registered there yet)", switchboard.ErrNoCatalog), httpapi.CodeNoCatalog, false},
		{fmt.Errorf("sqlite: gave up after waiting 5s for the write lock: %w", switchboard.ErrBusy), httpapi.CodeBusy, true},
		{errors.New(leakyError), httpapi.CodeUnavailable, false},
		// An error the API answers with another status elsewhere is
		// still the catalog failing here.
		{fmt.Errorf("odd: %w", switchboard.ErrNotFound), httpapi.CodeUnavailable, false},
	} {
		for _, tok := range []string{token, ""} {
			s := serveOn(t, failingNow{testkit.OpenSQLite(t), tc.err}, httpapi.Options{Token: tok, ReapInterval: -1})
			hdr := []string{}
			if tok != "" {
				code, b := call(t, "GET", s.url+"/healthz", nil)
				if code != 503 || strings.TrimSpace(string(b)) != `{"status":"unavailable"}` {
					t.Errorf("%v: healthz without the token: %d %s; want 503 with the status alone", tc.err, code, b)
				}
				hdr = []string{"Authorization", "Bearer " + tok}
			}
			resp := get(t, s.url+"/healthz", hdr...)
			var body httpapi.ErrorBody
			json.NewDecoder(resp.Body).Decode(&body)
			resp.Body.Close()
			if resp.StatusCode != 503 || body.Code != tc.code || !strings.Contains(body.Error, tc.err.Error()) {
				t.Errorf("%v (token %q): healthz %d %+v; want 503 with code %q and the error", tc.err, tok, resp.StatusCode, body, tc.code)
			}
			ra := resp.Header.Get("Retry-After")
			if n, err := strconv.Atoi(ra); tc.retryAfter != (err == nil && n >= 1 && n <= 10) || (!tc.retryAfter && ra != "") {
				t.Errorf("%v (token %q): Retry-After %q; want a few seconds: %v", tc.err, tok, ra, tc.retryAfter)
			}
		}
	}
}

// get does one GET with headers (name, value, …) and returns the response,
// its body unread.
func get(t *testing.T, url string, hdr ...string) *http.Response {
	t.Helper()
	return request(t, "GET", url, nil, hdr...)
}
