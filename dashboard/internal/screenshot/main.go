// Command screenshot saves a PNG of the dashboard of a running server with
// headless Chromium (docs/dashboard.png):
//
//	switchboard serve --demo --listen 127.0.0.1:8080 &
//	go run ./dashboard/internal/screenshot -url http://127.0.0.1:8080/ -out docs/dashboard.png
//
// With -lease it first acquires a lease through the API, so the leases panel
// has a row.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/chromedp/chromedp"
)

func main() {
	url := flag.String("url", "http://127.0.0.1:8080/", "the dashboard's address")
	out := flag.String("out", "dashboard.png", "the PNG to write")
	wait := flag.Duration("wait", 8*time.Second, "how long the page runs before the picture")
	lease := flag.String("lease", "", "acquire this lease first (holder demo-compactor, ttl 60s)")
	chromium := flag.String("chromium", "/usr/bin/chromium", "the browser")
	width := flag.Int("width", 1400, "window width")
	height := flag.Int("height", 820, "window height")
	dark := flag.Bool("dark", false, "dark theme")
	flag.Parse()
	if err := run(*url, *out, *wait, *lease, *chromium, *width, *height, *dark); err != nil {
		fmt.Fprintln(os.Stderr, "screenshot:", err)
		os.Exit(1)
	}
}

func run(url, out string, wait time.Duration, lease, chromium string, w, h int, dark bool) error {
	if lease != "" {
		body := fmt.Sprintf(`{"name":%q,"holder":"demo-compactor","ttl":"60s"}`, lease)
		resp, err := http.Post(url+"v1/leases/acquire", "application/json", bytes.NewBufferString(body))
		if err != nil {
			return err
		}
		resp.Body.Close()
	}
	dir, err := os.MkdirTemp("", "switchboard-shot-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	actx, cancel := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(dir), chromedp.WindowSize(w, h))
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	if err := chromedp.Do(ctx); err != nil {
		return err
	}
	steps := []chromedp.Action[chromedp.Void]{chromedp.Navigate(url)}
	if dark {
		steps = append(steps, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			_, err := chromedp.Evaluate[bool](`localStorage.setItem("sb-theme","dark"), location.reload(), true`)(ctx, t)
			return err
		}))
	}
	steps = append(steps, chromedp.Sleep(wait))
	tctx, tcancel := context.WithTimeout(ctx, wait+60*time.Second)
	defer tcancel()
	if err := chromedp.Do(tctx, steps...); err != nil {
		return err
	}
	png, err := chromedp.Run(tctx, chromedp.CaptureScreenshot())
	if err != nil {
		return err
	}
	return os.WriteFile(out, png, 0o644)
}
