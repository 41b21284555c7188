package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/switchboard-io/switchboard/httpapi"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

// headless starts headless Chromium (Debian's, or SWITCHBOARD_CHROMIUM)
// with a fresh profile and returns a tab. Without a browser the test is
// skipped, unless CI or SWITCHBOARD_BROWSER_REQUIRED=1 asks for it.
func headless(t *testing.T) context.Context {
	t.Helper()
	noBrowser := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("CI") != "" || os.Getenv("SWITCHBOARD_BROWSER_REQUIRED") == "1" {
			t.Fatalf(format, args...)
		}
		t.Skipf(format+" (set CI or SWITCHBOARD_BROWSER_REQUIRED=1 to fail instead)", args...)
	}
	path := os.Getenv("SWITCHBOARD_CHROMIUM")
	if path == "" {
		path = "/usr/bin/chromium"
	}
	if _, err := os.Stat(path); err != nil {
		noBrowser("no browser: %v (apt-get install -y chromium)", err)
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()))
	ctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelTab(); cancelAlloc() })
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(ctx) }()
	select {
	case err := <-started:
		if err != nil {
			noBrowser("browser %s did not start: %v", path, err)
		}
	case <-time.After(60 * time.Second):
		noBrowser("browser %s did not start within 60 s", path)
	}
	return ctx
}

// seen records the answers a server gave to the requests of one path.
type seen struct {
	mu     sync.Mutex
	status map[string][]int // path -> statuses
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = 200
	}
	return r.ResponseWriter.Write(b)
}

func (s *seen) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w}
		h.ServeHTTP(rec, r)
		s.mu.Lock()
		s.status[r.URL.Path] = append(s.status[r.URL.Path], rec.code)
		s.mu.Unlock()
	})
}

func (s *seen) of(path string) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.status[path]...)
}

// TestBrowserCrossSiteWritesChangeNothing: a page of another origin, open
// in the user's real (headless) browser, sends the server on 127.0.0.1 —
// which has no token, as by default — a form POST that would reap every
// row and a no-cors text/plain fetch that would take a lease for 292
// years. Both reach the server and are refused; no row is gone and no
// lease taken.
func TestBrowserCrossSiteWritesChangeNothing(t *testing.T) {
	ctx := headless(t)
	cat := testkit.OpenSQLite(t)
	rec := &seen{status: map[string][]int{}}
	api := httpapi.New(cat, httpapi.Options{Logger: quietLog(), ReapInterval: -1})
	t.Cleanup(func() { api.Close() })
	target := httptest.NewServer(rec.wrap(validated(t, api)))
	t.Cleanup(target.Close)
	s := &srv{url: target.URL, cat: cat, api: api}
	body := instanceBody("victim")
	body["ttl"] = "10s"
	register(t, s, body)

	// The hostile page is served from another origin: localhost on
	// another port (another site than 127.0.0.1 to the browser).
	page := fmt.Sprintf(`<!doctype html><html><body>
<form id="f" method="POST" action="%[1]s/v1/reap?older_than=1us"><input name="x" value="1"></form>
<script>
fetch("%[1]s/v1/leases/acquire", {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"},
  body: JSON.stringify({name: "stolen", holder: "evil", ttl: "2562047h"})})
  .catch(() => {}).finally(() => document.getElementById("f").submit());
</script></body></html>`, target.URL)
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, page)
	}))
	t.Cleanup(evil.Close)
	evilURL := strings.Replace(evil.URL, "127.0.0.1", "localhost", 1)

	tctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(tctx, chromedp.Navigate(evilURL+"/")); err != nil {
		t.Fatalf("opening the hostile page: %v", err)
	}
	testkit.WaitUntil(t, "the page's two requests to reach the server", func() bool {
		return len(rec.of("/v1/reap")) > 0 && len(rec.of("/v1/leases/acquire")) > 0
	})
	for _, p := range []string{"/v1/reap", "/v1/leases/acquire"} {
		for _, code := range rec.of(p) {
			if code != http.StatusForbidden && code != http.StatusUnsupportedMediaType {
				t.Errorf("the cross-site request to %s was answered %d", p, code)
			}
		}
	}
	if n := len(listAll(t, s)); n != 1 {
		t.Fatalf("a cross-site form reaped rows: %d of 1 left", n)
	}
	if code, b := call(t, "GET", s.url+"/v1/leases", nil); code != 200 || string(b) != "[]\n" {
		t.Fatalf("a cross-site fetch took a lease: %d %s", code, b)
	}
}
