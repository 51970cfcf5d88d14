// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"golang.org/x/sys/unix"
)

// valuesYAML exports testdata/values/values.bpf.c: a signed gauge, a
// struct value as two counters, and a per-CPU histogram under a cpu label.
const valuesYAML = `metrics:
  gauges:
    - name: values_offset
      help: offset of the last lseek on fd -1, by process (value kinds test)
      signed: true
      labels:
        - name: pid
          size: 4
          decoders:
            - name: uint
  counters:
    - name: values_io
      help: pwrite64 calls on fd -1, by process (value kinds test)
      labels:
        - name: pid
          size: 4
          decoders:
            - name: uint
      values:
        - field: bytes
          name: values_io_bytes_total
          help: bytes asked of pwrite64 on fd -1, by process (value kinds test)
        - field: calls
          name: values_io_calls_total
  histograms:
    - name: values_count
      help: pread64 counts on fd -1, by process and CPU (value kinds test)
      per_cpu: PER_CPU
      bucket_type: exp2
      bucket_min: 0
      bucket_max: 16
      labels:
        - name: pid
          size: 4
          decoders:
            - name: uint
        - name: bucket
          size: 4
`

// TestValueKinds loads testdata/values/values.bpf.c twice: as "values"
// with per_cpu: label, and as "summed" (namespace summed) with the
// default per_cpu: sum. It checks exact values:
//   - the gauge follows lseek(-1, off) offsets up, down and below zero;
//   - pwrite64(-1, buf, n) calls of 100, 100, 100 and 1000 bytes give
//     bytes 1300 and calls 4, two metrics from one struct value;
//   - pread64(-1, buf, n) from a thread pinned to CPU 0 (3 calls of 1000
//     bytes, slot 10, le 1024) then CPU 1 (5 calls of 5 bytes, slot 3,
//     le 8) give per-CPU buckets under cpu="0" and cpu="1", and their sum
//     in the summed config.
func TestValueKinds(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 CPUs to pin the per-CPU histogram's thread to CPU 0 then CPU 1")
	}
	if runtime.GOARCH != "amd64" {
		t.Skip("testdata/values/values.bpf.c matches x86_64 syscall numbers")
	}
	dir := t.TempDir()
	compileBPF(t, filepath.Join("integration", "testdata", "values", "values.bpf.c"), filepath.Join(dir, "values.bpf.o"))
	copyProbeFile(t, filepath.Join(dir, "values.bpf.o"), filepath.Join(dir, "summed.bpf.o"))
	writeProbeConfig(t, dir, "values", strings.Replace(valuesYAML, "PER_CPU", "label", 1))
	writeProbeConfig(t, dir, "summed", "namespace: summed\n"+strings.Replace(valuesYAML, "PER_CPU", "sum", 1))
	e := Start(t, "--config.dir="+dir, "--config.names=values,summed")
	for _, c := range []string{"values", "summed"} {
		if v := e.Scrape().Value("kernel_exporter_config_up", L("config", c)); v != 1 {
			t.Fatalf("config %s is not up\n%s", c, e.Logs())
		}
	}
	self := L("pid", strconv.Itoa(os.Getpid()))

	// The gauge: up, down, below zero.
	for _, off := range []int64{12345, 3, -7} {
		if _, err := unix.Seek(-1, off, 0); err != unix.EBADF {
			t.Fatalf("lseek(-1): %v, want EBADF", err)
		}
		ms := e.Scrape()
		if got := ms.Value("kernel_values_offset", self); got != float64(off) {
			t.Fatalf("gauge after lseek(-1, %d) = %v\n%s", off, got, ms.seriesDump("kernel_values_offset"))
		}
		if typ := ms["kernel_values_offset"].GetType(); typ != dto.MetricType_GAUGE {
			t.Fatalf("kernel_values_offset is a %v, want a gauge", typ)
		}
	}

	// The struct value: two counters from one map.
	buf := make([]byte, 1000)
	for _, n := range []int{100, 100, 100, 1000} {
		if _, err := unix.Pwrite(-1, buf[:n], 0); err != unix.EBADF {
			t.Fatalf("pwrite64(-1): %v, want EBADF", err)
		}
	}
	ms := e.Scrape()
	for name, want := range map[string]float64{"kernel_values_io_bytes_total": 1300, "kernel_values_io_calls_total": 4} {
		if got := ms.Value(name, self); got != want {
			t.Fatalf("%s = %v, want %v\n%s", name, got, want, ms.seriesDump(name))
		}
		if typ := ms[name].GetType(); typ != dto.MetricType_COUNTER {
			t.Fatalf("%s is a %v, want a counter", name, typ)
		}
	}

	// The per-CPU histogram: CPU 0 then CPU 1.
	pinned := func(cpu, calls, size int) {
		done := make(chan error)
		go func() {
			runtime.LockOSThread() // the thread ends with the goroutine, pinned
			var set unix.CPUSet
			set.Set(cpu)
			if err := unix.SchedSetaffinity(0, &set); err != nil {
				done <- err
				return
			}
			for range calls {
				if _, err := unix.Pread(-1, buf[:size], 0); err != unix.EBADF {
					done <- err
					return
				}
			}
			done <- nil
		}()
		if err := <-done; err != nil {
			t.Fatalf("pread64(-1) on CPU %d: %v", cpu, err)
		}
	}
	pinned(0, 3, 1000)
	pinned(1, 5, 5)
	ms = e.Scrape()
	for _, tc := range []struct {
		name, cpu   string
		le          float64
		atLE, count uint64
		series      int
	}{
		{"kernel_values_count", "0", 8, 0, 3, 1},
		{"kernel_values_count", "0", 1024, 3, 3, 1},
		{"kernel_values_count", "1", 8, 5, 5, 1},
		{"kernel_values_count", "1", 1024, 5, 5, 1},
		{"summed_values_count", "", 8, 5, 8, 1},
		{"summed_values_count", "", 1024, 8, 8, 1},
	} {
		want := L("pid", self["pid"])
		if tc.cpu != "" {
			want["cpu"] = tc.cpu
		}
		count, _, atLE := ms.Hist(tc.name, want, tc.le)
		if n := ms.Series(tc.name, want); n != tc.series || count != tc.count || atLE != int64(tc.atLE) {
			t.Fatalf("%s %v: %d series, count %d, %d at le %v; want %d, %d and %d\n%s",
				tc.name, want, n, count, atLE, tc.le, tc.series, tc.count, tc.atLE, ms.seriesDump(tc.name))
		}
	}
	if cpus := ms.LabelValues("summed_values_count", "cpu"); len(cpus) != 0 {
		t.Fatalf("summed histogram has cpu labels %v", cpus)
	}
}
