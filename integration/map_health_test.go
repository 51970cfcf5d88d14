// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// fillWhich is the getpriority "which" that testdata/maphealth/fill.bpf.c
// counts (an invalid value: the call fails with EINVAL and nothing else
// passes it).
const fillWhich = 0x4b45

// writeMapFillConfig compiles testdata/maphealth/fill.bpf.c into dir and
// writes the config "mapfill" beside it: one counter, fill_total, labelled
// by who (a uint). Start the exporter with --config.dir=dir
// --config.names=mapfill.
func writeMapFillConfig(t *testing.T, dir string) {
	t.Helper()
	compileBPF(t, filepath.Join("integration", "testdata", "maphealth", "fill.bpf.c"), filepath.Join(dir, "mapfill.bpf.o"))
	writeProbeConfig(t, dir, "mapfill", `metrics:
  counters:
    - name: fill_total
      help: getpriority calls with the test's which, by who
      labels:
        - name: who
          size: 4
          decoders:
            - name: uint
`)
}

// fillCalls calls getpriority(fillWhich, who) for who in [from, to).
func fillCalls(t *testing.T, from, to int) {
	t.Helper()
	for who := from; who < to; who++ {
		_, _, errno := unix.Syscall(unix.SYS_GETPRIORITY, fillWhich, uintptr(who), 0)
		if errno != unix.EINVAL {
			t.Fatalf("getpriority(%#x, %d): %v, want EINVAL", fillWhich, who, errno)
		}
	}
}

// TestMapHealth runs a user program whose 64-entry hash map fills up: 100
// distinct keys are inserted, so 64 succeed and 36 fail, and a second pass
// over the same keys fails 36 more times. It checks
// kernel_exporter_map_entries (64), _map_max_entries (64), _map_memory_bytes
// (the map's fdinfo memlock, read here through a file descriptor of our
// own), _map_update_errors_total (exactly 36, then 72), the WARN logged once
// and the landing page's mark.
func TestMapHealth(t *testing.T) {
	dir := t.TempDir()
	writeMapFillConfig(t, dir)
	e := Start(t, "--programs=none", "--config.dir="+dir, "--config.names=mapfill")
	ms := e.Scrape()
	if ms.Value("kernel_exporter_config_up", L("config", "mapfill")) != 1 {
		t.Fatalf("config mapfill down: %v\n%s", ms.LabelValues("kernel_exporter_config_error_info", "reason"), e.Logs())
	}
	sel := L("config", "mapfill", "map", "fill_total")
	if v := ms.Value("kernel_exporter_map_update_errors_total", sel); v != 0 {
		t.Fatalf("update errors before any insert = %v, want 0", v)
	}

	fillCalls(t, 0, 100)
	ms = e.Scrape()
	ms = e.Scrape() // the WARN must still be there once
	if v := ms.Value("kernel_exporter_map_entries", sel); v != 64 {
		t.Errorf("map_entries = %v, want 64", v)
	}
	if v := ms.Value("kernel_exporter_map_max_entries", sel); v != 64 {
		t.Errorf("map_max_entries = %v, want 64", v)
	}
	if v := ms.Value("kernel_exporter_map_update_errors_total", sel); v != 36 {
		t.Errorf("map_update_errors_total = %v, want 36 (100 distinct keys into 64 entries)", v)
	}
	if n := ms.Series("kernel_fill_total", nil); n != 64 {
		t.Errorf("kernel_fill_total has %d series, want 64 (one per key that got in)", n)
	}
	m := findMap(t, "fill_total", 64)
	info, err := m.Info()
	if err != nil {
		t.Fatal(err)
	}
	memlock, ok := info.Memlock()
	if !ok || memlock == 0 {
		t.Fatal("no memlock in the map's fdinfo")
	}
	if v := ms.Value("kernel_exporter_map_memory_bytes", sel); v != float64(memlock) {
		t.Errorf("map_memory_bytes = %v, want the fdinfo memlock %d", v, memlock)
	}
	t.Logf("fill_total: 64 of 64 entries, memlock %d bytes, 36 failed inserts", memlock)

	fillCalls(t, 0, 100) // keys 0..63 exist; 64..99 fail again
	ms = e.Scrape()
	if v := ms.Value("kernel_exporter_map_update_errors_total", sel); v != 72 {
		t.Errorf("map_update_errors_total after a second pass = %v, want 72", v)
	}
	if v := ms.Value("kernel_exporter_map_entries", sel); v != 64 {
		t.Errorf("map_entries after a second pass = %v, want 64", v)
	}

	if n := strings.Count(e.Logs(), "BPF map nearly full"); n != 1 || !strings.Contains(e.Logs(), "map=fill_total") {
		t.Errorf("%d WARN lines for the full map, want 1:\n%s", n, e.Logs())
	}
	row := landingRow(e.Get("/"), "mapfill")
	if !strings.Contains(row, "maps nearly full") || !strings.Contains(row, "fill_total (64/64)") {
		t.Errorf("landing page row of mapfill does not mark fill_total as full:\n%s", row)
	}
}
