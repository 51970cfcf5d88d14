// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkMemory measures what a big map costs the exporter's process:
// its peak resident memory (VmHWM), the peak of its Go heap, and the time
// of its first scrape against the later ones. Per map size (KE_BENCH_KEYS,
// default 100k and 1M keys) it starts our binary and, when REF_EXPORTER
// names it, the reference exporter, each in a process of its own, on the
// fixture of BenchmarkHTTPScrape (one counter, two uint labels, every key
// its own series), fills the map, and then scrapes the text format without
// compression: once cold (the first read after start decodes every key),
// then KE_BENCH_SCRAPES more times (default 3). Every scrape must carry
// every key, with the exact sum of the values the map holds (key 0 aside:
// the fixture's program counts OOM kills there).
//
// Metrics: VmHWM-MiB (after the last scrape), heap-peak-MiB (the largest
// Go heap at the start of a GC cycle in GODEBUG=gctrace=1's trace: the heap
// the GC let grow before collecting; both exporters are Go programs),
// first-ms, later-ms (median of the later scrapes) and first/later;
// tools/bench-memory.sh prints them beside the reference's with the
// ratios. first-cpu-ms and later-cpu-ms are the CPU time of the
// exporter's threads during the scrapes (schedstat, in nanoseconds): on a
// busy machine the wall times grow with the load, the CPU times much less;
// first-wait-ms and later-wait-ms the time the threads waited on a run
// queue (summed over the threads, so it may exceed the wall time). It is a benchmark,
// run by hand (make bench-memory), not a timed test:
//
//	REF_EXPORTER=/tmp/ref/ebpf_exporter go test -run '^$' -bench '^BenchmarkMemory$' -benchtime 1x -timeout 60m ./integration/
func BenchmarkMemory(b *testing.B) {
	clang := benchNeedTool(b, "clang-19")
	ref := os.Getenv("REF_EXPORTER")
	scrapes := 3
	if v, err := strconv.Atoi(os.Getenv("KE_BENCH_SCRAPES")); err == nil && v > 0 {
		scrapes = v
	}
	sizes := []int{100_000, 1_000_000}
	if os.Getenv("KE_BENCH_KEYS") != "" {
		sizes = benchKeys(b)
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			benchCompile(b, clang, dir, n)
			b.Run("ours", func(b *testing.B) {
				benchMemory(b, n, scrapes, binary, benchOursArgs(dir)...)
			})
			if ref == "" {
				return
			}
			b.Run("ref", func(b *testing.B) {
				benchMemory(b, n, scrapes, ref, "--config.dir="+dir, "--config.names=bigmap")
			})
		})
	}
}

// benchMemory starts bin with args and GODEBUG=gctrace=1, fills its map
// with n keys, scrapes it once cold and then scrapes more times, checking
// every scrape, and reports the figures of BenchmarkMemory.
func benchMemory(b *testing.B, n, scrapes int, bin string, args ...string) {
	if b.N > 1 {
		b.Skip("one run per process: use -benchtime 1x")
	}
	p := startBenchProcessEnv(b, []string{"GODEBUG=gctrace=1"}, bin, args...)
	m := findBigmap(b, p, n)
	fillBigmap(b, m, n)
	m.Close()
	// The sum fillBigmap put in the map: key i holds i*7919 + 1; without
	// key 0, {0, 0}, to which the fixture's program adds one at each OOM
	// kill on the machine (both exporters load it).
	want := uint64(n) + 7919*uint64(n)*uint64(n-1)/2 - 1
	client := &http.Client{
		Timeout:   10 * time.Minute,
		Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 1},
	}
	defer client.CloseIdleConnections()
	f := scrapeFormats[0] // text, no compression
	pid := p.cmd.Process.Pid
	var times, cpus, waits []time.Duration
	b.ResetTimer()
	for i := 0; i <= scrapes; i++ {
		prof := cpuProfile(p, fmt.Sprintf("cpu-%d-%d.pb.gz", n, i))
		cpu0, wait0 := cpuTime(b, pid)
		body, d, err := scrape(client, p.url, f)
		cpu1, wait1 := cpuTime(b, pid)
		cpus, waits = append(cpus, cpu1-cpu0), append(waits, wait1-wait0)
		prof()
		if err != nil {
			b.Fatalf("%v\n%s", err, p.logs)
		}
		series, sum, err := sumText(body)
		if err != nil || series != n || sum != want {
			b.Fatalf("scrape %d: %d bigmap_total series summing to %d (error %v), want %d summing to %d", i, series, sum, err, n, want)
		}
		times = append(times, d)
	}
	b.StopTimer()
	first, later := times[0], slices.Clone(times[1:])
	slices.Sort(later)
	med := later[len(later)/2]
	laterCPU := slices.Clone(cpus[1:])
	slices.Sort(laterCPU)
	medCPU := laterCPU[len(laterCPU)/2]
	laterWait := slices.Clone(waits[1:])
	slices.Sort(laterWait)
	b.ReportMetric(float64(p.vmHWM(b))/1024, "VmHWM-MiB")
	b.ReportMetric(float64(gcHeapPeak(p.logs.String())), "heap-peak-MiB")
	b.ReportMetric(ms(first), "first-ms")
	b.ReportMetric(ms(med), "later-ms")
	b.ReportMetric(float64(first)/float64(med), "first/later")
	b.ReportMetric(ms(cpus[0]), "first-cpu-ms")
	b.ReportMetric(ms(medCPU), "later-cpu-ms")
	b.ReportMetric(ms(waits[0]), "first-wait-ms")
	b.ReportMetric(ms(laterWait[len(laterWait)/2]), "later-wait-ms")
}

// cpuProfile starts a CPU profile of the exporter, when
// KE_BENCH_PROFILE_DIR is set (ours runs with --web.enable-pprof then),
// and returns a function that waits for it and writes it to name there.
// The profile lasts KE_BENCH_PROFILE_SECONDS (default 10): longer than a
// scrape.
func cpuProfile(p *benchProcess, name string) (wait func()) {
	dir := os.Getenv("KE_BENCH_PROFILE_DIR")
	if dir == "" || p.cmd.Path != binary {
		return func() {}
	}
	secs := cmp.Or(os.Getenv("KE_BENCH_PROFILE_SECONDS"), "10")
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := http.Get(p.url + "/debug/pprof/profile?seconds=" + secs)
		if err != nil {
			return
		}
		defer resp.Body.Close()
		if body, err := io.ReadAll(resp.Body); err == nil && resp.StatusCode == http.StatusOK {
			_ = os.WriteFile(filepath.Join(dir, name), body, 0o644)
		}
	}()
	time.Sleep(100 * time.Millisecond) // the profile has started
	return func() { <-done }
}

// cpuTime returns the CPU time of a process's threads so far and the time
// they waited on a run queue, in nanoseconds (the first two fields of each
// /proc/<pid>/task/<tid>/schedstat; utime and stime count in 10 ms ticks).
func cpuTime(b *testing.B, pid int) (cpu, wait time.Duration) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	for _, t := range tasks {
		data, err := os.ReadFile(dir + "/" + t.Name() + "/schedstat")
		if err != nil {
			continue // the thread ended
		}
		f := strings.Fields(string(data))
		if len(f) < 2 {
			continue
		}
		run, err1 := strconv.ParseInt(f[0], 10, 64)
		delay, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil {
			b.Fatalf("%s/%s/schedstat: %q", dir, t.Name(), data)
		}
		cpu += time.Duration(run)
		wait += time.Duration(delay)
	}
	return cpu, wait
}

// sumText returns the number of bigmap_total samples of a text exposition
// and the sum of their values, which must be integers, but that of key 0
// (a="0",b="0").
func sumText(body []byte) (int, uint64, error) {
	n := 0
	var sum uint64
	for line := range bytes.Lines(body) {
		if !bytes.Contains(line, []byte("bigmap_total{")) || bytes.HasPrefix(line, []byte("#")) {
			continue
		}
		if bytes.Contains(line, []byte(`a="0",b="0"`)) {
			n++
			continue
		}
		f := strings.Fields(string(line))
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil || v != float64(uint64(v)) {
			return n, sum, fmt.Errorf("sample %q: not an integer value", line)
		}
		sum += uint64(v)
		n++
	}
	return n, sum, nil
}

// gcTrace matches the heap sizes of a GODEBUG=gctrace=1 line: at the start
// of the cycle, at its end, and live ("12->13->6 MB").
var gcTrace = regexp.MustCompile(`(\d+)->(\d+)->(\d+) MB`)

// gcHeapPeak returns the largest heap (MiB) at the start or end of a GC
// cycle in a gctrace, 0 when it has none.
func gcHeapPeak(trace string) int {
	peak := 0
	for _, m := range gcTrace.FindAllStringSubmatch(trace, -1) {
		for _, s := range m[1:3] {
			if v, _ := strconv.Atoi(s); v > peak {
				peak = v
			}
		}
	}
	return peak
}
