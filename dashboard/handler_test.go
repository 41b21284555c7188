package dashboard_test

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/switchboard-io/switchboard/dashboard"
)

// TestHandler: the page and its assets with their types and security
// headers; 404 for what is not there; 405 for anything but GET and HEAD.
func TestHandler(t *testing.T) {
	h := dashboard.Handler()
	for _, c := range []struct {
		method, path string
		code         int
		ctype, body  string
	}{
		{"GET", "/", 200, "text/html", `<script src="app.js"`},
		{"GET", "/app.js", 200, "javascript", `"/v1/watch?all=true"`},
		{"GET", "/app.css", 200, "text/css", "prefers-color-scheme"},
		{"GET", "/favicon.svg", 200, "image/svg+xml", "<svg"},
		{"HEAD", "/", 200, "text/html", ""},
		{"GET", "/nope.js", 404, "", ""},
		{"POST", "/", 405, "", ""},
		{"DELETE", "/app.js", 405, "", ""},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(c.method, c.path, nil))
		if rec.Code != c.code {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, rec.Code, c.code)
			continue
		}
		if c.code == 405 && rec.Header().Get("Allow") != "GET, HEAD" {
			t.Errorf("%s %s: Allow %q", c.method, c.path, rec.Header().Get("Allow"))
		}
		if c.code != 200 {
			continue
		}
		if ct := rec.Header().Get("Content-Type"); !strings.Contains(ct, c.ctype) {
			t.Errorf("%s %s: Content-Type %q, want %q", c.method, c.path, ct, c.ctype)
		}
		if !strings.Contains(rec.Body.String(), c.body) {
			t.Errorf("%s %s: body lacks %q", c.method, c.path, c.body)
		}
		csp := rec.Header().Get("Content-Security-Policy")
		if !strings.Contains(csp, "default-src 'self'") || !strings.Contains(csp, "connect-src 'self'") {
			t.Errorf("%s %s: CSP %q", c.method, c.path, csp)
		}
		if rec.Header().Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s %s: no nosniff", c.method, c.path)
		}
	}
}
