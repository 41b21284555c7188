// Package dashboard is the live web page of `switchboard serve`: plain
// HTML, CSS and JavaScript embedded in the binary (no CDN, no build step)
// that shows the catalog as it changes, over the server's own API only
// (one SSE stream of GET /v1/watch?all=true per page, plus /v1/info,
// /v1/leases and /v1/instances). Mount Handler as httpapi.Options.UI.
package dashboard

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed static
var files embed.FS

// Handler serves the dashboard: index.html at / and its assets beside it.
// Only GET and HEAD are answered (405 otherwise); unknown paths are 404.
// The page talks only to its own origin, which its Content-Security-Policy
// enforces.
func Handler() http.Handler {
	sub, err := fs.Sub(files, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	fsrv := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h := w.Header()
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'")
		fsrv.ServeHTTP(w, r)
	})
}
