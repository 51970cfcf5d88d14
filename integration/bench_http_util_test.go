// SPDX-License-Identifier: Apache-2.0

package integration

// Helpers of BenchmarkHTTPScrape: the fixture object, an exporter process
// (ours or the reference), the map it created, and counting the series of a
// response in each format.

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// benchNeedTool returns the path of name in PATH, or skips the benchmark.
func benchNeedTool(b *testing.B, name string) string {
	p, err := exec.LookPath(name)
	if err != nil {
		b.Skipf("%s not found: the benchmark compiles its BPF object", name)
	}
	return p
}

// benchCompile compiles testdata/bench/bigmap.bpf.c into dir/bigmap.bpf.o
// with a map of n entries, and writes its config, dir/bigmap.yaml.
func benchCompile(b *testing.B, clang, dir string, n int) {
	if err := os.WriteFile(filepath.Join(dir, "bigmap.yaml"), []byte(bigmapYAML), 0o644); err != nil {
		b.Fatal(err)
	}
	src := filepath.Join(repoRoot, "integration", "testdata", "bench", "bigmap.bpf.c")
	args := append(append([]string{}, bpfCFlags...), "-I"+filepath.Join(repoRoot, "include"),
		"-DBIGMAP_ENTRIES="+strconv.Itoa(n), "-c", src, "-o", filepath.Join(dir, "bigmap.bpf.o"))
	if out, err := exec.Command(clang, args...).CombinedOutput(); err != nil {
		b.Fatalf("compile %s: %v\n%s", src, err, out)
	}
}

// benchProcess is a running exporter.
type benchProcess struct {
	cmd    *exec.Cmd
	url    string
	logs   *syncBuffer
	done   chan error
	lastID ebpf.MapID // the highest map id before it started
}

// startBenchProcess runs bin with args and --web.listen-address on a free
// loopback port, and waits until /metrics answers 200 with no config still
// loading. The process gets SIGTERM at cleanup.
func startBenchProcess(b *testing.B, bin string, args ...string) *benchProcess {
	return startBenchProcessEnv(b, nil, bin, args...)
}

// startBenchProcessEnv is startBenchProcess with env (KEY=value) added to
// the process's environment.
func startBenchProcessEnv(b *testing.B, env []string, bin string, args ...string) *benchProcess {
	addr := fmt.Sprintf("127.0.0.1:%d", benchFreePort(b))
	p := &benchProcess{url: "http://" + addr, logs: &syncBuffer{}, done: make(chan error, 1), lastID: lastMapID(b)}
	p.cmd = exec.Command(bin, append(args, "--web.listen-address="+addr)...)
	if env != nil {
		p.cmd.Env = append(os.Environ(), env...)
	}
	p.cmd.Stdout = p.logs
	p.cmd.Stderr = p.logs
	if os.Getenv("KE_BENCH_STDERR") != "" {
		// The exporter's own output (with GODEBUG=gctrace=1, its GC trace).
		p.cmd.Stderr = io.MultiWriter(p.logs, os.Stderr)
	}
	if err := p.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	b.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	if err := waitServing(p.url, p.done, 60*time.Second); err != nil {
		b.Fatalf("%s %v\n%s", bin, err, p.logs)
	}
	return p
}

// benchFreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func benchFreePort(b *testing.B) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// vmHWM returns the process's peak resident set size in KiB.
func (p *benchProcess) vmHWM(b *testing.B) int {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			if err != nil {
				b.Fatalf("VmHWM line %q: %v", s.Text(), err)
			}
			return kb
		}
	}
	b.Fatalf("no VmHWM in /proc/%d/status", p.cmd.Process.Pid)
	return 0
}

// lastMapID returns the highest BPF map id in use (0 for none).
func lastMapID(b *testing.B) ebpf.MapID {
	var id ebpf.MapID
	for {
		next, err := ebpf.MapGetNextID(id)
		if errors.Is(err, os.ErrNotExist) {
			return id
		}
		if err != nil {
			b.Fatalf("map ids: %v", err)
		}
		id = next
	}
}

// findBigmap returns the bigmap_total map of n entries that p created: the
// one with that name and size among the maps created since it started
// (ids only grow).
func findBigmap(b *testing.B, p *benchProcess, n int) *ebpf.Map {
	deadline := time.Now().Add(30 * time.Second)
	for {
		for id := p.lastID; ; {
			next, err := ebpf.MapGetNextID(id)
			if errors.Is(err, os.ErrNotExist) {
				break
			}
			if err != nil {
				b.Fatalf("map ids: %v", err)
			}
			id = next
			m, err := ebpf.NewMapFromID(id)
			if err != nil {
				continue // gone since
			}
			info, err := m.Info()
			if err == nil && info.Name == "bigmap_total" && info.MaxEntries == uint32(n) && p.holdsMap(id) {
				return m
			}
			m.Close()
		}
		if time.Now().After(deadline) {
			b.Fatalf("no map bigmap_total of %d entries created by the exporter\n%s", n, p.logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// holdsMap says whether the process has a file descriptor of map id (two
// benchmarks may run at once, each with its own exporter and map).
func (p *benchProcess) holdsMap(id ebpf.MapID) bool {
	dir := fmt.Sprintf("/proc/%d/fdinfo", p.cmd.Process.Pid)
	fds, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	want := fmt.Sprintf("\nmap_id:\t%d\n", id)
	for _, fd := range fds {
		if b, err := os.ReadFile(filepath.Join(dir, fd.Name())); err == nil && strings.Contains(string(b), want) {
			return true
		}
	}
	return false
}

// fillBigmap puts n keys in m: key i is {a: i / 1000, b: i % 1000}, its
// value i*7919 + 1.
func fillBigmap(b *testing.B, m *ebpf.Map, n int) {
	const chunk = 65536
	keys := make([]uint64, 0, chunk) // a in the low half: the key's first u32 (little endian)
	values := make([]uint64, 0, chunk)
	for i := 0; i < n; i += chunk {
		keys, values = keys[:0], values[:0]
		for j := i; j < min(i+chunk, n); j++ {
			keys = append(keys, uint64(j/1000)|uint64(j%1000)<<32)
			values = append(values, uint64(j)*7919+1)
		}
		if done, err := m.BatchUpdate(keys, values, nil); err != nil || done != len(keys) {
			b.Fatalf("fill bigmap_total at key %d: %d of %d updated: %v", i, done, len(keys), err)
		}
	}
}

// countText counts the bigmap_total samples of a text exposition.
func countText(body []byte) (int, error) {
	n := 0
	for line := range bytes.Lines(body) {
		if bytes.Contains(line, []byte("bigmap_total{")) && !bytes.HasPrefix(line, []byte("#")) {
			n++
		}
	}
	return n, nil
}

// countGzipText is countText of a gzip-compressed body.
func countGzipText(body []byte) (int, error) {
	r, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	text, err := io.ReadAll(r)
	if err != nil {
		return 0, err
	}
	return countText(text)
}

// countProto counts the bigmap_total metrics of a delimited protobuf body.
func countProto(body []byte) (int, error) {
	dec := expfmt.NewDecoder(bytes.NewReader(body), expfmt.NewFormat(expfmt.TypeProtoDelim))
	n := 0
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); err != nil {
			if errors.Is(err, io.EOF) {
				return n, nil
			}
			return n, err
		}
		if strings.HasSuffix(mf.GetName(), "bigmap_total") {
			n += len(mf.GetMetric())
		}
	}
}
