// SPDX-License-Identifier: Apache-2.0

package loader

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/internal/testenv"
)

// relinkReport is what TestRelinkChild measured: for each attach kind, ""
// when it linked with CAP_BPF alone, else the error; Runs counts the
// getpid() calls the tracepoint program linked through a perf event fd
// opened before the drop saw.
type relinkReport struct {
	CapEff string
	Kinds  map[string]string
	Runs   uint64
}

// countingProgram returns a program of type typ that adds one to slot 0 of
// an array map at each run, and the map.
func countingProgram(t *testing.T, spec ebpf.ProgramSpec) (*ebpf.Program, *ebpf.Map) {
	t.Helper()
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	spec.License = "GPL"
	spec.Instructions = countInstructions(asm.LoadMapPtr(asm.R1, m.FD()), 0)
	p, err := ebpf.NewProgram(&spec)
	if err != nil {
		t.Fatalf("load %v program: %v", spec.Type, err)
	}
	t.Cleanup(func() { p.Close() })
	return p, m
}

// countInstructions add one to slot of the u64 array map that load puts
// in R1, and return 0.
func countInstructions(load asm.Instruction, slot int32) asm.Instructions {
	return asm.Instructions{
		load,
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -4),
		asm.StoreImm(asm.RFP, -4, int64(slot), asm.Word),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "out"),
		asm.Mov.Imm(asm.R1, 1),
		asm.StoreXAdd(asm.R0, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("out"),
		asm.Return(),
	}
}

// runChild runs test of this binary with env set (the test then knows
// it is the child) and returns its output, failing t unless root or
// when the child fails.
func runChild(t *testing.T, test, env string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.SkipOrFail(t, "needs root to load programs and drop capabilities")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), env+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	return string(out)
}

// TestRelinkChild is the child of TestRelinkCapBPFOnly: it loads a program
// of each kind with every capability, drops to CAP_BPF, links each, and
// prints a relinkReport.
func TestRelinkChild(t *testing.T) {
	if os.Getenv("KE_RELINK_CHILD") == "" {
		t.Skip("child of TestRelinkCapBPFOnly")
	}
	tpDirect, _ := countingProgram(t, ebpf.ProgramSpec{Type: ebpf.TracePoint})
	tpFD, counts := countingProgram(t, ebpf.ProgramSpec{Type: ebpf.TracePoint})
	rawTP, _ := countingProgram(t, ebpf.ProgramSpec{Type: ebpf.RawTracepoint})
	btfTP, _ := countingProgram(t, ebpf.ProgramSpec{Type: ebpf.Tracing, AttachType: ebpf.AttachTraceRawTp, AttachTo: "sys_enter"})
	perf, _ := countingProgram(t, ebpf.ProgramSpec{Type: ebpf.PerfEvent})
	up, _ := countingProgram(t, ebpf.ProgramSpec{Type: ebpf.Kprobe})
	f, err := OpenTracepointEvent("syscalls", "sys_enter_getpid")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DropCapabilities(0); err != nil {
		t.Fatal(err)
	}
	st, _ := CurrentCapabilities()
	rep := relinkReport{CapEff: st.Effective.String(), Kinds: map[string]string{}}
	res := func(kind string, l link.Link, err error) {
		if err != nil {
			rep.Kinds[kind] = err.Error()
			return
		}
		rep.Kinds[kind] = ""
		if kind != "tracepoint via perf event fd" {
			l.Close()
		}
	}
	l, err := link.Tracepoint("syscalls", "sys_enter_getpid", tpDirect, nil)
	res("tracepoint", l, err)
	lfd, err := LinkPerfEvent(f, tpFD)
	res("tracepoint via perf event fd", lfd, err)
	l, err = link.AttachRawTracepoint(link.RawTracepointOptions{Name: "sys_enter", Program: rawTP})
	res("raw_tp", l, err)
	l, err = link.AttachTracing(link.TracingOptions{Program: btfTP})
	res("tp_btf", l, err)
	attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CPU_CLOCK, Sample: 1000000}
	if fd, err := unix.PerfEventOpen(&attr, -1, 0, -1, unix.PERF_FLAG_FD_CLOEXEC); err != nil {
		res("perf_event", nil, fmt.Errorf("perf_event_open: %w", err))
	} else {
		l, err := LinkPerfEvent(os.NewFile(uintptr(fd), "perf"), perf)
		res("perf_event", l, err)
	}
	self, _ := os.Executable()
	if ex, err := link.OpenExecutable(self); err != nil {
		res("uprobe", nil, err)
	} else {
		// Address: no symbol table needed; the permission check of
		// perf_event_open comes before the kernel looks at the offset.
		l, err := ex.Uprobe("probe", up, &link.UprobeOptions{Address: 0x1000})
		res("uprobe", l, err)
	}
	if lfd != nil {
		for range 10 {
			unix.Getpid()
		}
		var v uint64
		if err := counts.Lookup(uint32(0), &v); err != nil {
			t.Fatal(err)
		}
		rep.Runs = v
		lfd.Close()
	}
	j, _ := json.Marshal(rep)
	fmt.Printf("REPORT %s\n", j)
}

// TestRelinkCapBPFOnly measures which attach kinds a process reduced to
// CAP_BPF can link programs it loaded before the drop (the table in
// relink.go): raw_tp, tp_btf and a tracepoint through a perf event fd
// opened elsewhere link, and the program then runs; a tracepoint opened by
// the process itself and the other perf-event kinds are refused as
// kernel.perf_event_paranoid says (refusedWithCapBPF): at the default, 2,
// all of them; at -1, only the uprobe.
func TestRelinkCapBPFOnly(t *testing.T) {
	out := runChild(t, "TestRelinkChild", "KE_RELINK_CHILD")
	var rep relinkReport
	for _, line := range strings.Split(out, "\n") {
		if j, ok := strings.CutPrefix(line, "REPORT "); ok {
			if err := json.Unmarshal([]byte(j), &rep); err != nil {
				t.Fatal(err)
			}
		}
	}
	if rep.Kinds == nil {
		t.Fatalf("child printed no report:\n%s", out)
	}
	t.Logf("CapEff after the drop: %s", rep.CapEff)
	for k, v := range rep.Kinds {
		if v == "" {
			v = "links"
		}
		t.Logf("%-30s %s", k, v)
	}
	if rep.CapEff != "CAP_BPF" {
		t.Errorf("child CapEff %s, want CAP_BPF", rep.CapEff)
	}
	for _, k := range []string{"raw_tp", "tp_btf", "tracepoint via perf event fd"} {
		if v := rep.Kinds[k]; v != "" {
			t.Errorf("%s with CAP_BPF only: %s", k, v)
		}
	}
	paranoid := perfEventParanoid(t)
	t.Logf("kernel.perf_event_paranoid = %d", paranoid)
	for k, refused := range refusedWithCapBPF(paranoid) {
		v := rep.Kinds[k]
		denied := strings.Contains(v, "permission denied") || strings.Contains(v, "not permitted")
		switch {
		case refused && !denied:
			t.Errorf("%s with CAP_BPF only, kernel.perf_event_paranoid=%d: %q, want a permission error (the table in relink.go)", k, paranoid, v)
		case !refused && v != "":
			t.Errorf("%s with CAP_BPF only, kernel.perf_event_paranoid=%d: %q, want it to link (the table in relink.go)", k, paranoid, v)
		}
	}
	if rep.Runs < 10 {
		t.Errorf("tracepoint program linked through the perf event fd ran %d times for 10 getpid(), want at least 10", rep.Runs)
	}
}

// refusedWithCapBPF tells, for each attach kind that opens a perf event
// itself, whether a process with CAP_BPF alone is refused it under
// kernel.perf_event_paranoid=paranoid (kernel/events/core.c, Linux 6.18):
// a tracepoint opened on every process (pid -1) is refused above -1 (its
// raw sample data, perf_trace_event_perm; above 0 perf_allow_cpu refuses
// it too), a CPU-wide software event above 0 (perf_allow_cpu), and the
// uprobe PMU whatever the setting (perf_uprobe_event_init requires
// CAP_PERFMON). Measured at 2, 1, 0 and -1.
func refusedWithCapBPF(paranoid int) map[string]bool {
	return map[string]bool{
		"tracepoint": paranoid > -1,
		"perf_event": paranoid > 0,
		"uprobe":     true,
	}
}

// perfEventParanoid reads kernel.perf_event_paranoid.
func perfEventParanoid(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/kernel/perf_event_paranoid")
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("kernel.perf_event_paranoid: %v", err)
	}
	return v
}

// TestRelinkError: a re-attach refused permission names the capability of
// its attach kind and --capabilities.keep; other errors pass unchanged.
func TestRelinkError(t *testing.T) {
	for _, tc := range []struct {
		section string
		opener  bool
		err     error
		want    string
	}{
		{"perf_event", true, unix.EACCES, "needs CAP_PERFMON; keep it with --capabilities.keep=perfmon"},
		{"uprobe", true, fmt.Errorf("opening perf event: %w", unix.EACCES), "--capabilities.keep=perfmon"},
		{"kprobe/vfs_read", false, unix.EPERM, "needs CAP_PERFMON"},
		{"tracepoint/syscalls/sys_enter_getpid", false, unix.EACCES, "--capabilities.keep=perfmon,dac_read_search"},
		{"tp_btf/sys_enter", false, unix.EINVAL, "invalid argument"},
		{"xdp/eth0", false, unix.EPERM, "needs CAP_NET_ADMIN; keep it with --capabilities.keep=net_admin"},
	} {
		got := relinkError(tc.section, tc.opener, tc.err).Error()
		if !strings.Contains(got, tc.want) {
			t.Errorf("relinkError(%s, %v) = %q, want it to contain %q", tc.section, tc.err, got, tc.want)
		}
	}
	var o Object
	if err := o.Reattach(nil); err == nil {
		t.Error("Reattach of an object never loaded succeeded")
	}
}
