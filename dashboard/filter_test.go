package dashboard_test

import (
	"testing"

	"github.com/chromedp/chromedp"
)

// filterCases checks parseFilter and matches (store.js) on instances whose
// capabilities contain one another: cap: is one whole capability, spelled
// as the catalog spells it; free words match part of any field, ignoring
// case. Several terms of one kind all apply, in any order (an instance
// must match each), as free words do; a term with nothing after its colon
// is ignored.
const filterCases = `import("/store.js").then(({ parseFilter, matches }) => {
  const inst = (id, caps, name = "svc", type = "Writer") => ({ id, name, type, address: "127.0.0.1:1", capabilities: caps });
  const all = [inst("s-1", ["store"]), inst("s-2", ["storage"]), inst("s-3", ["object_store"]), inst("s-4", ["Store"]), inst("s-5", ["store", "x"]), inst("s-6", ["store.v2"]),
    inst("s-7", ["x"], "svc-x", "Reader")];
  const cases = [
    ["cap:store", "s-1 s-5"],
    ["capability:store", "s-1 s-5"],
    ["CAP:store", "s-1 s-5"],
    ["cap:Store", "s-4"],
    ["cap:stor", ""],
    ["cap:object_store", "s-3"],
    ["cap:store.v2", "s-6"],
    ["store", "s-1 s-3 s-4 s-5 s-6"],
    ["STOR", "s-1 s-2 s-3 s-4 s-5 s-6"],
    ["storage", "s-2"],
    ["type:writ cap:storage", "s-2"],
    ["s-3", "s-3"],
    ["cap:store cap:x", "s-5"],
    ["cap:x cap:store", "s-5"],
    ["capability:x CAP:store", "s-5"],
    ["cap:store cap:storage", ""],
    ["cap:x cap:x", "s-5 s-7"],
    ["name:svc name:-x", "s-7"],
    ["name:-x name:svc", "s-7"],
    ["type:writ type:read", ""],
    ["type:read type:er", "s-7"],
    ["type:er type:READ", "s-7"],
    ["cap:x name:-x type:writ", ""],
    ["cap:x type:writ", "s-5"],
    ["cap:", "s-1 s-2 s-3 s-4 s-5 s-6 s-7"],
    ["cap:x cap:", "s-5 s-7"],
    ["cap: cap:x", "s-5 s-7"],
    ["name: x", "s-5 s-7"],
  ];
  const bad = [];
  for (const [q, want] of cases) {
    const f = parseFilter(q);
    const got = all.filter((i) => matches(f, i)).map((i) => i.id).join(" ");
    if (got !== want) bad.push(JSON.stringify(q) + " matched [" + got + "], want [" + want + "]");
  }
  return bad.length ? bad.join("; ") : "ok";
})`

// TestFilter runs filterCases in headless Chromium against the page's own
// store.js.
func TestFilter(t *testing.T) { runPageScript(t, filterCases) }

// TestDashboardCapabilityClick: a click on a capability in the
// capabilities panel shows the instances that have that capability, not
// the ones with a capability containing its name (store.v2, object_store,
// Store); free text still matches part of a capability.
func TestDashboardCapabilityClick(t *testing.T) {
	s := startServer(t, "")
	for id, cap := range map[string]string{"s-1": "store", "s-2": "storage", "s-3": "object_store", "s-4": "Store", "s-5": "store.v2"} {
		s.register(map[string]any{"id": id, "name": "svc", "type": "writer", "address": "127.0.0.1:9001", "capabilities": []string{cap}, "ttl": "30m"})
	}
	ctx := browser(t)
	do(t, ctx, "open the page", chromedp.Navigate(s.url()+"/"), chromedp.WaitVisible(chromedp.ID("rows")))
	waitJS(t, ctx, "five rows and the capability store", `document.querySelectorAll("tr.inst").length === 5 && !!document.querySelector('[data-cap-filter="store"]')`)
	// Clicked in the page, where it is found: the panel is re-rendered
	// between a lookup of its node and a mouse click on it.
	waitJS(t, ctx, "a click on the capability store",
		`(() => { const b = document.querySelector('[data-cap-filter="store"]'); if (b) b.click(); return b !== null; })()`)
	shown := `[...document.querySelectorAll("tr.inst")].map((r) => r.dataset.id).join(" ")`
	waitJS(t, ctx, "only s-1 under cap:store", `new URLSearchParams(location.search).get("q") === "cap:store" && document.getElementById("filter").value === "cap:store" && `+
		shown+` === "s-1" && document.getElementById("shown").textContent === "1 of 5 shown"`)
	waitJS(t, ctx, "the panel counting the instance shown", `document.querySelector('#caps li[data-cap="store"] .cnt').textContent === "1 active"`)

	// Free text matches part of a capability, in any case.
	waitJS(t, ctx, "the filter stor typed", `(() => { const f = document.getElementById("filter"); f.value = "stor"; f.dispatchEvent(new Event("input", {bubbles: true})); return true; })()`)
	waitJS(t, ctx, "every instance under the free text stor", shown+` === "s-1 s-2 s-3 s-4 s-5" && document.getElementById("shown").textContent === "5 instances"`)
}
