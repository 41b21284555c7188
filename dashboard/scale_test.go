package dashboard_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// TestDashboardTenThousand: 10,000 instances (2,000 under -race, where
// every SQLite write costs many times more) arrive in the snapshot and are
// paginated (100 rows a page, grouped by name). Then eight other catalog
// handles change rows (updates, deregistrations, registrations) paced at
// 1,000 writes a second for 5 s while keys are typed into the filter: the
// page counts an event for every write, never falls back to a fresh
// snapshot, reflects every keystroke, and ends showing exactly the
// catalog's rows, states and versions. Filtering and paging work at that
// size. Speed is not asserted (the machine is shared): it is
// BenchmarkDashboardEventRate's.
func TestDashboardTenThousand(t *testing.T) {
	if testing.Short() {
		t.Skip("registers thousands of instances and drives the page for 5 s (-short)")
	}
	dir := artifacts(t)
	n := 10000
	if raceEnabled {
		n = 2000
	}
	f := newFleet(t, n)
	ctx := openFleetPage(t, f)
	waitJS(t, ctx, "pages of 100", fmt.Sprintf(`document.getElementById("page").textContent === "1 / %d" && document.querySelectorAll("tr.inst").length === 100`, n/100))
	shot(t, ctx, dir, "01-ten-thousand")

	p := measureRate(t, ctx, f, 1000, 5*time.Second)
	t.Logf("%d writes in %v; the page counted %d events (%.0f/s); %d keystrokes (measured on a shared machine, not asserted)", p.writes, p.elapsed.Round(time.Millisecond), p.Events, p.eventsPerSecond(), p.keys)
	if p.writes == 0 || p.keys == 0 {
		t.Fatalf("nothing measured: %d writes, %d keystrokes", p.writes, p.keys)
	}
	if p.Events < p.writes {
		t.Fatalf("the page counted %d events for %d writes", p.Events, p.writes)
	}
	if len(p.Inputs) != p.keys {
		t.Fatalf("%d of %d keystrokes reflected", len(p.Inputs), p.keys)
	}
	fresh, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("rate").dataset.fresh`))
	if err != nil {
		t.Fatal(err)
	}
	if fresh != "0" {
		t.Fatalf("the page fell behind the server's history %s times (fresh snapshots)", fresh)
	}
	shot(t, ctx, dir, "02-after-churn")
	list := checkConsistent(t, ctx, f)

	// Filter and page at this size.
	in012 := 0
	for _, in := range list {
		if in.Name == "svc-012" {
			in012++
		}
	}
	nctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = chromedp.Do(nctx, chromedp.SendKeys(chromedp.ID("filter"), "svc-012"))
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the filter svc-012", fmt.Sprintf(`document.getElementById("shown").textContent === "%d of %d shown" && [...document.querySelectorAll("tr.inst")].every(r => r.dataset.id >= "i-01200" && r.dataset.id < "i-01300")`, in012, len(list)))
	nctx, cancel = context.WithTimeout(ctx, 30*time.Second)
	err = chromedp.Do(nctx, chromedp.KeyEvent(kb.Escape), chromedp.KeyEvent("]"), chromedp.KeyEvent("]"))
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "page 3", fmt.Sprintf(`document.getElementById("page").textContent === "3 / %d" && document.querySelector("tr.inst").dataset.id === %q`, (len(list)+99)/100, list[200].ID))
	shot(t, ctx, dir, "03-page-3")
}
