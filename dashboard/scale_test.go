package dashboard_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/switchboard-io/switchboard"
)

// registerMany registers ids [from, to) directly on the catalog, 8 at a
// time: svc-NNN names (100 instances each), 20 capabilities.
func registerMany(t *testing.T, cat switchboard.Catalog, from, to int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := from + w; i < to; i += 8 {
				_, err := cat.Register(context.Background(), switchboard.Instance{
					ID: fmt.Sprintf("i-%05d", i), Name: fmt.Sprintf("svc-%03d", i/100), Type: "worker",
					Address:      fmt.Sprintf("10.0.%d.%d:8080", i/250, i%250),
					Capabilities: []string{fmt.Sprintf("cap-%02d", i%20)}, TTL: 10 * time.Minute,
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestDashboardTenThousand: 10,000 instances arrive in the snapshot and are
// paginated (100 rows a page, grouped by name); a burst of 1,000 more
// arrives live; filtering and paging work at that size. The longest gap
// between animation frames during the burst is logged (measured, not
// asserted: the machine is shared).
func TestDashboardTenThousand(t *testing.T) {
	if testing.Short() {
		t.Skip("registers 11,000 instances (-short)")
	}
	dir := artifacts(t)
	s := startServer(t, "")
	registerMany(t, s.cat, 0, 10000)
	ctx := browser(t)
	nctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	err := chromedp.Do(nctx, chromedp.Navigate(s.url()+"/"), chromedp.WaitVisible(chromedp.ID("rows")))
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "10,000 instances in the snapshot", `document.getElementById("shown").textContent === "10000 instances" && document.getElementById("page").textContent === "1 / 100" && document.querySelectorAll("tr.inst").length === 100`)
	shot(t, ctx, dir, "01-ten-thousand")

	// Frame gaps while a burst arrives.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { window.__maxGap = 0; let last = performance.now();
	  const f = (t) => { window.__maxGap = Math.max(window.__maxGap, t - last); last = t; if (!window.__stop) requestAnimationFrame(f); };
	  requestAnimationFrame(f); return true; })()`)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	registerMany(t, s.cat, 10000, 11000)
	waitJS(t, ctx, "the burst of 1,000", `document.getElementById("shown").textContent === "11000 instances"`)
	took := time.Since(start)
	gap, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`window.__stop = true, window.__maxGap`))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("burst: 1,000 registrations shown in %v (%.0f events/s); longest frame gap %.0f ms (measured on a shared machine, not asserted)", took.Round(time.Millisecond), 1000/took.Seconds(), gap)

	// Filter and page at this size.
	nctx, cancel = context.WithTimeout(ctx, 30*time.Second)
	err = chromedp.Do(nctx, chromedp.SendKeys(chromedp.ID("filter"), "svc-042"))
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the filter svc-042", `document.getElementById("shown").textContent === "100 of 11000 shown" && [...document.querySelectorAll("tr.inst")].every(r => r.dataset.id >= "i-04200" && r.dataset.id < "i-04300")`)
	nctx, cancel = context.WithTimeout(ctx, 30*time.Second)
	err = chromedp.Do(nctx, chromedp.KeyEvent(kb.Escape), chromedp.KeyEvent("]"), chromedp.KeyEvent("]"))
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "page 3 of 110", `document.getElementById("page").textContent === "3 / 110" && document.querySelector("tr.inst").dataset.id === "i-00200"`)
	shot(t, ctx, dir, "02-page-3")
}
