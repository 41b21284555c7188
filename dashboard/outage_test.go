package dashboard_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/testkit"
	_ "github.com/switchboard-io/switchboard/postgres"
	"github.com/switchboard-io/switchboard/postgres/pgtest"
)

// TestDashboardCatalogOutage: a server over PostgreSQL behind a proxy; when
// the proxy cuts the database off, the page says the catalog is
// unreachable and keeps the last known state, marked stale; when it is
// back, the banner goes and the instance is still there (never expired).
func TestDashboardCatalogOutage(t *testing.T) {
	dir := artifacts(t)
	cat, u, proxy := catalogBehindProxy(t)
	// The DSN the page shows carries a password: the server redacts it.
	shown, _ := url.Parse(u.String())
	shown.User = url.UserPassword("postgres", "hunter2")
	s := startServerOn(t, cat, shown.String(), "")
	secret := s.register(map[string]any{"id": "api-1", "name": "api", "type": "router", "address": "127.0.0.1:9001", "ttl": "10s"})
	// Heartbeat through the server every 200 ms; failures during the
	// outage are expected and ignored. The TTL is far above what the page
	// needs to open and to see the outage even on a loaded host (a 1 s TTL
	// once expired before the page opened): what is tested is the page,
	// not the expiry grace after an outage, which the postgres package's
	// outage tests pin.
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			req, _ := http.NewRequestWithContext(rctx, "PUT", s.url()+"/v1/instances/api-1/heartbeat", nil)
			req.Header.Set("X-Instance-Secret", secret)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
			cancel()
		}
	}()
	t.Cleanup(func() { close(stop); <-done })

	ctx := browser(t)
	nctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err := chromedp.Do(nctx, chromedp.Navigate(s.url()+"/"), chromedp.WaitVisible(chromedp.ID("rows")))
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](recordRows)); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the stream to be live", `document.getElementById("conn").dataset.state === "live"`)
	waitJS(t, ctx, "api-1", seen("api-1", "active", ""))
	waitJS(t, ctx, "the header over postgres", `document.getElementById("backend").textContent === "postgres" && document.getElementById("dsn").textContent.includes("postgres:xxxxx@") && !document.body.textContent.includes("hunter2")`)

	proxy.CutAll()
	waitJS(t, ctx, "the page to say the catalog is unreachable", `document.getElementById("conn").dataset.state === "catalog-down" && !document.getElementById("banner").hidden && document.getElementById("banner").textContent.includes("cannot read the catalog") && document.body.classList.contains("stale-data")`)
	waitJS(t, ctx, "the last known state kept", row("api-1")+` !== null`)
	shot(t, ctx, dir, "01-catalog-down")

	proxy.Restore()
	waitJS(t, ctx, "the banner to go when the catalog is back", `document.getElementById("conn").dataset.state === "live" && document.getElementById("banner").hidden && !document.body.classList.contains("stale-data")`)
	waitJS(t, ctx, "api-1 still active", row("api-1")+`?.dataset.state === "active"`)
	waitJS(t, ctx, "api-1 never removed", `!window.__seen.some(k => k.startsWith("api-1|removed"))`)
	shot(t, ctx, dir, "02-catalog-back")
}

// catalogBehindProxy opens a PostgreSQL catalog (a fresh database) through
// a proxy that can cut it off, closed at cleanup; u is its DSN.
func catalogBehindProxy(t *testing.T) (switchboard.Catalog, *url.URL, *testkit.Proxy) {
	t.Helper()
	ctx0, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	db, drop, err := pgtest.NewDatabase(ctx0)
	cancel()
	if err != nil {
		t.Fatalf("PostgreSQL (%s): %v", pgtest.AdminDSN(), err)
	}
	t.Cleanup(drop)
	u, _ := url.Parse(pgtest.Schema(t, db))
	proxy := testkit.NewProxy(t, u.Host)
	u.Host = proxy.Addr()
	ctx0, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	cat, err := switchboard.Open(ctx0, u.String(), switchboard.Options{Logger: slog.New(slog.DiscardHandler)})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	return cat, u, proxy
}
