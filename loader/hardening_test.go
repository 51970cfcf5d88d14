// SPDX-License-Identifier: Apache-2.0

package loader

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/bounded"
	"github.com/kernel-exporter/kernel_exporter/config"
)

// probeSpec is an object with one trivial program "p" in section sec.
func probeSpec(sec string, typ ebpf.ProgramType) *ebpf.CollectionSpec {
	return &ebpf.CollectionSpec{Programs: map[string]*ebpf.ProgramSpec{
		"p": {
			Name:         "p",
			Type:         typ,
			SectionName:  sec,
			License:      "GPL",
			Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
		},
	}}
}

// loadWithin runs Load and fails the test if it does not return within d
// (the code before finding 5 blocked forever opening a FIFO target).
func loadWithin(t *testing.T, d time.Duration, spec *ebpf.CollectionSpec, cfg *config.Config) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		obj, err := Load(spec, cfg, Options{})
		if obj != nil {
			obj.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("Load did not return within %v: blocked on the target", d)
		return nil
	}
}

// unblockFIFO opens the write side of a FIFO and closes it, so that a
// reader blocked on it (in the code before the fix) gets EOF and ends.
func unblockFIFO(path string) {
	for i := 0; i < 3; i++ {
		fd, err := unix.Open(path, unix.O_RDWR|unix.O_NONBLOCK, 0)
		if err != nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
		unix.Close(fd)
	}
}

// TestHardening05TargetFIFO: a uprobe or USDT target that is a FIFO, or a
// symlink to /dev/zero, gives a prompt error naming the path instead of
// blocking start-up (or reading forever).
func TestHardening05TargetFIFO(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "target.fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unblockFIFO(fifo) })
	zero := filepath.Join(dir, "target.zero")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	for _, target := range []struct{ path, kind string }{{fifo, "a FIFO"}, {zero, "a character device"}} {
		for _, tc := range []struct {
			name string
			spec *ebpf.CollectionSpec
			cfg  *config.Config
		}{
			{"uprobes", probeSpec("uprobe", ebpf.Kprobe), &config.Config{File: "t.yaml",
				Uprobes: []config.Uprobe{{Program: "p", Binary: target.path, Symbol: "main"}}}},
			{"uretprobe-offset", probeSpec("uretprobe", ebpf.Kprobe), &config.Config{File: "t.yaml",
				Uprobes: []config.Uprobe{{Program: "p", Binary: target.path, Offset: 0x1000}}}},
			{"section", probeSpec("uprobe/"+target.path+":main", ebpf.Kprobe), &config.Config{File: "t.yaml"}},
			{"usdt", probeSpec("usdt", ebpf.Kprobe), &config.Config{File: "t.yaml",
				USDT: []config.USDT{{Program: "p", Binary: target.path, Provider: "prov", Name: "probe"}}}},
			{"usdt-section", probeSpec("usdt/"+target.path+":prov:probe", ebpf.Kprobe), &config.Config{File: "t.yaml"}},
		} {
			t.Run(filepath.Base(target.path)+"/"+tc.name, func(t *testing.T) {
				err := loadWithin(t, 5*time.Second, tc.spec, tc.cfg)
				if err == nil {
					t.Fatal("Load succeeded, want an error")
				}
				if !errors.Is(err, bounded.ErrNotRegular) {
					t.Errorf("error %q: want bounded.ErrNotRegular", err)
				}
				msg := err.Error()
				if !strings.Contains(msg, target.path) || !strings.Contains(msg, "not a regular file") || !strings.Contains(msg, target.kind) {
					t.Errorf("error %q: want the path %s, %q and %q", msg, target.path, "not a regular file", target.kind)
				}
			})
		}
	}
}

// tracefsChildEnv makes the test binary run as the child of
// TestHardening15TracefsPermission: it loads and attaches a tracepoint
// program and prints the error after tracefsChildMark.
const tracefsChildEnv = "KE_TEST_TRACEFS_CHILD"
const tracefsChildMark = "TRACEFS-CHILD-ERROR: "

// TestHardening15TracefsPermission: without CAP_DAC_READ_SEARCH (a non-root
// user with CAP_BPF and CAP_PERFMON), tracefs (mode 0700 root) cannot be
// searched. The error used to say that tracefs is not mounted and mounting
// it failed; it must name the path, permission and the capability.
func TestHardening15TracefsPermission(t *testing.T) {
	if os.Getenv(tracefsChildEnv) == "1" {
		obj, err := Load(probeSpec("tracepoint/sched/sched_switch", ebpf.TracePoint), &config.Config{File: "t.yaml"}, Options{})
		if obj != nil {
			obj.Close()
		}
		msg := "<nil>"
		if err != nil {
			msg = strings.ReplaceAll(err.Error(), "\n", " ")
		}
		os.Stdout.WriteString(tracefsChildMark + msg + "\n")
		ferr := HaveFeature("tracepoints", Options{})
		msg = "<nil>"
		if ferr != nil {
			msg = strings.ReplaceAll(ferr.Error(), "\n", " ")
		}
		os.Stdout.WriteString(tracefsChildMark + msg + "\n")
		return
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("setpriv (util-linux) not found: make test-deps installs it")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to start a child with other credentials")
	}
	var st unix.Stat_t
	if err := unix.Stat("/sys/kernel/tracing", &st); err != nil || st.Mode&0o001 != 0 {
		t.Skipf("/sys/kernel/tracing is searchable by others (mode %#o) on this machine: nothing to deny", st.Mode&0o7777)
	}
	// The child runs as nobody: it needs a copy of the test binary it can
	// execute.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "ke-tracefs-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "loader.test")
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups",
		"--inh-caps=-all,+bpf,+perfmon", "--ambient-caps=-all,+bpf,+perfmon", "--bounding-set=-all,+bpf,+perfmon",
		"--", bin, "-test.run=^TestHardening15TracefsPermission$", "-test.count=1")
	cmd.Env = append(os.Environ(), tracefsChildEnv+"=1")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var msgs []string
	for _, line := range strings.Split(string(out), "\n") {
		if m, ok := strings.CutPrefix(line, tracefsChildMark); ok {
			msgs = append(msgs, m)
		}
	}
	if len(msgs) != 2 {
		t.Fatalf("child printed %d results, want 2:\n%s", len(msgs), out)
	}
	for i, what := range []string{"Load of a tracepoint program", "HaveFeature(tracepoints)"} {
		msg := msgs[i]
		t.Logf("%s as uid 65534 with CAP_BPF, CAP_PERFMON: %s", what, msg)
		for _, want := range []string{"/sys/kernel/tracing", "permission denied", "CAP_DAC_READ_SEARCH"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: error %q does not say %q", what, msg, want)
			}
		}
		if strings.Contains(msg, "not mounted") || strings.Contains(msg, "not supported") {
			t.Errorf("%s: error %q blames a missing tracefs or kernel support", what, msg)
		}
	}
}

// TestKallsymsBounded: kaddrs reads kallsyms through bounded (a FIFO is
// refused at once) and refuses over-long lines; addresses are found.
func TestKallsymsBounded(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "kallsyms")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unblockFIFO(fifo) })
	old := kallsymsPath
	kallsymsPath = fifo
	t.Cleanup(func() { kallsymsPath = old })
	done := make(chan error, 1)
	go func() { done <- setKaddrs(&ebpf.CollectionSpec{}, []string{"jiffies"}) }()
	select {
	case err := <-done:
		if !errors.Is(err, bounded.ErrNotRegular) || !strings.Contains(err.Error(), fifo) {
			t.Errorf("FIFO kallsyms: %v, want ErrNotRegular naming the path", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("setKaddrs blocked on a FIFO")
	}

	want := map[string]uint64{"a": 0, "b": 0, "c": 0}
	in := "ffffffff81000000 T a\nnot a line\nzzzz T c\n0000000000000010 t b\t[mod]\nffffffff81000020 T a\n"
	if err := scanKallsyms(strings.NewReader(in), want); err != nil {
		t.Fatal(err)
	}
	if want["a"] != 0xffffffff81000000 || want["b"] != 0x10 || want["c"] != 0 {
		t.Errorf("addresses %#v", want)
	}
	long := "ffffffff81000000 T " + strings.Repeat("x", maxKallsymsLine) + "\n"
	if err := scanKallsyms(strings.NewReader(long), map[string]uint64{"a": 0}); err == nil || strings.Contains(err.Error(), "xxxx") {
		t.Errorf("over-long line: %v", err)
	}
}
