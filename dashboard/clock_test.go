package dashboard_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/switchboard-io/switchboard/dashboard"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

// skewJS runs before app.js (a file: the page's Content-Security-Policy
// refuses inline scripts): the browser's clock is an hour ahead of the
// catalog's, and the page's periodic (60 s) re-read of the catalog's clock
// is switched off.
const skewJS = `(() => {
  const realNow = Date.now;
  Date.now = () => realNow() + 3600e3;
  const si = window.setInterval;
  window.setInterval = (f, ms, ...a) => ms === 60000 ? 0 : si(f, ms, ...a);
})();
`

// skewedUI is dashboard.Handler with skewJS loaded before app.js.
func skewedUI(t *testing.T) http.Handler {
	h := dashboard.Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/skew.js":
			w.Header().Set("Content-Type", "text/javascript")
			io.WriteString(w, skewJS)
		case "/":
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.Header().Del("Content-Length")
			body := rec.Body.String()
			if !strings.Contains(body, `<script src="app.js"`) {
				t.Errorf("index.html has no app.js script to put skew.js before")
			}
			w.WriteHeader(rec.Code)
			io.WriteString(w, strings.Replace(body, `<script src="app.js"`, `<script src="skew.js"></script><script src="app.js"`, 1))
		default:
			h.ServeHTTP(w, r)
		}
	})
}

// TestDashboardClockAfterToken: the page measures the catalog's clock
// before it streams, and shows heartbeat ages on that clock. Against a
// server with a token, /v1/now answers 401 until the token is entered; the
// clock must be read again then, not only at the next periodic re-read a
// minute later (switched off here, so only that read can correct it).
func TestDashboardClockAfterToken(t *testing.T) {
	s := &server{t: t, cat: testkit.OpenSQLite(t), dsn: "sqlite:///var/lib/switchboard/catalog.db", addr: "127.0.0.1:0", token: "s3cret", ui: skewedUI(t)}
	s.start()
	t.Cleanup(s.stop)
	s.register(map[string]any{"id": "api-1", "name": "api", "type": "router", "address": "127.0.0.1:9001", "ttl": "30m"})
	ctx := browser(t)
	do(t, ctx, "open the page and see the token form", chromedp.Navigate(s.url()+"/"), chromedp.WaitVisible(chromedp.ID("token")))
	waitJS(t, ctx, "the browser's clock an hour ahead", `Date.now() - performance.timeOrigin - performance.now() > 3500e3`)
	do(t, ctx, "enter the token", chromedp.SendKeys(chromedp.ID("token"), "s3cret"+kb.Enter))
	waitJS(t, ctx, "the stream to be live with the token", `document.getElementById("conn").dataset.state === "live"`)
	// Registered moments ago by the catalog's clock: an age in seconds or
	// minutes, not "1 h 0 m" (the browser's own clock).
	waitJS(t, ctx, "the heartbeat age on the catalog's clock",
		`(() => { const td = document.querySelector('tr.inst[data-id="api-1"] td.seen'); return !!td && / s$/.test(td.textContent) && !/ h /.test(td.textContent); })()`)
}
