// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestDigest(t *testing.T) {
	dir := t.TempDir()
	src := Source{Name: "x", Dir: dir}
	missing := digest(src)
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("x.yaml", "a")
	d1 := digest(src)
	if d1 == missing {
		t.Fatal("digest unchanged when the YAML appeared")
	}
	write("x.bpf.o", "obj")
	d2 := digest(src)
	if d2 == d1 || digest(src) != d2 {
		t.Fatal("digest must change with the object and be stable otherwise")
	}
	// Moving bytes between the two files is a change.
	write("x.yaml", "ao")
	write("x.bpf.o", "bj")
	if digest(src) == d2 {
		t.Fatal("digest unchanged when bytes moved from the object to the YAML")
	}
	if digest(Source{Name: "timers"}) != digest(Source{Name: "timers"}) {
		t.Fatal("a bundled program's digest changed")
	}
}

func TestFQName(t *testing.T) {
	d := prometheus.NewDesc("kernel_a_total", "help with \"quotes\"", []string{"l"}, nil)
	if got := fqName(d); got != "kernel_a_total" {
		t.Fatalf("fqName = %q", got)
	}
}

func TestReloadBeforeStart(t *testing.T) {
	e := New(Options{Sources: []Source{{Name: "timers"}}})
	if _, err := e.Reload(context.Background()); err == nil {
		t.Fatal("Reload before Start succeeded")
	}
}
