package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestDashboardDetailComponents: the detail view shows a components
// document exactly as JSON.stringify prints it, whatever its strings hold
// (quotes, escaped quotes, apostrophes, digits, literals, markup), with
// each string highlighted whole and nothing in it read as markup.
func TestDashboardDetailComponents(t *testing.T) {
	s := startServer(t, "")
	tricky := `say \"hi\" it's 5 & <b id=\"x\">bold</b> true`
	components := `{"description":"` + tricky + `","n":12,"ok":false,"tags":["a'b","q\"it's","x\\\"y 7","</pre><img src=x>"]}`
	var probe any
	if err := json.Unmarshal([]byte(components), &probe); err != nil {
		t.Fatal(err)
	}
	s.register(map[string]any{"id": "c-1", "name": "comp", "type": "router", "address": "127.0.0.1:9001", "ttl": "1m",
		"components": json.RawMessage(components)})
	ctx := browser(t)
	nctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err := chromedp.Do(nctx, chromedp.Navigate(s.url()+"/"), chromedp.WaitVisible(chromedp.ID("rows")))
	cancel()
	if err != nil {
		t.Fatalf("open the page: %v", err)
	}
	waitJS(t, ctx, "a click on the detail button of c-1",
		`(() => { const b = document.querySelector('button[data-open="c-1"]'); if (b) b.click(); return b !== null; })()`)
	want := fmt.Sprintf(`JSON.stringify(JSON.parse(%q), null, 2)`, components)
	waitJS(t, ctx, "the components shown as JSON.stringify prints them",
		`document.getElementById("detail").open && document.getElementById("d-components").textContent === `+want)
	for _, str := range []string{`"say \"hi\" it's 5 & <b id=\"x\">bold</b> true"`, `"a'b"`, `"x\\\"y 7"`, `"</pre><img src=x>"`} {
		waitJS(t, ctx, "the string "+str+" highlighted whole",
			fmt.Sprintf(`[...document.querySelectorAll("#d-components .s")].some((e) => e.textContent === %q)`, str))
	}
	waitJS(t, ctx, "no markup from the document", `document.querySelectorAll("#d-components b, #d-components img, #x").length === 0 && document.querySelectorAll("#d-components .n").length === 1`)
}
