// SPDX-License-Identifier: Apache-2.0

package web

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

func TestHealthy(t *testing.T) {
	for method, want := range map[string]int{"GET": 200, "HEAD": 200, "POST": 405} {
		w := httptest.NewRecorder()
		healthy(w, httptest.NewRequest(method, HealthyPath, nil))
		if w.Code != want {
			t.Errorf("%s %s: %d, want %d", method, HealthyPath, w.Code, want)
		}
	}
}

func TestReady(t *testing.T) {
	loaded := make(chan struct{})
	h := ready(loaded)
	get := func() int {
		w := httptest.NewRecorder()
		h(w, httptest.NewRequest("GET", ReadyPath, nil))
		return w.Code
	}
	if c := get(); c != http.StatusServiceUnavailable {
		t.Fatalf("before load: %d, want 503", c)
	}
	close(loaded)
	if c := get(); c != 200 {
		t.Fatalf("after load: %d, want 200", c)
	}
}

func TestReloadHandler(t *testing.T) {
	var calls atomic.Int32
	var fail error
	reload := func(context.Context) error { calls.Add(1); return fail }
	do := func(h http.HandlerFunc, method string) int {
		w := httptest.NewRecorder()
		h(w, httptest.NewRequest(method, ReloadPath, nil))
		return w.Code
	}
	if c := do(reloadHandler(reload, false), "POST"); c != http.StatusForbidden {
		t.Errorf("disabled POST: %d, want 403", c)
	}
	on := reloadHandler(reload, true)
	if c := do(on, "GET"); c != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d, want 405", c)
	}
	if calls.Load() != 0 {
		t.Fatalf("reload ran %d times on refused requests", calls.Load())
	}
	if c := do(on, "POST"); c != 200 {
		t.Errorf("POST: %d, want 200", c)
	}
	fail = errors.New("config x: bad")
	if c := do(on, "PUT"); c != http.StatusInternalServerError {
		t.Errorf("failing PUT: %d, want 500", c)
	}
	if calls.Load() != 2 {
		t.Errorf("reload ran %d times, want 2", calls.Load())
	}
}

func TestMetricsPathNotLifecycle(t *testing.T) {
	if err := CheckMetricsPath("/-/metrics", false); err == nil {
		t.Fatal("/-/metrics accepted as the metrics path")
	}
}
