// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kernel-exporter/kernel_exporter/internal/testenv"
)

// libbpfToolsDir is where Debian's libbpf-tools package installs bcc's
// libbpf tools (biolatency, runqlat, softirqs, syscount...).
const libbpfToolsDir = "/usr/sbin"

// libbpfTool is a running libbpf-tools program whose histograms are read
// when it is interrupted, as with Ctrl-C.
type libbpfTool struct {
	t     *testing.T
	name  string
	cmd   *exec.Cmd
	out   *syncBuffer
	done  chan error
	ticks chan int // the number of each timestamp line (-T), as it is printed
}

// timestampLine is the line libbpf-tools print with -T at the end of each
// interval, before they read and print that interval's histograms.
var timestampLine = regexp.MustCompile(`^\d\d:\d\d:\d\d\s*$`)

// startLibbpfTool starts libbpf-tools' name with args, line-buffered
// (stdbuf -oL: its stdout is a pipe), and waits until it prints the line
// containing ready, which these tools print once their programs are
// attached. A missing tool ends the test through testenv.SkipOrFail (make
// test-deps installs libbpf-tools). The tool gets SIGKILL at cleanup if it
// still runs.
func startLibbpfTool(t *testing.T, ready, name string, args ...string) *libbpfTool {
	t.Helper()
	path := libbpfToolsDir + "/" + name
	if _, err := os.Stat(path); err != nil {
		testenv.SkipOrFail(t, "no libbpf-tools %s to compare with (make test-deps installs libbpf-tools): %v", name, err)
	}
	stdbuf, err := exec.LookPath("stdbuf")
	if err != nil {
		testenv.SkipOrFail(t, "no stdbuf (coreutils) to line-buffer %s: %v", name, err)
	}
	cmd := exec.Command(stdbuf, append([]string{"-oL", path}, args...)...)
	pr, pw := io.Pipe()
	out := &syncBuffer{}
	cmd.Stdout = io.MultiWriter(out, pw)
	cmd.Stderr = out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	tool := &libbpfTool{t: t, name: name, cmd: cmd, out: out, done: make(chan error, 1), ticks: make(chan int, 1024)}
	go func() {
		err := cmd.Wait()
		pw.Close()
		tool.done <- err
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-tool.done
		}
	})
	seen := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		found, ticks := false, 0
		for sc.Scan() {
			if !found && strings.Contains(sc.Text(), ready) {
				found = true
				seen <- true
			}
			if timestampLine.MatchString(sc.Text()) {
				ticks++
				select {
				case tool.ticks <- ticks:
				default:
				}
			}
		}
		if !found {
			seen <- false
		}
		io.Copy(io.Discard, pr)
	}()
	select {
	case ok := <-seen:
		if !ok {
			t.Fatalf("%s exited before attaching; output:\n%s", name, out.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("%s printed no %q in 60 s; output:\n%s", name, ready, out.String())
	}
	return tool
}

// NextTick waits for the next timestamp line the tool prints (run with -T
// and an interval), that is for the end of its current interval, and
// returns its number (1 for the first). The tool reads that interval's
// histograms just after printing the line, so a reading taken as NextTick
// returns starts or ends a window a few milliseconds after the tool's.
func (l *libbpfTool) NextTick() int {
	l.t.Helper()
	for {
		select {
		case <-l.ticks: // an older one
			continue
		default:
		}
		break
	}
	select {
	case n := <-l.ticks:
		return n
	case err := <-l.done:
		l.t.Fatalf("%s exited: %v; output:\n%s", l.name, err, l.out.String())
	case <-time.After(30 * time.Second):
		l.t.Fatalf("%s printed no timestamp line in 30 s; output:\n%s", l.name, l.out.String())
	}
	return 0
}

// Stop interrupts the tool (SIGINT: it prints its histograms and exits) and
// returns its output.
func (l *libbpfTool) Stop() string {
	l.t.Helper()
	if err := l.cmd.Process.Signal(syscall.SIGINT); err != nil {
		l.t.Fatalf("interrupt %s: %v", l.name, err)
	}
	select {
	case err := <-l.done:
		if err != nil {
			l.t.Fatalf("%s: %v; output:\n%s", l.name, err, l.out.String())
		}
	case <-time.After(30 * time.Second):
		l.t.Fatalf("%s did not exit 30 s after SIGINT; output:\n%s", l.name, l.out.String())
	}
	return l.out.String()
}

// intervals splits the output of a tool run with -T and an interval at its
// timestamp lines: intervals(out)[n] is what the tool printed after its
// n-th timestamp line (the histograms of its n-th interval); [0] is what
// came before the first.
func intervals(out string) []string {
	var parts []string
	var cur strings.Builder
	for _, line := range strings.SplitAfter(out, "\n") {
		if timestampLine.MatchString(strings.TrimRight(line, "\n")) {
			parts = append(parts, cur.String())
			cur.Reset()
			continue
		}
		cur.WriteString(line)
	}
	return append(parts, cur.String())
}

// log2Row is a row of libbpf-tools' print_log2_hist: "low -> high : count".
var log2Row = regexp.MustCompile(`^\s*(\d+) -> (\d+)\s*: (\d+)`)

// parseLog2Hists reads the log2 histograms that libbpf-tools print
// (trace_helpers.c, print_log2_hist), each after a header line "<key> =
// <value>" ("disk = vda" for biolatency -D); a histogram without such a
// header gets the key "". The result maps each header value to its slot
// counts: slot 0 is the row "0 -> 1", slot k >= 1 the row "2^k -> 2^(k+1)-1".
// Errors: a row whose bounds are not those of its slot.
func parseLog2Hists(out, key string) (map[string][]uint64, error) {
	hists := map[string][]uint64{}
	cur := ""
	sc := bufio.NewScanner(bytes.NewReader([]byte(out)))
	for sc.Scan() {
		line := sc.Text()
		if k, v, ok := strings.Cut(line, " = "); ok && strings.TrimSpace(k) == key {
			cur = strings.TrimSpace(v)
			continue
		}
		m := log2Row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		low, _ := strconv.ParseUint(m[1], 10, 64)
		high, _ := strconv.ParseUint(m[2], 10, 64)
		n, _ := strconv.ParseUint(m[3], 10, 64)
		slot := len(hists[cur])
		wantLow, wantHigh := uint64(1)<<slot, uint64(1)<<(slot+1)-1
		if slot == 0 {
			wantLow = 0
		}
		if low != wantLow || high != wantHigh {
			return nil, fmt.Errorf("row %q is slot %d of %s %q, want bounds %d -> %d", line, slot, key, cur, wantLow, wantHigh)
		}
		hists[cur] = append(hists[cur], n)
	}
	return hists, nil
}
