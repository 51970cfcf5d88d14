// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// btflYAML exports testdata/btflabels/btflabels.bpf.c with no labels at
// all: they come from the BTF of the maps' key structs.
const btflYAML = `metrics:
  counters:
    - name: btfl_calls_total
      help: getppid, getpgrp, getsid and getpriority calls by command, process and call (BTF labels test)
  histograms:
    - name: btfl_call_slots
      help: The same calls, each observed in slot 3 (BTF labels test)
      bucket_type: exp2
      bucket_min: 0
      bucket_max: 8
`

// TestBTFLabels runs a user program whose YAML gives no labels. Its counter
// is keyed by struct btfl_key { char comm[16]; __u32 pid; enum btfl_call
// call (1 byte, 3 bytes of padding after it) }: the served series carry
// labels comm, pid and call, named after the fields, with the test's
// command name, its pid and the enum's names from BTF (BTFL_GETPPID,
// BTFL_GETPGRP, BTFL_GETSID), and a value the enum does not name (9) as
// its number; each series counts exactly the calls made. The histogram,
// keyed by struct btfl_slot_key { __u32 pid; enum btfl_call call; __u32
// bucket }, gets labels pid and call and its buckets from the last field.
// --config.check --verbose prints the inferred layout.
func TestBTFLabels(t *testing.T) {
	dir := t.TempDir()
	compileBPF(t, filepath.Join("integration", "testdata", "btflabels", "btflabels.bpf.c"), filepath.Join(dir, "btfl.bpf.o"))
	writeProbeConfig(t, dir, "btfl", btflYAML)

	out, errOut, code := runExporter(t, "--programs=none", "--config.dir="+dir, "--config.names=btfl", "--config.check", "--verbose")
	if code != 0 {
		t.Fatalf("--config.check --verbose exited %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		"kernel_btfl_calls_total (map btfl_calls_total, 24-byte key): labels inferred from BTF",
		"comm off   0 size  16  string",
		"pid  off  16 size   4  uint",
		"call off  20 size   1  uint,static_map",
		"kernel_btfl_call_slots (map btfl_call_slots, 12-byte key): labels inferred from BTF",
		"bucket off   8 size   4  (bucket slot)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("--config.check --verbose does not print %q:\n%s", want, out)
		}
	}

	e := Start(t, "--programs=none", "--config.dir="+dir, "--config.names=btfl")
	if v := e.Scrape().Value("kernel_exporter_config_up", L("config", "btfl")); v != 1 {
		t.Fatalf("btfl config is not up\n%s", e.Logs())
	}
	b, err := os.ReadFile("/proc/self/comm")
	if err != nil {
		t.Fatal(err)
	}
	comm, pid := strings.TrimSuffix(string(b), "\n"), strconv.Itoa(os.Getpid())
	calls := map[string]int{"BTFL_GETPPID": 7, "BTFL_GETPGRP": 5, "BTFL_GETSID": 3, "9": 2}
	for range calls["BTFL_GETPPID"] {
		syscall.RawSyscall(syscall.SYS_GETPPID, 0, 0, 0)
	}
	for range calls["BTFL_GETPGRP"] {
		syscall.RawSyscall(syscall.SYS_GETPGRP, 0, 0, 0) // syscall.Getpgrp calls getpgid
	}
	for range calls["BTFL_GETSID"] {
		syscall.RawSyscall(syscall.SYS_GETSID, 0, 0, 0)
	}
	for range calls["9"] {
		syscall.RawSyscall(syscall.SYS_GETPRIORITY, 0, 0, 0)
	}

	ms := e.Scrape()
	const counter, hist = "kernel_btfl_calls_total", "kernel_btfl_call_slots"
	if n := ms.Series(counter, L("pid", pid)); n != len(calls) {
		t.Errorf("%d series of pid %s, want %d (one per call)\n%s", n, pid, len(calls), ms.seriesDump(counter))
	}
	for call, n := range calls {
		if v := ms.Value(counter, L("comm", comm, "pid", pid, "call", call)); v != float64(n) {
			t.Errorf("%s{comm=%q,pid=%s,call=%s} = %v, want %d\n%s", counter, comm, pid, call, v, n, ms.seriesDump(counter))
		}
		// Slot 3 is the bucket le=8 (exp2); no sum slot is written.
		if count, _, at8 := ms.Hist(hist, L("pid", pid, "call", call), 8); count != uint64(n) || at8 != int64(n) {
			t.Errorf("%s{pid=%s,call=%s}: count %d, le=8 %d, want %d in bucket 8", hist, pid, call, count, at8, n)
		}
	}
	if mf := ms[counter]; mf != nil {
		for _, m := range mf.GetMetric() {
			var names []string
			for _, lp := range m.GetLabel() {
				names = append(names, lp.GetName())
			}
			if strings.Join(names, ",") != "comm,pid,call" {
				t.Fatalf("series labels %v, want comm, pid, call (the key fields in order, no padding)", names)
			}
		}
	}
}
