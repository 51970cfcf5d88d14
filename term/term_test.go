// SPDX-License-Identifier: Apache-2.0

package term

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kernel-exporter/kernel_exporter/collector"
)

// usecs are exp2 bounds of 1 to 32 µs, in seconds, as biolatency's are.
var usecs = []float64{1e-6, 2e-6, 4e-6, 8e-6, 16e-6, 32e-6}

func latency(series ...collector.SeriesData) *collector.Family {
	return collector.NewFamily("kernel_bio_latency_seconds", "Latency.", collector.KindHistogram, []string{"device", "operation"}, usecs, series)
}

// TestHistInterval checks the per-interval counts: the delta of each
// bucket since the previous snapshot, the +Inf bucket from the count,
// series that did not move left out, a new series counted from 0 and a
// reset series counted from its new value.
func TestHistInterval(t *testing.T) {
	var h Hist
	base := h.Interval(latency(
		collector.SeriesData{Labels: []string{"vda", "read"}, Cum: []uint64{0, 1, 3, 3, 3, 3}, Count: 3},
		collector.SeriesData{Labels: []string{"vda", "write"}, Cum: []uint64{0, 0, 5, 9, 9, 10}, Count: 12},
		collector.SeriesData{Labels: []string{"vdb", "read"}, Cum: []uint64{0, 0, 0, 0, 0, 4}, Count: 4},
	))
	if len(base) != 3 || base[1].Total() != 12 || base[1].Counts[6] != 2 {
		t.Fatalf("first interval = %+v, want every series counted from 0 (write: 12, 2 above 32 µs)", base)
	}
	got := h.Interval(latency(
		collector.SeriesData{Labels: []string{"vda", "read"}, Cum: []uint64{0, 1, 3, 3, 3, 3}, Count: 3},      // unchanged
		collector.SeriesData{Labels: []string{"vda", "write"}, Cum: []uint64{1, 1, 9, 20, 20, 21}, Count: 24}, // moved
		collector.SeriesData{Labels: []string{"vdb", "read"}, Cum: []uint64{0, 0, 0, 0, 0, 1}, Count: 1},      // reset
		collector.SeriesData{Labels: []string{"vdc", "flush"}, Cum: []uint64{0, 0, 0, 2, 2, 2}, Count: 2},     // new
	))
	want := []string{
		"vda write [1 0 3 7 0 0 1]",
		"vdb read [0 0 0 0 0 1 0]",
		"vdc flush [0 0 0 2 0 0 0]",
	}
	if len(got) != len(want) {
		t.Fatalf("interval = %+v, want %v", got, want)
	}
	for i, s := range got {
		if g := strings.Join(s.Labels, " ") + " " + fmtUints(s.Counts); g != want[i] {
			t.Errorf("series %d = %q, want %q", i, g, want[i])
		}
	}
}

func fmtUints(v []uint64) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, x := range v {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(formatTotal(float64(x)))
	}
	return b.String() + "]"
}

// TestRows checks the bucket ranges, counts and bar lengths of one table:
// leading and trailing empty buckets are left out, empty buckets between
// kept, bars are floor(count × 40 / largest), and the bucket above the
// last bound runs to inf.
func TestRows(t *testing.T) {
	u := Unit{"usecs", 1e6}
	rows := Rows(usecs, []uint64{0, 3, 40, 0, 7, 0, 0}, u)
	want := []Row{{"1", "2", 3, 3}, {"2", "4", 40, 40}, {"4", "8", 0, 0}, {"8", "16", 7, 7}}
	if len(rows) != len(want) {
		t.Fatalf("rows = %+v, want %+v", rows, want)
	}
	for i := range want {
		if rows[i] != want[i] {
			t.Errorf("row %d = %+v, want %+v", i, rows[i], want[i])
		}
	}
	rows = Rows(usecs, []uint64{9, 0, 0, 0, 0, 0, 5}, u)
	if len(rows) != 7 || rows[0] != (Row{"0", "1", 9, 40}) || rows[6] != (Row{"32", "inf", 5, 22}) {
		t.Errorf("rows = %+v, want 0 -> 1 (9, 40 stars) first and 32 -> inf (5, 22 stars) last", rows)
	}
	if rows := Rows(usecs, make([]uint64, 7), u); rows != nil {
		t.Errorf("rows of an empty interval = %+v, want none", rows)
	}
	// A first bound that is not positive has no lower end.
	if rows := Rows([]float64{0, 1}, []uint64{2, 0, 0}, Unit{"value", 1}); len(rows) != 1 || rows[0].Low != "-inf" || rows[0].High != "0" {
		t.Errorf("rows = %+v, want -inf -> 0", rows)
	}
}

// TestWriteHist checks one interval's output byte for byte: bcc's layout,
// a header per label set, a blank line between tables.
func TestWriteHist(t *testing.T) {
	f := latency(
		collector.SeriesData{Labels: []string{"vda", "read"}, Cum: []uint64{0, 1, 3, 3, 3, 3}, Count: 3},
		collector.SeriesData{Labels: []string{"vda", "write"}, Cum: []uint64{0, 0, 5, 9, 9, 10}, Count: 123456789},
	)
	var h Hist
	var b strings.Builder
	if err := WriteHist(&b, "biolatency", f, h.Interval(f)); err != nil {
		t.Fatal(err)
	}
	want := `device = vda, operation = read
     usecs               : count     distribution
         1 -> 2          : 1        |********************                    |
         2 -> 4          : 2        |****************************************|

device = vda, operation = write
     usecs               : count      distribution
         2 -> 4          : 5         |                                        |
         4 -> 8          : 4         |                                        |
         8 -> 16         : 0         |                                        |
        16 -> 32         : 1         |                                        |
        32 -> inf        : 123456779 |****************************************|
`
	if b.String() != want {
		t.Errorf("WriteHist =\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	if err := WriteHist(&b, "biolatency", f, nil); err != nil || b.String() != "(no events)\n" {
		t.Errorf("WriteHist(no series) = %q, %v", b.String(), err)
	}
	// A metric without labels has no label header.
	plain := collector.NewFamily("kernel_x_bytes", "X.", collector.KindHistogram, nil, []float64{1024, 2048}, []collector.SeriesData{{Cum: []uint64{0, 4}, Count: 4}})
	b.Reset()
	_ = WriteHist(&b, "x", plain, h.Interval(plain))
	if want := "     bytes               : count     distribution\n      1024 -> 2048       : 4        |****************************************|\n"; b.String() != want {
		t.Errorf("WriteHist(no labels) =\n%q\nwant\n%q", b.String(), want)
	}
}

func TestUnitOf(t *testing.T) {
	for _, c := range []struct {
		name  string
		upper []float64
		want  string
	}{
		{"kernel_bio_latency_seconds", usecs, "usecs"},
		{"kernel_x_seconds", []float64{0, 1e-9, 2e-9}, "nsecs"},
		{"kernel_x_seconds", []float64{1e-3, 2e-3}, "msecs"},
		{"kernel_x_seconds", []float64{0.5, 1}, "msecs"},
		{"kernel_x_seconds", []float64{1, 2}, "secs"},
		{"kernel_x_seconds", []float64{1e-12}, "nsecs"},
		{"kernel_x_bytes", []float64{1, 2}, "bytes"},
		{"kernel_x_packets", []float64{1, 2}, "value"},
	} {
		f := collector.NewFamily(c.name, "", collector.KindHistogram, nil, c.upper, nil)
		if got := UnitOf("x", f).Name; got != c.want {
			t.Errorf("UnitOf(%s %v) = %s, want %s", c.name, c.upper, got, c.want)
		}
	}
	// The bundled programs print the unit of the bcc tool they follow,
	// whatever their bounds: runqlat's ns buckets in usecs, as runqlat.
	ns := []float64{1e-9, 2e-9, 1.024e-6, 2.048e-6, 1048576e-9}
	for _, c := range []struct{ program, want string }{
		{"runqlat", "usecs"}, {"runqlat_cgroup", "usecs"}, {"biolatency", "usecs"}, {"softirq", "usecs"}, {"funclatency", "nsecs"}, {"tcp_states", "nsecs"},
	} {
		f := collector.NewFamily("kernel_x_seconds", "", collector.KindHistogram, nil, ns, nil)
		if got := UnitOf(c.program, f).Name; got != c.want {
			t.Errorf("UnitOf(%s, ns bounds) = %s, want %s", c.program, got, c.want)
		}
	}
	for _, c := range []struct {
		b    float64
		want string
	}{{1.024e-6, "1.024"}, {2.048e-6, "2.048"}, {1048576e-9, "1048.576"}, {1e-9, "0.001"}, {67108864e-9, "67108.864"}} {
		if got := formatBound(c.b, unitUsecs); got != c.want {
			t.Errorf("formatBound(%g s, usecs) = %s, want %s", c.b, got, c.want)
		}
	}
	for k := range 27 {
		b := math.Ldexp(1, k) * 1e-6
		if got, want := formatBound(b, Unit{"usecs", 1e6}), formatTotal(math.Ldexp(1, k)); got != want {
			t.Errorf("formatBound(2^%d µs) = %s, want %s", k, got, want)
		}
	}
	if got := formatBound(1.5e-6, Unit{"usecs", 1e6}); got != "1.5" {
		t.Errorf("formatBound(1.5 µs) = %s", got)
	}
}

func counters() []*collector.Family {
	calls := collector.NewFamily("kernel_syscalls_total", "", collector.KindCounter, []string{"syscall"}, nil, []collector.SeriesData{
		{Labels: []string{"read"}, Value: 100},
		{Labels: []string{"write"}, Value: 50},
	})
	errs := collector.NewFamily("kernel_syscall_errors_total", "", collector.KindCounter, []string{"syscall", "errno"}, nil, []collector.SeriesData{
		{Labels: []string{"rmdir", "ENOENT"}, Value: 10},
	})
	g := collector.NewFamily("kernel_queue_length", "", collector.KindGauge, nil, nil, []collector.SeriesData{{Value: 3}})
	return []*collector.Family{calls, errs, g}
}

// TestRates checks the rates over an interval, the sort (rate, then
// total, then names), that gauges are left out, and resets.
func TestRates(t *testing.T) {
	var r Rates
	r.Rows(counters(), 0)
	next := []*collector.Family{
		collector.NewFamily("kernel_syscalls_total", "", collector.KindCounter, []string{"syscall"}, nil, []collector.SeriesData{
			{Labels: []string{"read"}, Value: 110},  // +10
			{Labels: []string{"write"}, Value: 90},  // +40
			{Labels: []string{"close"}, Value: 4},   // new: +4
			{Labels: []string{"open"}, Value: 60.5}, // new: +60.5
		}),
		collector.NewFamily("kernel_syscall_errors_total", "", collector.KindCounter, []string{"syscall", "errno"}, nil, []collector.SeriesData{
			{Labels: []string{"rmdir", "ENOENT"}, Value: 2}, // reset: +2
			{Labels: []string{"a", "b"}, Value: 0},
			{Labels: []string{"b", "a"}, Value: 0},
		}),
	}
	rows := r.Rows(next, 2*time.Second)
	want := []TopRow{
		{"kernel_syscalls_total", "syscall=open", 30.25, 60.5},
		{"kernel_syscalls_total", "syscall=write", 20, 90},
		{"kernel_syscalls_total", "syscall=read", 5, 110},
		{"kernel_syscalls_total", "syscall=close", 2, 4},
		{"kernel_syscall_errors_total", "syscall=rmdir errno=ENOENT", 1, 2},
		{"kernel_syscall_errors_total", "syscall=a errno=b", 0, 0},
		{"kernel_syscall_errors_total", "syscall=b errno=a", 0, 0},
	}
	if len(rows) != len(want) {
		t.Fatalf("rows = %+v\nwant %+v", rows, want)
	}
	for i := range want {
		if rows[i] != want[i] {
			t.Errorf("row %d = %+v, want %+v", i, rows[i], want[i])
		}
	}
}

// TestWriteTop checks a frame byte for byte: the header, the columns, the
// cut to the height with the count of rows left out, and the cut to the
// width.
func TestWriteTop(t *testing.T) {
	rows := []TopRow{
		{"kernel_syscalls_total", "syscall=open", 30.25, 60.5},
		{"kernel_syscalls_total", "syscall=write", 20, 90},
		{"kernel_syscall_errors_total", "syscall=rmdir errno=ENOENT", 1, 2},
		{"kernel_syscalls_total", "syscall=close", 0, 4},
	}
	h := TopHeader{Program: "syscalls", Interval: time.Second, Time: time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)}
	var b strings.Builder
	if err := WriteTop(&b, h, rows, 24, 0); err != nil {
		t.Fatal(err)
	}
	want := `kernel_exporter top syscalls  interval 1s  15:04:05  4 series
    RATE/s         TOTAL  METRIC                       LABELS
      30.2          60.5  kernel_syscalls_total        syscall=open
      20.0            90  kernel_syscalls_total        syscall=write
       1.0             2  kernel_syscall_errors_total  syscall=rmdir errno=ENOENT
       0.0             4  kernel_syscalls_total        syscall=close
`
	if b.String() != want {
		t.Errorf("WriteTop =\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	_ = WriteTop(&b, h, rows, 5, 50)
	want = `kernel_exporter top syscalls  interval 1s  15:0...
    RATE/s         TOTAL  METRIC               ...
      30.2          60.5  kernel_syscalls_total...
      20.0            90  kernel_syscalls_total...
... 2 more
`
	if b.String() != want {
		t.Errorf("WriteTop(5 rows, 50 columns) =\n%s\nwant:\n%s", b.String(), want)
	}
	// All rows fit exactly: no "more" line.
	b.Reset()
	_ = WriteTop(&b, h, rows, 6, 0)
	if n := strings.Count(b.String(), "\n"); n != 6 || strings.Contains(b.String(), "more") {
		t.Errorf("WriteTop(6 rows) = %d lines:\n%s", n, b.String())
	}
}

// TestLabelsEscaped checks that label values are shown through
// printable.String (which has its own tests), cut to MaxLabelWidth runes,
// and Truncate.
func TestLabelsEscaped(t *testing.T) {
	if got := LabelHeader([]string{"comm"}, []string{"\x1b[31m" + strings.Repeat("x", 60)}); got != `comm = \x1b[31m`+strings.Repeat("x", 29)+"..." {
		t.Errorf("LabelHeader = %q, want the escaped value cut to %d runes", got, MaxLabelWidth)
	}
	if got := Truncate("日本語テキスト", 5); got != "日本..." {
		t.Errorf("Truncate = %q", got)
	}
	if got := Truncate("abcdef", 3); got != "abc" {
		t.Errorf("Truncate(3) = %q", got)
	}
	if got := Truncate("abc", 3); got != "abc" {
		t.Errorf("Truncate(fits) = %q", got)
	}
}

func TestCheckFlags(t *testing.T) {
	for _, c := range []struct {
		d time.Duration
		n int
	}{{MinInterval, 0}, {time.Second, 5}, {MaxInterval, MaxCount}} {
		if err := CheckFlags(c.d, c.n); err != nil {
			t.Errorf("CheckFlags(%v, %d) = %v", c.d, c.n, err)
		}
	}
	for _, c := range []struct {
		d    time.Duration
		n    int
		want string
	}{
		{MinInterval - 1, 0, "--interval 99.999999ms: must be 100ms to 1h0m0s"},
		{MaxInterval + time.Second, 0, "--interval 1h0m1s: must be 100ms to 1h0m0s"},
		{0, 0, "--interval 0s: must be"},
		{time.Second, -1, "--count -1: must be 0 (until Ctrl-C) to 1000000"},
		{time.Second, MaxCount + 1, "--count 1000001: must be"},
	} {
		if err := CheckFlags(c.d, c.n); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("CheckFlags(%v, %d) = %v, want %q", c.d, c.n, err, c.want)
		}
	}
}

func TestParseTarget(t *testing.T) {
	src, metric, err := ParseTarget(CommandHist, "biolatency", "")
	if err != nil || src.Name != "biolatency" || src.Dir != "" || metric != "" {
		t.Errorf("ParseTarget(biolatency) = %+v, %q, %v", src, metric, err)
	}
	src, metric, err = ParseTarget(CommandHist, "biolatency.bio_latency_seconds", "")
	if err != nil || src.Name != "biolatency" || metric != "bio_latency_seconds" {
		t.Errorf("ParseTarget(biolatency.bio_latency_seconds) = %+v, %q, %v", src, metric, err)
	}
	if _, _, err := ParseTarget(CommandTop, "syscalls.x", ""); err == nil || err.Error() != `top "syscalls.x": top takes a program name, not a metric` {
		t.Errorf("ParseTarget(top syscalls.x) = %v", err)
	}
	if _, _, err := ParseTarget(CommandHist, "nosuch", ""); err == nil || !strings.HasPrefix(err.Error(), `hist: no bundled program "nosuch" (bundled: accept_latency, accept_per_process, biolatency, `) {
		t.Errorf("ParseTarget(nosuch) = %v, want the bundled programs listed", err)
	}
	if _, _, err := ParseTarget(CommandHist, "../etc", ""); err == nil || !strings.Contains(err.Error(), "config name") {
		t.Errorf("ParseTarget(../etc) = %v, want a config name error", err)
	}
	dir := t.TempDir()
	for _, n := range []string{"my.prog", "other"} {
		if err := os.WriteFile(filepath.Join(dir, n+".yaml"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	src, metric, err = ParseTarget(CommandTop, "my.prog", dir)
	if err != nil || src.Name != "my.prog" || src.Dir != dir || metric != "" {
		t.Errorf("ParseTarget(my.prog in dir) = %+v, %q, %v: want the program with the dot", src, metric, err)
	}
	src, metric, err = ParseTarget(CommandHist, "my.prog.x_seconds", dir)
	if err != nil || src.Name != "my.prog" || metric != "x_seconds" {
		t.Errorf("ParseTarget(my.prog.x_seconds) = %+v, %q, %v", src, metric, err)
	}
	if _, _, err := ParseTarget(CommandTop, "biolatency", dir); err == nil || err.Error() != `top: no program "biolatency" in --config.dir "`+dir+`" (it holds: my.prog, other)` {
		t.Errorf("ParseTarget(biolatency in dir) = %v, want the programs of the dir listed", err)
	}
}

func TestSelectFamilies(t *testing.T) {
	lat := latency()
	other := collector.NewFamily("kernel_other_latency_seconds", "", collector.KindHistogram, nil, usecs, nil)
	fams := append([]*collector.Family{lat, other}, counters()...)
	for metric, want := range map[string]string{
		"":                           "kernel_bio_latency_seconds kernel_other_latency_seconds",
		"bio_latency_seconds":        "kernel_bio_latency_seconds",
		"kernel_bio_latency_seconds": "kernel_bio_latency_seconds",
	} {
		got, err := selectFamilies(CommandHist, "p", metric, fams)
		var names []string
		for _, f := range got {
			names = append(names, f.Name)
		}
		if err != nil || strings.Join(names, " ") != want {
			t.Errorf("selectFamilies(hist %q) = %v, %v, want %s", metric, names, err, want)
		}
	}
	if _, err := selectFamilies(CommandHist, "p", "latency_seconds", fams); err == nil || err.Error() != `program p: "latency_seconds" names several histograms (2): give the full name: kernel_bio_latency_seconds, kernel_other_latency_seconds` {
		t.Errorf("ambiguous = %v", err)
	}
	if _, err := selectFamilies(CommandHist, "p", "nope", fams); err == nil || err.Error() != `program p has no histogram "nope" (its histograms: kernel_bio_latency_seconds, kernel_other_latency_seconds)` {
		t.Errorf("missing = %v", err)
	}
	if _, err := selectFamilies(CommandHist, "p", "", counters()); err == nil || err.Error() != `program p has no histogram metric (its metrics: kernel_syscalls_total, kernel_syscall_errors_total, kernel_queue_length)` {
		t.Errorf("no histogram = %v", err)
	}
	got, err := selectFamilies(CommandTop, "p", "", fams)
	if err != nil || len(got) != 2 || got[0].Name != "kernel_syscalls_total" {
		t.Errorf("selectFamilies(top) = %v, %v, want the two counters", got, err)
	}
}

// TestHistIntervalSorted checks that tables come sorted by label values
// whatever the map's read order.
func TestHistIntervalSorted(t *testing.T) {
	var h Hist
	got := h.Interval(latency(
		collector.SeriesData{Labels: []string{"vdb", "read"}, Cum: []uint64{1, 1, 1, 1, 1, 1}, Count: 1},
		collector.SeriesData{Labels: []string{"vda", "write"}, Cum: []uint64{1, 1, 1, 1, 1, 1}, Count: 1},
		collector.SeriesData{Labels: []string{"vda", "read"}, Cum: []uint64{1, 1, 1, 1, 1, 1}, Count: 1},
	))
	var order []string
	for _, s := range got {
		order = append(order, strings.Join(s.Labels, " "))
	}
	if want := "vda read,vda write,vdb read"; strings.Join(order, ",") != want {
		t.Errorf("order %v, want %s", order, want)
	}
}
