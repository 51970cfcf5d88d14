// SPDX-License-Identifier: Apache-2.0

package integration

// The compatibility suite: programs of ours written in
// cloudflare/ebpf_exporter's format (testdata/compat/*.yaml use only its v2
// keys), run under --compat.ebpf-exporter, whose tests assert the output
// the reference gives for the same events: label texts, bucket bounds,
// values. docs/migrating.md ("Compatibility suite") maps each of the
// reference's examples to the test that covers its features.
//
// The expectations were checked against the reference itself: with
// KERNEL_EXPORTER_BINARY naming a wrapper that drops --programs and
// --compat.ebpf-exporter and runs ebpf_exporter with the other flags, the
// TestCompat* tests of these files pass (compatUp accepts its
// ebpf_exporter_enabled_configs).

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"
	"unsafe"

	dto "github.com/prometheus/client_model/go"
	"golang.org/x/sys/unix"
)

// compatSrc holds the suite's programs and configs.
const compatSrc = "integration/testdata/compat"

// startCompat builds testdata/compat/<name> (with the compiler flags
// cflags) and starts the exporter with it alone under
// --compat.ebpf-exporter, failing unless the config is up.
func startCompat(t *testing.T, name string, cflags ...string) *Exporter {
	t.Helper()
	dir := buildConfigDir(t, compatSrc, name, cflags...)
	e := Start(t, "--programs=none", "--config.dir="+dir, "--config.names="+name, "--compat.ebpf-exporter")
	if !compatUp(e.Scrape(), name) {
		t.Fatalf("config %s is not up\n%s", name, e.Logs())
	}
	return e
}

// compatUp reports whether config name is up: kernel_exporter_config_up,
// or the reference's ebpf_exporter_enabled_configs (see the file comment).
func compatUp(ms Metrics, name string) bool {
	return ms.Value("kernel_exporter_config_up", L("config", name)) == 1 ||
		ms.Value("ebpf_exporter_enabled_configs", L("name", name)) == 1
}

// magicPread makes a pread64(fd, buf, count, pos) call on a magic negative
// fd, which the suite's programs recognise; it must fail with EBADF.
func magicPread(fd int, buf unsafe.Pointer, count, pos uint64) error {
	_, _, errno := unix.Syscall6(unix.SYS_PREAD64, uintptr(fd), uintptr(buf), uintptr(count), uintptr(pos), 0, 0)
	if errno != unix.EBADF {
		return fmt.Errorf("pread64(%d): %v, want EBADF", fd, errno)
	}
	return nil
}

// compatHist is the expected histogram of one label set: bucket bounds
// and cumulative counts in order (+Inf excluded), count and sum.
type compatHist struct {
	labels map[string]string
	le     []float64
	cum    []uint64
	count  uint64
	sum    float64
}

// checkHist compares the histogram series of name whose labels are
// exactly w.labels with w. Bounds are compared exactly (both exporters
// compute them as slot × bucket_multiplier in float64), the sum to 1e-12
// relative.
func checkHist(t *testing.T, ms Metrics, name string, w compatHist) {
	t.Helper()
	var h *dto.Histogram
	for _, m := range ms[name].GetMetric() {
		if len(m.GetLabel()) == len(w.labels) && matches(m, w.labels) {
			h = m.GetHistogram()
		}
	}
	if h == nil {
		t.Errorf("%s%v: no series; have:\n%s", name, w.labels, ms.seriesDump(name))
		return
	}
	var le []float64
	var cum []uint64
	for _, b := range h.GetBucket() {
		if !math.IsInf(b.GetUpperBound(), 1) {
			le = append(le, b.GetUpperBound())
			cum = append(cum, b.GetCumulativeCount())
		}
	}
	if fmt.Sprint(le) != fmt.Sprint(w.le) || fmt.Sprint(cum) != fmt.Sprint(w.cum) {
		t.Errorf("%s%v: buckets le=%v cum=%v, want le=%v cum=%v", name, w.labels, le, cum, w.le, w.cum)
	}
	if h.GetSampleCount() != w.count || math.Abs(h.GetSampleSum()-w.sum) > 1e-12*math.Max(1, math.Abs(w.sum)) {
		t.Errorf("%s%v: count %d sum %v, want count %d sum %v", name, w.labels, h.GetSampleCount(), h.GetSampleSum(), w.count, w.sum)
	}
}

// checkCounters compares every series of the counter name with want, label
// sets rendered as by seriesKey: no series missing, none more, values
// equal.
func checkCounters(t *testing.T, ms Metrics, name string, want map[string]float64) {
	t.Helper()
	got := map[string]float64{}
	for _, m := range ms[name].GetMetric() {
		got[seriesKey(m)] += m.GetCounter().GetValue() + m.GetUntyped().GetValue()
	}
	var keys []string
	for k := range want {
		keys = append(keys, k)
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		if got[k] != want[k] {
			t.Errorf("%s{%s} = %v, want %v", name, k, got[k], want[k])
		}
	}
}

// seriesKey renders the labels of m as `a="x",b="y"`, sorted by name.
func seriesKey(m *dto.Metric) string {
	var parts []string
	for _, lp := range m.GetLabel() {
		parts = append(parts, fmt.Sprintf("%s=%q", lp.GetName(), lp.GetValue()))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}
