// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/ebpf"
)

// tmuxPane is kernel_exporter running alone in a detached tmux session of
// its own tmux server (-L), 120 columns by 40 rows, kept on screen after
// it exits (remain-on-exit) so that its last frame and exit status can be
// read.
type tmuxPane struct {
	t    *testing.T
	tmux string
	sock string
	pid  int
}

var tmuxServers atomic.Int32

// startTmux runs kernel_exporter with args in a new tmux pane and returns
// once its process runs. The tmux server is killed at cleanup.
func startTmux(t *testing.T, args ...string) *tmuxPane {
	t.Helper()
	p := &tmuxPane{t: t, tmux: probeNeedTool(t, "the terminal mode tests run kernel_exporter hist and top in it", "tmux"),
		sock: fmt.Sprintf("kernel_exporter-it-%d-%d", os.Getpid(), tmuxServers.Add(1))}
	quoted := []string{"exec", strconv.Quote(binary)}
	for _, a := range args {
		quoted = append(quoted, strconv.Quote(a))
	}
	p.run("new-session", "-d", "-s", "term", "-x", "120", "-y", "40", strings.Join(quoted, " "),
		";", "set-option", "-t", "term", "remain-on-exit", "on")
	t.Cleanup(func() { _ = exec.Command(p.tmux, "-L", p.sock, "kill-server").Run() })
	pid, err := strconv.Atoi(p.run("display-message", "-p", "-t", "term", "#{pane_pid}"))
	if err != nil {
		t.Fatalf("tmux pane pid: %v", err)
	}
	p.pid = pid
	return p
}

// run runs a tmux command on p's server and returns its output, trimmed.
func (p *tmuxPane) run(args ...string) string {
	p.t.Helper()
	out, err := exec.Command(p.tmux, append([]string{"-L", p.sock}, args...)...).CombinedOutput()
	if err != nil {
		p.t.Fatalf("tmux %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// screen returns what the pane shows (capture-pane -p); with history, the
// lines scrolled off the top too.
func (p *tmuxPane) screen(history bool) string {
	p.t.Helper()
	args := []string{"capture-pane", "-p", "-J", "-t", "term"}
	if history {
		args = append(args, "-S", "-")
	}
	return p.run(args...)
}

// waitFor polls the screen (with history or not) until cond holds, or
// fails after d with the screen.
func (p *tmuxPane) waitFor(d time.Duration, history bool, what string, cond func(screen string) bool) string {
	p.t.Helper()
	deadline := time.Now().Add(d)
	for {
		s := p.screen(history)
		if cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("after %v, the pane shows no %s:\n%s", d, what, s)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// interrupt sends C-c to the pane and waits for the process to exit; it
// returns the exit status.
func (p *tmuxPane) interrupt() int {
	p.t.Helper()
	p.run("send-keys", "-t", "term", "C-c")
	deadline := time.Now().Add(30 * time.Second)
	for p.run("display-message", "-p", "-t", "term", "#{pane_dead}") != "1" {
		if time.Now().After(deadline) {
			p.t.Fatalf("kernel_exporter still runs 30 s after C-c:\n%s", p.screen(false))
		}
		time.Sleep(100 * time.Millisecond)
	}
	code, _ := strconv.Atoi(p.run("display-message", "-p", "-t", "term", "#{pane_dead_status}"))
	return code
}

// held returns the BPF programs p's process holds, by ID, with their names.
func (p *tmuxPane) held() map[ebpf.ProgramID]string {
	p.t.Helper()
	all := programIDs(p.t)
	out := map[ebpf.ProgramID]string{}
	for id := range bpfFDs(p.t, p.pid)["prog_id"] {
		out[ebpf.ProgramID(id)] = all[ebpf.ProgramID(id)]
	}
	if len(out) == 0 {
		p.t.Fatalf("kernel_exporter (pid %d) holds no BPF program", p.pid)
	}
	return out
}

var (
	histTimeRe  = regexp.MustCompile(`^\d\d:\d\d:\d\d (\S+)$`)
	histLabelRe = regexp.MustCompile(`^device = (\S+), operation = (\S+)$`)
	histRowRe   = regexp.MustCompile(`^ *(\S+) -> (\S+) *: (\d+) *\|(\**) *\|$`)
)

// histTable is one table of hist's output.
type histTable struct {
	interval    int // 0 for the first interval printed
	device, op  string
	low, high   []string
	counts, bar []int
}

// parseHist parses biolatency tables from hist's output, checking their
// layout as it goes: every table has a column header, rows in contiguous
// ranges, and bars of floor(count × 40 / largest count) stars.
func parseHist(t *testing.T, out string) []histTable {
	t.Helper()
	var tables []histTable
	interval := -1
	var cur *histTable
	for _, line := range strings.Split(out, "\n") {
		switch {
		case histTimeRe.MatchString(line):
			interval++
		case histLabelRe.MatchString(line):
			m := histLabelRe.FindStringSubmatch(line)
			tables = append(tables, histTable{interval: interval, device: m[1], op: m[2]})
			cur = &tables[len(tables)-1]
		case histRowRe.MatchString(line):
			if cur == nil {
				t.Fatalf("row before any table header: %q", line)
			}
			m := histRowRe.FindStringSubmatch(line)
			c, _ := strconv.Atoi(m[3])
			cur.low, cur.high = append(cur.low, m[1]), append(cur.high, m[2])
			cur.counts, cur.bar = append(cur.counts, c), append(cur.bar, len(m[4]))
		}
	}
	for _, tb := range tables {
		most := 0
		for _, c := range tb.counts {
			most = max(most, c)
		}
		for i, c := range tb.counts {
			if want := c * 40 / most; tb.bar[i] != want {
				t.Errorf("interval %d, %s %s: row %s -> %s: count %d, bar %d stars, want %d (largest %d)", tb.interval, tb.device, tb.op, tb.low[i], tb.high[i], c, tb.bar[i], want, most)
			}
			if i > 0 && tb.low[i] != tb.high[i-1] {
				t.Errorf("interval %d, %s %s: row %d starts at %s, the row before ends at %s", tb.interval, tb.device, tb.op, i, tb.low[i], tb.high[i-1])
			}
		}
		if len(tb.counts) == 0 || tb.counts[0] == 0 || tb.counts[len(tb.counts)-1] == 0 {
			t.Errorf("interval %d, %s %s: counts %v: want no empty leading or trailing bucket", tb.interval, tb.device, tb.op, tb.counts)
		}
	}
	return tables
}
