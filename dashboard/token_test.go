package dashboard_test

import (
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// recordConn makes the page remember every connection state it shows, so
// a "reconnecting" shown between two polls is not missed.
const recordConn = `(() => {
  window.__conn = [];
  const el = document.getElementById("conn");
  const rec = () => { if (!window.__conn.includes(el.dataset.state)) window.__conn.push(el.dataset.state); };
  rec();
  new MutationObserver(rec).observe(el, {attributes: true, childList: true, characterData: true, subtree: true});
  return true;
})()`

// TestDashboardTokenUnsendable: a token with characters a browser cannot
// send in a header (beyond Latin-1, which fetch refuses), that the server
// refuses (a control character: 400) or that could never match (a Latin-1
// letter goes as one byte, not UTF-8) is refused in the form with a message
// naming the characters; the page neither stores it nor tries to connect
// with it (it never shows "reconnecting"). The right token then works. A
// token kept in the tab from before that cannot be sent is dropped at load,
// with the same message.
func TestDashboardTokenUnsendable(t *testing.T) {
	dir := artifacts(t)
	s := startServer(t, "s3cret")
	s.register(map[string]any{"id": "api-1", "name": "api", "type": "router", "address": "127.0.0.1:9001", "ttl": "1m"})
	ctx := browser(t)
	do(t, ctx, "open the page and see the token form", chromedp.Navigate(s.url()+"/"), chromedp.WaitVisible(chromedp.ID("token")))
	waitJS(t, ctx, "the page to say a token is needed", `document.getElementById("conn").dataset.state === "auth"`)
	waitJS(t, ctx, "the connection states recorded", recordConn)

	for _, c := range []struct{ token, names string }{
		{"s3cret\u20ac", "\u201c\u20ac\u201d (U+20AC)"},
		{"\u043f\u0430\u0440\u043e\u043b\u044c", "\u201c\u043f\u201d (U+043F)"},
		{"s3\u0001cret", "U+0001 (a control character)"},
		{"s\u00e9cret", "\u201c\u00e9\u201d (U+00E9)"},
	} {
		// The value is set in the page (a control character cannot be
		// typed) and the form submitted as Enter would.
		waitJS(t, ctx, fmt.Sprintf("the token %q submitted", c.token), fmt.Sprintf(
			`(() => { const f = document.getElementById("token"); f.value = %q; document.getElementById("tokenform").requestSubmit(); return true; })()`, c.token))
		waitJS(t, ctx, fmt.Sprintf("the message for %q", c.token), fmt.Sprintf(
			`(() => { const e = document.getElementById("tokenerror"); return !e.hidden && e.textContent.includes("The token contains characters that cannot be sent: ") && e.textContent.includes(%q) && `+
				`!document.getElementById("tokenform").hidden && document.getElementById("conn").dataset.state === "auth" && document.getElementById("conn").textContent === "token cannot be sent" && sessionStorage.getItem("sb-token") === null; })()`, c.names))
	}
	shot(t, ctx, dir, "01-unsendable")

	waitJS(t, ctx, "the token field cleared", `(document.getElementById("token").value = "", true)`)
	do(t, ctx, "enter the right token", chromedp.SendKeys(chromedp.ID("token"), "s3cret"+kb.Enter))
	waitJS(t, ctx, "the stream to be live with the token", `document.getElementById("conn").dataset.state === "live" && document.getElementById("tokenform").hidden && document.getElementById("tokenerror").hidden && `+row("api-1")+` !== null`)
	// Every unsendable token was refused before any request: the page never
	// went round its reconnect loop.
	waitJS(t, ctx, "no reconnecting in the states shown", `!window.__conn.includes("reconnecting")`)

	// A token from before that cannot be sent: dropped at load, said why.
	waitJS(t, ctx, "an unsendable token kept in the tab", `(sessionStorage.setItem("sb-token", "s3cret\u20ac"), true)`)
	do(t, ctx, "reload the page", chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("token")))
	waitJS(t, ctx, "the message for the kept token",
		`document.getElementById("tokenerror").textContent.includes("cannot be sent: \u201c\u20ac\u201d (U+20AC)") && !document.getElementById("tokenerror").hidden && document.getElementById("conn").dataset.state === "auth" && sessionStorage.getItem("sb-token") === null`)
}
