package dashboard_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/switchboard-io/switchboard/dashboard"
)

// storeModel checks store.js against a plain model in the page: random
// puts (new entries, state changes, renames, filter matches gained and
// lost), drops, filter changes and snapshots over 40 ids; after each step
// the table order, the filtered view, the group counts and the size must
// be what sorting and filtering the model gives, and the index a change
// reports must be where the entry is (or was, when it left the view; the
// earlier of both places after a rename, which also names the old group).
const storeModel = `import("/store.js").then(({ Store, parseFilter, matches }) => {
  let seed = 7;
  const rnd = (n) => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n; };
  const filters = ["", "svc-1", "cap:c1", "i-3 svc", "type:w", "name:svc-2 cap:c0", "name:svc name:-1 type:w type:w"];
  const byNameId = (a, b) => a.inst.name < b.inst.name ? -1 : a.inst.name > b.inst.name ? 1 : a.inst.id < b.inst.id ? -1 : a.inst.id > b.inst.id ? 1 : 0;
  const key = (e) => e.inst.id + "/" + e.inst.name + "/" + e.state;
  for (let round = 0; round < 100; round++) {
    const st = new Store(parseFilter(filters[rnd(filters.length)]));
    const model = new Map();
    for (let step = 0; step < 300; step++) {
      const id = "i-" + rnd(40), op = rnd(20);
      if (op < 12) {
        const f = { inst: { id, name: "svc-" + rnd(4), type: rnd(2) ? "w" : "r", address: "", capabilities: ["c" + rnd(3)] }, state: ["active", "stale", "removed"][rnd(3)], reason: "", gone: 0 };
        const old = st.get(id), wasAt = old && old.shown ? st.view.indexOf(old) : -1, oldName = old && old.inst.name;
        const c = st.put(id, f);
        model.set(id, f);
        const nowAt = st.get(id).shown ? st.view.indexOf(st.get(id)) : -1;
        if (oldName && oldName !== f.inst.name) {
          // A rename: the table must hear of the earlier of both places
          // and of the group left.
          const want = [wasAt, nowAt].filter((i) => i >= 0);
          if (c.index !== (want.length ? Math.min(...want) : -1) || c.moved !== (wasAt >= 0 || nowAt >= 0) || c.renamed !== oldName)
            return "rename " + id + " " + oldName + "→" + f.inst.name + ": index " + c.index + " moved " + c.moved + " renamed " + c.renamed + ", was at " + wasAt + ", now at " + nowAt;
        } else if (wasAt >= 0 && nowAt < 0 && (c.index !== wasAt || !c.moved)) return "put " + id + ": left the view at " + wasAt + ", reported " + c.index + " moved " + c.moved;
        else if (c.index >= 0 && st.get(id).shown && st.view[c.index] !== st.get(id)) return "put " + id + ": index " + c.index + " is not the entry";
        if (c.index >= 0 && c.name !== f.inst.name) return "put " + id + ": name " + c.name;
      } else if (op < 18) {
        const had = model.get(id), shown = had && st.get(id).shown, at = shown ? st.view.indexOf(st.get(id)) : -1;
        const c = st.drop(id);
        model.delete(id);
        if (c.index !== at || c.moved !== !!shown) return "drop " + id + ": index " + c.index + " moved " + c.moved + ", want " + at;
      } else if (op === 18) st.setFilter(parseFilter(filters[rnd(filters.length)]));
      else st.replace([...st.byId]);
      const all = [...model.values()].sort(byNameId);
      if (all.map(key).join() !== st.all.map(key).join()) return "order differs at round " + round + " step " + step;
      const view = all.filter((e) => matches(st.filter, e.inst));
      if (view.map(key).join() !== st.view.map(key).join()) return "view differs at round " + round + " step " + step + " (" + st.filter.q + ")";
      const g = new Map();
      for (const e of view) { const x = g.get(e.inst.name) || { active: 0, stale: 0, removed: 0 }; x[e.state]++; g.set(e.inst.name, x); }
      if (JSON.stringify([...g].sort()) !== JSON.stringify([...st.groups].sort())) return "group counts differ at round " + round + " step " + step;
      if (st.size !== model.size) return "size " + st.size + ", want " + model.size;
      const tot = { active: 0, stale: 0, removed: 0 };
      for (const e of all) tot[e.state]++;
      if (JSON.stringify(tot) !== JSON.stringify(st.totals)) return "totals " + JSON.stringify(st.totals) + ", want " + JSON.stringify(tot) + " at round " + round + " step " + step;
    }
  }
  return "ok";
})`

// TestStore runs storeModel in headless Chromium against the page's own
// store.js (served by Handler, under its Content-Security-Policy).
func TestStore(t *testing.T) { runPageScript(t, storeModel) }

// runPageScript runs script (an async function that imports the page's
// modules and answers "ok" or what is wrong) in headless Chromium, on a
// page of Handler's origin (under its Content-Security-Policy), and fails
// t with its answer unless it is "ok".
func runPageScript(t *testing.T, script string) {
	t.Helper()
	srv := httptest.NewServer(dashboard.Handler())
	defer srv.Close()
	ctx := browser(t)
	nctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(nctx, chromedp.Navigate(srv.URL+"/favicon.svg")); err != nil {
		t.Fatal(err)
	}
	got, err := chromedp.Run(nctx, chromedp.Evaluate[string](script, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if got != "ok" {
		t.Fatal(got)
	}
}

// durationsAndLabels checks parseDuration against Go's Duration strings
// and label against the ids the CLI, the library and people give.
const durationsAndLabels = `import("/store.js").then(({ parseDuration, label }) => {
  const d = [["10s", 10000], ["1m0s", 60000], ["1h0m0s", 3600000], ["1.5s", 1500], ["666ms", 666], ["250µs", 0.25], ["100ns", 0.0001], ["2h45m0.5s", 9900500], ["0s", 0]];
  for (const [s, want] of d) if (Math.abs(parseDuration(s) - want) > 1e-9) return "parseDuration(" + s + ") = " + parseDuration(s) + ", want " + want;
  for (const bad of ["", "10", "s", "10x", "1m junk", null, "-1s"]) if (!Number.isNaN(parseDuration(bad))) return "parseDuration(" + bad + ") = " + parseDuration(bad) + ", want NaN";
  const l = [
    [{ id: "api-1", name: "api" }, "api-1"],
    [{ id: "querier", name: "querier" }, "querier"],
    [{ id: "3f6c2a9e-8a57-4d0b-9d1e-2b7c1f0e4a11", name: "querier" }, "querier · 3f6c2a9e…"],
    [{ id: "x1", name: "writer" }, "writer · x1"],
  ];
  for (const [i, want] of l) if (label(i) !== want) return "label(" + JSON.stringify(i) + ") = " + label(i) + ", want " + want;
  return "ok";
})`

// TestStoreDurationsAndLabels runs durationsAndLabels in headless Chromium.
func TestStoreDurationsAndLabels(t *testing.T) { runPageScript(t, durationsAndLabels) }
