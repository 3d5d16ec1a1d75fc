// Package web is perflab's dashboard: static HTML, CSS and JavaScript
// embedded in the binary, so that `perflab serve` needs no CDN and fetches
// nothing at run time. The page is a single-page app with hash routes
// that reads everything from the REST API under /api/v1.
package web

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed static
var static embed.FS

// FS returns the dashboard's files, rooted at the directory that holds
// index.html.
func FS() fs.FS {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		// fs.Sub fails only on an invalid path; "static" is a constant.
		panic("web: sub static: " + err.Error())
	}
	return sub
}

// Handler serves the dashboard. Mount it at "/" (or under a prefix with
// http.StripPrefix): index.html for the root, the assets by name. Routes
// live in the URL's hash, so no server-side fallback is needed. Responses
// forbid framing by other origins and say not to sniff types; the page's
// content security policy (in index.html) allows only its own origin.
func Handler() http.Handler {
	files := http.FileServerFS(FS())
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "SAMEORIGIN")
		// The assets change with the binary, not while it runs; revalidate
		// so that a new binary's page is never mixed with an old script.
		h.Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}
