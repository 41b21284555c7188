package dashboard_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/switchboard-io/switchboard"
)

// lastSeen is the part of GET /v1/instances/{id} the tests read.
type lastSeen struct {
	LastSeen time.Time `json:"last_seen"`
}

// detailField is the text the open detail view shows for field k.
func detailField(k string) string {
	return fmt.Sprintf(`(document.querySelector('#d-fields dd[data-field=%q]') || {}).textContent`, k)
}

// recordDetail makes the page remember what its open detail view showed
// ("note|state|version") at every change, so a removed instance's note,
// shown for a few seconds, is not missed between two polls.
var recordDetail = `(() => {
  window.__detail = [];
  const rec = () => { if (document.getElementById("detail").open) window.__detail.push((document.getElementById("d-note").hidden ? "" : document.getElementById("d-note").textContent) + "|" + ` +
	detailField("state") + ` + "|" + ` + detailField("version") + `); };
  new MutationObserver(rec).observe(document.getElementById("detail"), {attributes: true, childList: true, characterData: true, subtree: true});
  return true;
})()`

// openDetailOf clicks the detail button of id in the page (where it is
// found: a row re-rendered between a lookup and a click is the test's race)
// and waits for the view.
func openDetailOf(t *testing.T, ctx context.Context, id string) {
	t.Helper()
	waitJS(t, ctx, "a click on the detail button of "+id,
		fmt.Sprintf(`(() => { const b = document.querySelector('button[data-open=%q]'); if (b) b.click(); return b !== null; })()`, id))
	waitJS(t, ctx, "the detail view of "+id, fmt.Sprintf(`document.getElementById("detail").open && document.getElementById("d-title").textContent === %q`, id))
}

// TestDashboardDetailLive: an open detail view follows its instance. A
// heartbeat (never an event: the page learns it from its periodic read of
// /v1/instances) moves last_seen in the view; a new version shows; a
// deregistration is said in the view, which stays open with the last known
// fields, and so is the instance's leaving the page altogether.
func TestDashboardDetailLive(t *testing.T) {
	dir := artifacts(t)
	s := startServer(t, "")
	in := map[string]any{"id": "d-1", "name": "api", "type": "router", "address": "127.0.0.1:9001", "ttl": "30m", "version": "1.0"}
	secret := s.register(in)
	ctx := browser(t)
	do(t, ctx, "open the page", chromedp.Navigate(s.url()+"/"), chromedp.WaitVisible(chromedp.ID("rows")))
	waitJS(t, ctx, "the stream to be live with d-1", `document.getElementById("conn").dataset.state === "live" && `+row("d-1")+` !== null`)
	openDetailOf(t, ctx, "d-1")

	var first lastSeen
	s.call("GET", "/v1/instances/d-1", nil, &first)
	waitJS(t, ctx, "the detail's last_seen", fmt.Sprintf(`Date.parse(%s) === %d`, detailField("last_seen"), first.LastSeen.UnixMilli()))

	// Heartbeat until the catalog's last_seen has moved by a millisecond
	// at least (what the page compares).
	var now lastSeen
	waitGo(t, "a heartbeat to move last_seen", func() bool {
		s.call("PUT", "/v1/instances/d-1/heartbeat", nil, nil, "X-Instance-Secret", secret)
		s.call("GET", "/v1/instances/d-1", nil, &now)
		return now.LastSeen.UnixMilli() > first.LastSeen.UnixMilli()
	})
	waitJS(t, ctx, "the open detail view to show the new last_seen", fmt.Sprintf(`Date.parse(%s) === %d && document.getElementById("detail").open`, detailField("last_seen"), now.LastSeen.UnixMilli()))

	in["version"] = "2.0"
	s.call("PUT", "/v1/instances", in, nil, "X-Instance-Secret", secret)
	waitJS(t, ctx, "the new version in the open detail view", detailField("version")+` === "2.0" && document.getElementById("d-note").hidden`)

	// The removed row stays only a few seconds: what the view showed is
	// recorded as it changes, so a slow poll cannot miss it.
	waitJS(t, ctx, "the detail view recorded", recordDetail)
	s.call("DELETE", "/v1/instances/d-1", nil, nil, "X-Instance-Secret", secret)
	waitJS(t, ctx, "the detail view to say d-1 was deregistered",
		`window.__detail.some((d) => /^This instance was removed \(deregistered\) at .*\|removed \(deregistered\)\|2\.0$/.test(d))`)
	shot(t, ctx, dir, "01-removed")
	// The row leaves the table after a few seconds; the view says so and
	// keeps the last known fields.
	waitJS(t, ctx, "d-1's row to leave", row("d-1")+` === null`)
	waitJS(t, ctx, "the detail view to say d-1 is no longer in the catalog",
		`document.getElementById("detail").open && document.getElementById("d-note").textContent.includes("no longer in the catalog") && `+detailField("version")+` === "2.0"`)
	shot(t, ctx, dir, "02-gone")
}

// TestDashboardDetailAcrossRestart: a change made while the page was
// disconnected reaches an open detail view when the restarted server
// resumes the page's stream from the catalog's change log (by the position
// its last event id carries): a new version; after a second restart, the
// instance's removal while the page was away, with the reason the log
// recorded.
func TestDashboardDetailAcrossRestart(t *testing.T) {
	s := startServer(t, "")
	s.register(map[string]any{"id": "d-1", "name": "api", "type": "router", "address": "127.0.0.1:9001", "ttl": "30m", "version": "1.0"})
	ctx := browser(t)
	do(t, ctx, "open the page", chromedp.Navigate(s.url()+"/"), chromedp.WaitVisible(chromedp.ID("rows")))
	waitJS(t, ctx, "the stream to be live with d-1", `document.getElementById("conn").dataset.state === "live" && `+row("d-1")+` !== null`)
	waitJS(t, ctx, "the count in the singular", `document.getElementById("shown").textContent === "1 instance"`)
	openDetailOf(t, ctx, "d-1")
	waitJS(t, ctx, "version 1.0", detailField("version")+` === "1.0"`)

	// offline stops the server, changes the catalog directly (no server
	// sees it happen) and starts the server again.
	offline := func(change func(context.Context) error) {
		t.Helper()
		s.stop()
		waitJS(t, ctx, "the page to say it is reconnecting", `document.getElementById("conn").dataset.state === "reconnecting"`)
		cctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := change(cctx); err != nil {
			t.Fatal(err)
		}
		s.start()
	}
	offline(func(ctx context.Context) error {
		_, err := s.cat.Register(ctx, switchboard.Instance{ID: "d-1", Name: "api", Type: "router", Address: "127.0.0.1:9001", TTL: 30 * time.Minute, Version: "1.1"})
		return err
	})
	waitJS(t, ctx, "the resumed stream's version in the open detail view",
		`document.getElementById("conn").dataset.state === "live" && document.getElementById("detail").open && `+detailField("version")+` === "1.1"`)

	waitJS(t, ctx, "the detail view recorded", recordDetail)
	offline(func(ctx context.Context) error { return s.cat.Deregister(ctx, "d-1") })
	waitJS(t, ctx, "the open detail view to say d-1 was deregistered while the page was disconnected",
		`window.__detail.some((d) => /^This instance was removed \(deregistered\) at .*\|removed \(deregistered\)\|1\.1$/.test(d))`)
	do(t, ctx, "close the detail view", chromedp.KeyEvent(kb.Escape))
	waitJS(t, ctx, "the detail view to close", `!document.getElementById("detail").open`)
}
