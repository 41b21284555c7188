package dashboard_test

import (
	"testing"

	"github.com/chromedp/chromedp"
)

// TestDashboardRename: an id registered again under another name moves in
// the table. With a name: filter the row leaves the shown page (it no
// longer matches), and without one it moves to its new group, whose header
// and the old group's header count it where it is now.
func TestDashboardRename(t *testing.T) {
	s := startServer(t, "")
	secret := s.register(map[string]any{"id": "x-1", "name": "api", "type": "router", "address": "127.0.0.1:9001", "ttl": "30m"})
	s.register(map[string]any{"id": "x-2", "name": "api", "type": "router", "address": "127.0.0.1:9002", "ttl": "30m"})
	ctx := browser(t)
	do(t, ctx, "open the page", chromedp.Navigate(s.url()+"/?q=name:api"), chromedp.WaitVisible(chromedp.ID("rows")))
	waitJS(t, ctx, "both rows under the filter", row("x-1")+` !== null && `+row("x-2")+` !== null && document.getElementById("conn").dataset.state === "live"`)

	// x-1 becomes a "worker": the filter name:api no longer matches it.
	reregister := func(name string) {
		s.call("PUT", "/v1/instances", map[string]any{"id": "x-1", "name": name, "type": "router", "address": "127.0.0.1:9001", "ttl": "30m"}, nil,
			"X-Instance-Secret", secret)
	}
	reregister("worker")
	waitJS(t, ctx, "the renamed row to leave the filtered table", row("x-1")+` === null && `+row("x-2")+` !== null && document.getElementById("shown").textContent === "1 of 2 shown"`)
	waitJS(t, ctx, "the api group to count one", `document.querySelector('tr.grp[data-group="api"] .gcount').textContent === "1 active"`)

	// Without a filter it shows under its new name; renamed back, the
	// "worker" group goes and "api" counts two again.
	waitJS(t, ctx, "the filter cleared",
		`(() => { const f = document.getElementById("filter"); f.focus(); f.dispatchEvent(new KeyboardEvent("keydown", {key: "Escape", bubbles: true})); return f.value === ""; })()`)
	waitJS(t, ctx, "x-1 under worker", `!!document.querySelector('tr.grp[data-group="worker"]') && document.querySelector('tr.grp[data-group="worker"]').nextElementSibling.dataset.id === "x-1"`)
	reregister("api")
	waitJS(t, ctx, "x-1 back under api", `!document.querySelector('tr.grp[data-group="worker"]') && document.querySelector('tr.grp[data-group="api"] .gcount').textContent === "2 active" && document.querySelectorAll("tr.inst").length === 2`)
}
