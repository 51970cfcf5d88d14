// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/kernel-exporter/kernel_exporter/internal/proctest"
)

// programIDs returns the IDs of every BPF program loaded in the kernel,
// with their names.
func programIDs(t *testing.T) map[ebpf.ProgramID]string {
	t.Helper()
	out := map[ebpf.ProgramID]string{}
	var id ebpf.ProgramID
	for {
		next, err := ebpf.ProgramGetNextID(id)
		if errors.Is(err, os.ErrNotExist) {
			return out
		}
		if err != nil {
			t.Fatalf("BPF_PROG_GET_NEXT_ID after %d: %v", id, err)
		}
		id = next
		p, err := ebpf.NewProgramFromID(id)
		if errors.Is(err, os.ErrNotExist) {
			continue // unloaded meanwhile
		}
		if err != nil {
			t.Fatalf("open program %d: %v", id, err)
		}
		name := ""
		if info, err := p.Info(); err == nil {
			name = info.Name
		}
		p.Close()
		out[id] = name
	}
}

// bpfFDs returns the BPF object IDs the process pid holds file descriptors
// for, from /proc/<pid>/fdinfo: kind is "prog_id", "map_id" or "link_id".
// A link's fdinfo also names its program, which is then listed as a
// program too.
func bpfFDs(t *testing.T, pid int) map[string]map[uint32]bool {
	t.Helper()
	out := map[string]map[uint32]bool{"prog_id": {}, "map_id": {}, "link_id": {}}
	dir := fmt.Sprintf("/proc/%d/fdinfo", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("list fds of %d: %v", pid, err)
	}
	for _, ent := range ents {
		f, err := os.Open(filepath.Join(dir, ent.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		s := bufio.NewScanner(f)
		for s.Scan() {
			k, v, ok := strings.Cut(s.Text(), ":")
			if _, want := out[k]; !ok || !want {
				continue
			}
			if n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32); err == nil {
				out[k][uint32(n)] = true
			}
		}
		f.Close()
	}
	return out
}

func sortedIDs(m map[uint32]bool) []uint32 {
	var ids []uint32
	for id := range m {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// stillLoaded returns the objects of held (the bpfFDs kinds "prog_id",
// "map_id" and "link_id") of the given kinds, in that order and each by
// ascending id, that are still in the kernel: "program 12", "map 34",
// "link 56".
func stillLoaded(held map[string]map[uint32]bool, kinds ...string) []string {
	var left []string
	for _, kind := range kinds {
		for _, id := range sortedIDs(held[kind]) {
			switch kind {
			case "prog_id":
				if p, err := ebpf.NewProgramFromID(ebpf.ProgramID(id)); err == nil {
					p.Close()
					left = append(left, fmt.Sprintf("program %d", id))
				}
			case "map_id":
				if m, err := ebpf.NewMapFromID(ebpf.MapID(id)); err == nil {
					m.Close()
					left = append(left, fmt.Sprintf("map %d", id))
				}
			case "link_id":
				if l, err := link.NewFromID(link.ID(id)); err == nil {
					l.Close()
					left = append(left, fmt.Sprintf("link %d", id))
				}
			}
		}
	}
	return left
}

// warnLines returns the lines of logs at level WARN or ERROR.
func warnLines(logs string) []string {
	var out []string
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
			out = append(out, line)
		}
	}
	return out
}

// TestShutdownUnloadsPrograms runs the default programs in a process
// group of their own and stops them three ways: SIGTERM to the whole
// group (systemd's default KillMode=control-group signals every process
// of the service, the privileged helpers included), SIGINT to the whole
// group (Ctrl-C in a terminal), and SIGTERM to the main process alone
// (KillMode=mixed, kill PID). Each time the process exits 0, logs no
// line at WARN or ERROR, its helpers are gone, and every BPF program,
// map and link it created is gone from the kernel.
func TestShutdownUnloadsPrograms(t *testing.T) {
	for _, tc := range []struct {
		name  string
		sig   syscall.Signal
		group bool
	}{
		{"SIGTERM to the process group", syscall.SIGTERM, true},
		{"SIGINT to the process group", syscall.SIGINT, true},
		{"SIGTERM to the main process", syscall.SIGTERM, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testShutdown(t, tc.sig, tc.group)
		})
	}
}

func testShutdown(t *testing.T, sig syscall.Signal, group bool) {
	before := programIDs(t)
	e := startProc(t, nil, &syscall.SysProcAttr{Setpgid: true})
	pid := e.cmd.Process.Pid
	during := programIDs(t)
	held := bpfFDs(t, pid)

	attached := e.Scrape().Value("kernel_exporter_program_attached", nil)
	if attached < 1 {
		t.Fatalf("no program attached\n%s", e.Logs())
	}
	helpers := proctest.Children(pid)
	for _, h := range helpers {
		helpers = append(helpers, proctest.Children(h)...)
	}
	if len(helpers) != 2 {
		t.Errorf("the exporter runs helpers %v, want the supervisor and its worker", helpers)
	}
	// Ours: the programs that appeared since the start and that the process
	// holds, and any other new program with one of their names.
	ours := map[ebpf.ProgramID]string{}
	names := map[string]bool{}
	for id := range held["prog_id"] {
		name, ok := during[ebpf.ProgramID(id)]
		if !ok {
			t.Fatalf("the exporter holds program %d, which is not loaded", id)
		}
		if _, old := before[ebpf.ProgramID(id)]; old {
			t.Fatalf("the exporter holds program %d (%s), which was loaded before it started", id, name)
		}
		ours[ebpf.ProgramID(id)] = name
		names[name] = true
	}
	for id, name := range during {
		if _, old := before[id]; !old && names[name] {
			ours[id] = name
		}
	}
	if float64(len(held["link_id"])) < attached {
		t.Errorf("the exporter holds %d links, want at least one per attached program (%v)", len(held["link_id"]), attached)
	}
	if len(ours) < int(attached) {
		t.Errorf("found %d new programs of the exporter, want >= %v attached", len(ours), attached)
	}
	t.Logf("exporter pid %d, helpers %v: %d programs %v, %d maps, %d links %v", pid, helpers, len(ours), ours, len(held["map_id"]), len(held["link_id"]), sortedIDs(held["link_id"]))

	target := pid
	if group {
		target = -pid
	}
	if err := syscall.Kill(target, sig); err != nil {
		t.Fatalf("kill(%d, %v): %v", target, sig, err)
	}
	select {
	case err := <-e.done:
		if err != nil {
			t.Fatalf("kernel_exporter exit after %v: %v, want exit code 0\n%s", sig, err, e.Logs())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("kernel_exporter still running 20 s after %v\n%s", sig, e.Logs())
	}
	if w := warnLines(e.Logs()); len(w) > 0 {
		t.Errorf("a clean stop (%v) logged %d lines at WARN or ERROR:\n%s", sig, len(w), strings.Join(w, "\n"))
	}
	for _, h := range helpers {
		Eventually(t, 5*time.Second, func() bool { return syscall.Kill(h, 0) != nil }, "helper %d still running after the exporter exited", h)
	}
	// The kernel frees programs, maps and links after the last reference
	// goes, partly from deferred work: allow it a moment.
	var left []string
	Eventually(t, 10*time.Second, func() bool {
		left = left[:0]
		for id, name := range ours {
			if p, err := ebpf.NewProgramFromID(id); err == nil {
				p.Close()
				left = append(left, fmt.Sprintf("program %d (%s)", id, name))
			}
		}
		left = append(left, stillLoaded(held, "map_id", "link_id")...)
		// No remaining link may point at one of our programs either.
		it := new(link.Iterator)
		for it.Next() {
			if info, err := it.Link.Info(); err == nil {
				if _, ok := ours[info.Program]; ok {
					left = append(left, fmt.Sprintf("link %d → program %d", it.ID, info.Program))
				}
			}
		}
		it.Close()
		return len(left) == 0
	}, "after %v and exit, still in the kernel: %v", sig, func() string { return strings.Join(left, ", ") })
}
