package dashboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/dashboard"
	"github.com/switchboard-io/switchboard/httpapi"
	"github.com/switchboard-io/switchboard/internal/testkit"
	_ "github.com/switchboard-io/switchboard/sqlite"
)

// chromiumPath is Debian's chromium unless SWITCHBOARD_CHROMIUM names another.
func chromiumPath() string {
	if p := os.Getenv("SWITCHBOARD_CHROMIUM"); p != "" {
		return p
	}
	return "/usr/bin/chromium"
}

// browserRequired: in CI (or when asked) a browser that cannot start fails
// the test instead of skipping it.
func browserRequired() bool {
	return os.Getenv("CI") != "" || os.Getenv("SWITCHBOARD_BROWSER_REQUIRED") == "1"
}

// browser starts headless Chromium with a fresh profile and returns a tab.
func browser(t testing.TB) context.Context {
	t.Helper()
	noBrowser := func(format string, args ...any) {
		t.Helper()
		if browserRequired() {
			t.Fatalf(format, args...)
		}
		t.Skipf(format+" (set CI or SWITCHBOARD_BROWSER_REQUIRED=1 to fail instead)", args...)
	}
	path := chromiumPath()
	if _, err := os.Stat(path); err != nil {
		noBrowser("no browser: %v (apt-get install -y chromium)", err)
	}
	// The network is closed here: without these flags Chromium stalls on
	// its background fetches.
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelTab(); cancelAlloc() })
	// The first Run starts the browser; it must run on the tab's own
	// context (a timeout context would end the browser with it), so the
	// bound is a select.
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

// server is httpapi with the dashboard over a SQLite catalog, restartable
// on the same address.
type server struct {
	t     testing.TB
	dsn   string
	token string
	ui    http.Handler // nil: dashboard.Handler()
	cat   switchboard.Catalog
	addr  string
	mu    sync.Mutex
	api   *httpapi.Server
	hs    *http.Server
}

func startServer(t *testing.T, token string) *server {
	return startServerOn(t, testkit.OpenSQLite(t), "sqlite:///var/lib/switchboard/catalog.db", token)
}

// startServerOn serves cat; dsn is what /v1/info reports.
func startServerOn(t testing.TB, cat switchboard.Catalog, dsn, token string) *server {
	s := &server{t: t, cat: cat, dsn: dsn, addr: "127.0.0.1:0", token: token}
	s.start()
	t.Cleanup(s.stop)
	return s
}

func (s *server) start() {
	s.t.Helper()
	var ln net.Listener
	var err error
	testkit.WaitUntil(s.t, "listening on "+s.addr, func() bool {
		ln, err = net.Listen("tcp", s.addr)
		return err == nil
	})
	s.addr = ln.Addr().String()
	ui := s.ui
	if ui == nil {
		ui = dashboard.Handler()
	}
	api := httpapi.New(s.cat, httpapi.Options{
		DSN: s.dsn, UI: ui, Token: s.token,
		ReapInterval: 100 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
	})
	hs := &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	s.mu.Lock()
	s.api, s.hs = api, hs
	s.mu.Unlock()
}

func (s *server) stop() {
	s.mu.Lock()
	api, hs := s.api, s.hs
	s.api, s.hs = nil, nil
	s.mu.Unlock()
	if api == nil {
		return
	}
	api.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	hs.Shutdown(ctx)
}

func (s *server) url() string { return "http://" + s.addr }

// call does one API request and decodes a JSON answer into out (if any).
func (s *server) call(method, path string, body any, out any, hdr ...string) int {
	s.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.url()+path, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		s.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			s.t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
	return resp.StatusCode
}

// register puts an instance through the API and returns its secret.
func (s *server) register(in map[string]any) string {
	s.t.Helper()
	var out struct{ Secret string }
	s.call("PUT", "/v1/instances", in, &out)
	return out.Secret
}

// do runs actions in the page within 30 s; what says what failed.
func do(t testing.TB, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	nctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(nctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// waitJS evaluates expr in the page until it is true. The 60 s bound
// catches what never happens on a loaded machine; it says nothing about
// speed.
func waitJS(t testing.TB, ctx context.Context, what, expr string) {
	t.Helper()
	var last error
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(25 * time.Millisecond) {
		var ok bool
		ectx, cancel := context.WithTimeout(ctx, 10*time.Second)
		ok, last = chromedp.Run(ectx, chromedp.Evaluate[bool](expr))
		cancel()
		if last == nil && ok {
			return
		}
	}
	ectx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	state, _ := chromedp.Run(ectx, chromedp.Evaluate[string](`JSON.stringify({conn: document.getElementById("conn").textContent, page: document.getElementById("page").textContent, shown: document.getElementById("shown").textContent, filter: document.getElementById("filter").value, focus: document.activeElement && document.activeElement.id, rows: [...document.querySelectorAll("tr.inst")].map(r => r.dataset.id+"|"+r.dataset.state+"|"+r.dataset.reason), seen: window.__seen})`))
	t.Fatalf("timed out waiting for %s (%s; last error %v); page: %s", what, expr, last, state)
}

// shot saves a PNG of the page into the artifacts directory.
func shot(t testing.TB, ctx context.Context, dir, name string) {
	t.Helper()
	ectx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ectx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	p := filepath.Join(dir, name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", p)
}

func artifacts(t testing.TB) string {
	dir := os.Getenv("SWITCHBOARD_ARTIFACTS")
	if dir == "" {
		return t.TempDir()
	}
	dir = filepath.Join(dir, t.Name())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// recordRows makes the page remember every (id, state, reason) a row has
// shown, so a state shown briefly is not missed between two polls.
const recordRows = `(() => {
  window.__seen = [];
  const rec = () => { for (const tr of document.querySelectorAll("tr.inst")) {
    const k = tr.dataset.id + "|" + tr.dataset.state + "|" + tr.dataset.reason;
    if (!window.__seen.includes(k)) window.__seen.push(k);
  } };
  rec();
  new MutationObserver(rec).observe(document.getElementById("rows"), {childList: true, subtree: true, attributes: true});
  return true;
})()`

func seen(id, state, reason string) string {
	return fmt.Sprintf(`window.__seen.includes(%q)`, id+"|"+state+"|"+reason)
}

func row(id string) string {
	return fmt.Sprintf(`document.querySelector('tr.inst[data-id=%q]')`, id)
}

// TestDashboardLive drives the page in real headless Chromium: instances
// appear, go stale, expire and deregister live; the filter narrows and is
// in the URL; the detail view shows components; the page says when the
// server went away and reconnects when it is back on the same address.
func TestDashboardLive(t *testing.T) {
	dir := artifacts(t)
	s := startServer(t, "")
	// One instance before the page opens (it arrives in the snapshot).
	keepSecret := s.register(map[string]any{"id": "api-1", "name": "api", "type": "router", "address": "127.0.0.1:9001",
		"capabilities": []string{"routing"}, "ttl": "1m", "components": map[string]any{"ports": []any{map[string]any{"name": "in", "port": 1}}}})
	ctx := browser(t)

	nctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err := chromedp.Do(nctx, chromedp.Navigate(s.url()+"/"), chromedp.WaitVisible(chromedp.ID("rows")))
	cancel()
	if err != nil {
		t.Fatalf("open the page: %v", err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](recordRows)); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the stream to be live", `document.getElementById("conn").dataset.state === "live"`)
	waitJS(t, ctx, "the snapshot's instance", seen("api-1", "active", ""))
	waitJS(t, ctx, "the header", `document.getElementById("backend").textContent === "sqlite" && document.getElementById("health").dataset.health === "ok" && document.getElementById("n-active").textContent === "1"`)

	// Register through the API: it appears without a reload.
	crashSecret := s.register(map[string]any{"id": "worker-1", "name": "worker", "type": "writer", "address": "127.0.0.1:9101",
		"capabilities": []string{"storage", "trace_ingestion"}, "ttl": "1s"})
	leaveSecret := s.register(map[string]any{"id": "worker-2", "name": "worker", "type": "writer", "address": "127.0.0.1:9102",
		"capabilities": []string{"storage"}, "ttl": "1m"})
	waitJS(t, ctx, "worker-1 to appear", seen("worker-1", "active", ""))
	waitJS(t, ctx, "worker-2 to appear", seen("worker-2", "active", ""))
	waitJS(t, ctx, "the capability view", `!!document.querySelector('#caps li[data-cap="storage"]') && document.querySelector('#caps li[data-cap="storage"]').textContent.includes("2 active")`)
	waitJS(t, ctx, "the activity feed", `document.getElementById("feed").textContent.includes("worker-2")`)
	shot(t, ctx, dir, "01-registered")

	// worker-1 never heartbeats (its owner "crashed"): stale after its TTL,
	// then removed as expired when the server's reaper deletes the row.
	_ = crashSecret
	waitJS(t, ctx, "worker-1 to turn stale", seen("worker-1", "stale", ""))
	shot(t, ctx, dir, "02-stale")
	waitJS(t, ctx, "worker-1 to go as expired", seen("worker-1", "removed", "expired"))
	waitJS(t, ctx, "worker-1's row to leave", row("worker-1")+` === null`)

	// worker-2 deregisters.
	s.call("DELETE", "/v1/instances/worker-2", nil, nil, "X-Instance-Secret", leaveSecret)
	waitJS(t, ctx, "worker-2 to go as deregistered", seen("worker-2", "removed", "deregistered"))
	shot(t, ctx, dir, "03-deregistered")
	waitJS(t, ctx, "worker-2's row to leave", row("worker-2")+` === null`)

	// The filter narrows the table and is reflected in the URL.
	s.register(map[string]any{"id": "q-1", "name": "querier", "type": "querier", "address": "127.0.0.1:9201", "capabilities": []string{"query_execution"}, "ttl": "1m"})
	waitJS(t, ctx, "q-1 to appear", row("q-1")+` !== null`)
	fctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	err = chromedp.Do(fctx, chromedp.SendKeys(chromedp.ID("filter"), "cap:query_execution"))
	cancel()
	if err != nil {
		t.Fatalf("type in the filter: %v", err)
	}
	waitJS(t, ctx, "the filter to narrow the table", row("q-1")+` !== null && `+row("api-1")+` === null`)
	waitJS(t, ctx, "the filter in the URL", `new URLSearchParams(location.search).get("q") === "cap:query_execution"`)
	shot(t, ctx, dir, "04-filtered")
	fctx, cancel = context.WithTimeout(ctx, 20*time.Second)
	err = chromedp.Do(fctx, chromedp.Click(chromedp.ID("filter")), chromedp.KeyEvent(kb.Escape), chromedp.Click(chromedp.ID("filter")), chromedp.SendKeys(chromedp.ID("filter"), "api"))
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the filter api in the URL", `new URLSearchParams(location.search).get("q") === "api"`)
	waitJS(t, ctx, "the filter api", row("api-1")+` !== null && `+row("q-1")+` === null`)

	// The detail view: all fields, components pretty-printed. The button is
	// clicked in the page, where it is found: a row re-rendered between a
	// lookup of its node and a mouse click on it ("Could not find node
	// with given id") is the test's race, not the page's.
	waitJS(t, ctx, "a click on the detail button of api-1",
		`(() => { const b = document.querySelector('button[data-open="api-1"]'); if (b) b.click(); return b !== null; })()`)
	waitJS(t, ctx, "the detail view", `document.getElementById("detail").open && document.getElementById("d-components").textContent.includes('\n  "ports": [')`)
	shot(t, ctx, dir, "05-detail")
	fctx, cancel = context.WithTimeout(ctx, 20*time.Second)
	err = chromedp.Do(fctx, chromedp.KeyEvent(kb.Escape))
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the detail view to close", `!document.getElementById("detail").open`)

	// Restart the server on the same address: the page says it is
	// disconnected, keeps the last known state, and reconnects.
	s.stop()
	waitJS(t, ctx, "the page to say it is reconnecting", `document.getElementById("conn").dataset.state === "reconnecting" && !document.getElementById("banner").hidden && document.body.classList.contains("stale-data")`)
	waitJS(t, ctx, "the last known state kept", row("api-1")+` !== null`)
	shot(t, ctx, dir, "06-disconnected")
	s.start()
	waitJS(t, ctx, "the page to reconnect", `document.getElementById("conn").dataset.state === "live" && document.getElementById("banner").hidden`)
	s.call("PUT", "/v1/instances/api-1/heartbeat", nil, nil, "X-Instance-Secret", keepSecret)
	s.register(map[string]any{"id": "late-1", "name": "api", "type": "router", "address": "127.0.0.1:9002", "capabilities": []string{"routing"}, "ttl": "1m"})
	waitJS(t, ctx, "an instance registered after the restart", seen("late-1", "active", ""))
	shot(t, ctx, dir, "07-reconnected")
}

// TestDashboardToken: against a server with an API token the page asks
// for it, then streams with it (fetch sends the Authorization header that
// EventSource cannot).
func TestDashboardToken(t *testing.T) {
	dir := artifacts(t)
	s := startServer(t, "s3cret")
	s.register(map[string]any{"id": "api-1", "name": "api", "type": "router", "address": "127.0.0.1:9001", "ttl": "1m"})
	ctx := browser(t)
	do(t, ctx, "open the page and see the token form", chromedp.Navigate(s.url()+"/"), chromedp.WaitVisible(chromedp.ID("token")))
	waitJS(t, ctx, "the page to say a token is needed", `document.getElementById("conn").dataset.state === "auth"`)
	shot(t, ctx, dir, "01-token-needed")
	do(t, ctx, "enter the token", chromedp.SendKeys(chromedp.ID("token"), "s3cret"+kb.Enter))
	waitJS(t, ctx, "the stream to be live with the token", `document.getElementById("conn").dataset.state === "live" && document.getElementById("tokenform").hidden`)
	waitJS(t, ctx, "the instance", row("api-1")+` !== null`)
	waitJS(t, ctx, "the header with the token", `document.getElementById("backend").textContent === "sqlite"`)
}

// TestDashboardBrowserRequired: with SWITCHBOARD_BROWSER_REQUIRED=1 a
// missing browser is a failure. Runs the helper in a child process with a
// browser path that does not exist and checks that it failed, not skipped.
func TestDashboardBrowserRequired(t *testing.T) {
	if os.Getenv("SWITCHBOARD_BROWSER_CHILD") == "1" {
		browser(t)
		return
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := execCommand(ctx, exe, "-test.run=^TestDashboardBrowserRequired$", "-test.v")
	cmd.Env = append(os.Environ(), "SWITCHBOARD_BROWSER_CHILD=1", "SWITCHBOARD_BROWSER_REQUIRED=1", "SWITCHBOARD_CHROMIUM=/nonexistent/chromium")
	out, err := cmd.CombinedOutput()
	var ee *exitError
	if !errors.As(err, &ee) || !strings.Contains(string(out), "--- FAIL") || strings.Contains(string(out), "--- SKIP") {
		t.Fatalf("want the child to fail, got err %v:\n%s", err, out)
	}
}
