package dashboard_test

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestDashboardOpenedDuringOutage: a page opened while the server cannot
// read its catalog (PostgreSQL cut off behind a proxy) says the catalog is
// down (from the error event after its stream's snapshot, and from
// /v1/info), shows the banner and greys out the last known state, and
// clears them once the catalog is back.
func TestDashboardOpenedDuringOutage(t *testing.T) {
	cat, u, proxy := catalogBehindProxy(t)
	s := startServerOn(t, cat, u.String(), "")
	s.register(map[string]any{"id": "api-1", "name": "api", "type": "router", "address": "127.0.0.1:9001", "ttl": "1m"})

	proxy.CutAll()
	waitGo(t, "the server to find the catalog unreachable", func() bool {
		var info struct{ Healthy bool }
		s.call("GET", "/v1/info", nil, &info)
		return !info.Healthy
	})
	ctx := browser(t)
	nctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err := chromedp.Do(nctx, chromedp.Navigate(s.url()+"/"), chromedp.WaitVisible(chromedp.ID("rows")))
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the last known state", row("api-1")+` !== null`)
	waitJS(t, ctx, "the page to say the catalog is down", `document.getElementById("conn").dataset.state === "catalog-down" && !document.getElementById("banner").hidden && document.getElementById("banner").textContent.includes("cannot read the catalog") && document.body.classList.contains("stale-data")`)
	shot(t, ctx, artifacts(t), "01-opened-during-outage")

	proxy.Restore()
	waitJS(t, ctx, "the banner to go when the catalog is back", `document.getElementById("conn").dataset.state === "live" && document.getElementById("banner").hidden && !document.body.classList.contains("stale-data")`)
}
