// SPDX-License-Identifier: Apache-2.0

package ui

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kernel-exporter/kernel_exporter/internal/printable"
)

//go:embed assets
var assets embed.FS

// Path is where the page is served; the data endpoint is Path+"data". A
// config's section is Path+"#"+config.
const Path = "/ui/"

// ProfilePath is where the flame graph page is served (with
// --profile.enable only: ProfileHandler, mounted by the serve command next
// to package profile's endpoints, which it fetches).
const ProfilePath = Path + "profile/"

// maxSince bounds the since parameter (2^53: exact in JavaScript).
const maxSince = 1 << 53

// csp lets the page load its own script and style and fetch its own data,
// nothing else.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Handler serves, under Path: the page (index.html, ui.css, ui.js) and
// data, the JSON of Sampler.Data for the query parameter since (a
// sequence number, 0 to 2^53; absent means 0). It answers 405 to methods
// other than GET and HEAD, 400 to a bad since (naming the parameter and
// value) and 404 to any other path.
func Handler(s *Sampler) http.Handler {
	return pages(Path, "index.html", []string{"ui.css", "ui.js"}, map[string]http.HandlerFunc{
		"data": func(w http.ResponseWriter, r *http.Request) { serveData(w, r, s) },
	})
}

// pages serves, under prefix, the embedded asset index (at prefix
// itself), the assets named in files, and the paths of dynamic by their
// handlers, each with the pages' security headers; 405 to methods but
// GET and HEAD, 404 to any other path.
func pages(prefix, index string, files []string, dynamic map[string]http.HandlerFunc) http.Handler {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		name := strings.TrimPrefix(r.URL.Path, prefix)
		if serve := dynamic[name]; serve != nil {
			serve(w, r)
			return
		}
		if name == "" {
			name = index
		} else if !slices.Contains(files, name) {
			http.NotFound(w, r)
			return
		}
		b, err := fs.ReadFile(sub, name)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		h.Set("Cache-Control", "no-cache")
		http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(b))
	})
}

// ProfileHandler serves the flame graph page under ProfilePath:
// profile.html (at ProfilePath itself), flame.js and flame.css, with the
// live page's security headers; 405 to methods but GET and HEAD, 404 to
// any other path. The page fetches package profile's /profile/ endpoints.
func ProfileHandler() http.Handler {
	return pages(ProfilePath, "profile.html", []string{"flame.js", "flame.css"}, nil)
}

func serveData(w http.ResponseWriter, r *http.Request, s *Sampler) {
	var since uint64
	if v := r.URL.Query().Get("since"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n > maxSince {
			http.Error(w, fmt.Sprintf("query parameter since %s: want a sequence number from 0 to %d", printable.Quote(v, 32), uint64(maxSince)), http.StatusBadRequest)
			return
		}
		since = n
	}
	b, err := json.Marshal(s.Data(since))
	if err != nil {
		http.Error(w, "encode data: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(b)
}
