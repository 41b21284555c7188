package dashboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/switchboard-io/switchboard/dashboard"
	"github.com/switchboard-io/switchboard/httpapi"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

// gatedServer is the API with the dashboard whose watch stream is held
// until open is closed: the page stays "connecting" as long as the test
// wants.
func gatedServer(t *testing.T) (url string, open func()) {
	t.Helper()
	api := httpapi.New(testkit.OpenSQLite(t), httpapi.Options{DSN: "sqlite:///tmp/x.db", UI: dashboard.Handler(),
		ReapInterval: 100 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	gate := make(chan struct{})
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/watch" {
			select {
			case <-gate:
			case <-r.Context().Done():
				return
			}
		}
		api.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		once.Do(func() { close(gate) })
		api.Close()
		srv.Close()
	})
	return srv.URL, func() { once.Do(func() { close(gate) }) }
}

// put registers an instance (a JSON body) through the API.
func put(t *testing.T, url, body string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "PUT", url+"/v1/instances", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("register: %d %s", resp.StatusCode, b)
	}
}

// watchAgreement records, after every change of the table or the header,
// whether the header's stale count is the table's (every row is on the
// page here): a disagreement seen once is kept.
const watchAgreement = `(() => {
  window.__disagree = [];
  const check = () => {
    const header = document.getElementById("n-stale").textContent;
    if (!/^\d+$/.test(header)) return;
    const table = document.querySelectorAll("tr.inst[data-state=stale]").length;
    if (String(table) !== header) window.__disagree.push(header + " in the header, " + table + " in the table");
  };
  const mo = new MutationObserver(check);
  mo.observe(document.getElementById("rows"), {childList: true, subtree: true, attributes: true});
  mo.observe(document.getElementById("n-stale"), {childList: true, subtree: true, characterData: true});
  window.__expiring = [];
  new MutationObserver(() => { for (const tr of document.querySelectorAll("tr.inst[data-expiring=true][data-state=active]")) if (!window.__expiring.includes(tr.dataset.id)) window.__expiring.push(tr.dataset.id); })
    .observe(document.getElementById("rows"), {childList: true, subtree: true, attributes: true});
  return true;
})()`

// TestDashboardFirstContact: what a new user sees agrees with itself.
// While the stream is not yet open the table says it is connecting (not
// that the catalog is empty); the header counts what the table shows; a
// row about to expire says so (an Expires column, the row marked) before it
// turns stale; rows and capability members are named by their names, with
// an id that does not say the name cut visibly; activity lines wrap
// instead of being cut; a components document nested 9,999 deep opens in
// the detail view.
func TestDashboardFirstContact(t *testing.T) {
	url, open := gatedServer(t)
	ctx := browser(t)
	do(t, ctx, "open the page", chromedp.Navigate(url+"/"), chromedp.WaitVisible(chromedp.ID("rows")))

	// Connecting: the stream is held, so nothing was received yet.
	waitJS(t, ctx, "the page to say it is connecting", `document.getElementById("conn").dataset.state === "connecting" && !document.getElementById("empty").hidden`)
	text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("empty").textContent`))
	if err != nil {
		t.Fatal(err)
	}
	if text != "Connecting to the server… (no instances received yet)" {
		t.Fatalf("while connecting the table says %q", text)
	}
	open()
	waitJS(t, ctx, "an empty catalog said once live", `document.getElementById("conn").dataset.state === "live" && document.getElementById("empty").textContent === "No instances registered." && document.getElementById("n-active").textContent === "0"`)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](watchAgreement)); err != nil {
		t.Fatal(err)
	}

	const uuid = "3f6c2a9e-8a57-4d0b-9d1e-2b7c1f0e4a11"
	put(t, url, `{"id":"`+uuid+`","name":"querier","type":"querier","address":"127.0.0.1:50054","capabilities":["query_execution"],"ttl":"1m"}`)
	longType := "a-long-type-name-that-a-narrow-activity-panel-cannot-hold-xx"
	const longAddr = "a-very-long-host-name.in-a-deep-domain.eu-west-1.example.internal:65535"
	put(t, url, `{"id":"dying-1","name":"dying","type":"`+longType+`","address":"`+longAddr+`","ttl":"3s"}`)
	waitJS(t, ctx, "the querier named", `(() => { const b = document.querySelector('button[data-open="`+uuid+`"]'); return !!b && b.textContent === "querier · 3f6c2a9e…"; })()`)
	waitJS(t, ctx, "the capability member named", `(() => { const w = document.querySelector('#caps li[data-cap="query_execution"] .who'); return !!w && w.textContent === "querier · 3f6c2a9e…"; })()`)
	waitJS(t, ctx, "an Expires cell for an active row", `/^in \d/.test(document.querySelector('tr.inst[data-id="`+uuid+`"] td.exp').textContent)`)

	// The activity line of dying-1 ("dying-1 — <type> <address>") is whole
	// and wraps: nothing of it is hidden.
	waitJS(t, ctx, "the activity line whole", `[...document.querySelectorAll("#feed .who")].some((w) => w.textContent === "dying-1 — `+longType+` `+longAddr+`" && w.scrollWidth <= w.clientWidth && w.getBoundingClientRect().height > 20)`)

	// dying-1 never heartbeats: marked as expiring while still active, then
	// stale, with the header counting it as the table does.
	waitJS(t, ctx, "dying-1 marked as about to expire", `window.__expiring.includes("dying-1")`)
	waitJS(t, ctx, "dying-1 stale", `!!document.querySelector('tr.inst[data-id="dying-1"][data-state=stale]') && document.querySelector('tr.inst[data-id="dying-1"] td.exp').textContent === "expired"`)
	waitJS(t, ctx, "the header counting the stale row", `document.getElementById("n-stale").textContent === "1" && document.getElementById("n-active").textContent === "1"`)
	disagree, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`window.__disagree`))
	if err != nil {
		t.Fatal(err)
	}
	if len(disagree) > 0 {
		t.Fatalf("the header's stale count disagreed with the table: %v", disagree)
	}

	// A components document nested 9,999 deep (as deep as the server
	// accepts) opens in the detail view.
	const depth = 9999
	var deep bytes.Buffer
	deep.WriteString(strings.Repeat(`{"a":`, depth))
	deep.WriteString("1")
	deep.WriteString(strings.Repeat("}", depth))
	in, _ := json.Marshal(map[string]any{"id": "deep-1", "name": "deep", "type": "t", "address": "127.0.0.1:9002", "ttl": "1m", "components": json.RawMessage(deep.Bytes())})
	put(t, url, string(in))
	waitJS(t, ctx, "a click on the detail button of deep-1",
		`(() => { const b = document.querySelector('button[data-open="deep-1"]'); if (b) b.click(); return b !== null; })()`)
	waitJS(t, ctx, "the deep document shown", fmt.Sprintf(`(() => { const c = document.getElementById("d-components"); return document.getElementById("detail").open &&
		c.textContent.startsWith('{\n  "a": {\n    "a": {') && c.querySelectorAll(".k").length === %d && c.querySelectorAll(".n").length === 1 && c.textContent.endsWith("\n}"); })()`, depth))
}
