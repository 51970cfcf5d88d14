// SPDX-License-Identifier: Apache-2.0

package web

import (
	"context"
	"fmt"
	"net/http"
)

// Lifecycle and health endpoints, with Prometheus' paths and answers.
const (
	HealthyPath = "/-/healthy"
	ReadyPath   = "/-/ready"
	ReloadPath  = "/-/reload"
)

// healthy answers 200 to GET and HEAD while the server serves.
func healthy(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "Only GET or HEAD requests allowed", http.StatusMethodNotAllowed)
		return
	}
	fmt.Fprintln(w, "kernel_exporter is Healthy.")
}

// ready answers 200 once loaded is closed (every config's load has ended),
// 503 before. A nil loaded is always ready.
func ready(loaded <-chan struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "Only GET or HEAD requests allowed", http.StatusMethodNotAllowed)
			return
		}
		if loaded != nil {
			select {
			case <-loaded:
			default:
				http.Error(w, "Service Unavailable: configs still loading", http.StatusServiceUnavailable)
				return
			}
		}
		fmt.Fprintln(w, "kernel_exporter is Ready.")
	}
}

// reloadHandler runs reload on POST or PUT: 200 when it succeeded, 500
// with its error otherwise; 405 for other methods. Without enabled
// (--web.enable-lifecycle), or with no reload function, it answers 403
// as Prometheus does.
func reloadHandler(reload func(context.Context) error, enabled bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !enabled || reload == nil {
			http.Error(w, "Lifecycle API is not enabled (--web.enable-lifecycle).", http.StatusForbidden)
			return
		}
		if r.Method != http.MethodPost && r.Method != http.MethodPut {
			w.Header().Set("Allow", "POST, PUT")
			http.Error(w, "Only POST or PUT requests allowed", http.StatusMethodNotAllowed)
			return
		}
		if err := reload(r.Context()); err != nil {
			http.Error(w, fmt.Sprintf("failed to reload config: %s", err), http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "Reloaded.")
	}
}
