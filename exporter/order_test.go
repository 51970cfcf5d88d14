// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestOrder: a config waits until every config listed before it has
// settled its names, is refused when one of them defines the same metric
// (naming the metric and that config), and otherwise records its names;
// a config refused that way blocks no one after it.
func TestOrder(t *testing.T) {
	e := New(Options{Sources: []Source{{Name: "a"}, {Name: "b"}, {Name: "c"}}})
	ctx := context.Background()
	errc := make(chan error, 1)
	go func() { errc <- e.order(ctx, 1, []string{"kernel_x_total", "kernel_y_total"}) }()
	select {
	case err := <-errc:
		t.Fatalf("b settled before a (listed first): %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	if err := e.order(ctx, 0, []string{"kernel_x_total"}); err != nil {
		t.Fatal(err)
	}
	e.nameKnown(0)
	err := <-errc
	if err == nil || !strings.Contains(err.Error(), "metric kernel_x_total of config b is also defined by config a, which is listed first") {
		t.Fatalf("b: %v", err)
	}
	e.nameKnown(1)
	if e.conflicts["b"] != "a" {
		t.Errorf("conflicts %v, want b: a", e.conflicts)
	}
	// b is down: c may serve kernel_y_total.
	if err := e.order(ctx, 2, []string{"kernel_y_total"}); err != nil {
		t.Errorf("c: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	e2 := New(Options{Sources: []Source{{Name: "a"}, {Name: "b"}}})
	if err := e2.order(cctx, 1, nil); err == nil {
		t.Error("order waited on with a cancelled context returned nil")
	}
}
