// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/internal/mdlinks"
	"github.com/kernel-exporter/kernel_exporter/internal/testenv"
)

// Two programs an author writes from the release, as issue 32's session
// did: a counter of signals by signal and sender, and a histogram of
// clock_nanosleep's duration.
const (
	authorSig   = "kesig"
	authorSleep = "kesleep"
	// sigSent SIGUSR1 are sent, and sleeps sleeps of sleepFor each made.
	sigSent  = 7
	sleeps   = 9
	sleepFor = 17 * time.Millisecond
	// A 17 ms sleep lands in exp2 slot 25: more than 2^24 ns (16.8 ms),
	// at most 2^25 ns (33.6 ms), which leaves it 16 ms of wake-up delay.
	sleepSlot = 25
	// realtimeSleeps more are made on CLOCK_REALTIME, which the histogram
	// leaves out.
	realtimeSleeps = 3
)

// beginRE finds the histogram's start program new wrote, whatever its ctx.
var beginRE = regexp.MustCompile(`int kesleep_begin\([^)]*\)\n\{\n`)

// authorSigC is the signal counter's C as the author writes it over the
// one new wrote: the key is the signal and the sender's comm, the comm
// read with CO-RE through libbpf's bpf_core_read.h.
const authorSigC = `// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* kesig: signals generated, by signal and by the comm of the sender. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "kernel_exporter/maps.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct kesig_key {
	__u32 sig;
	char comm[16];
};
_Static_assert(sizeof(struct kesig_key) == 20, "kesig.yaml expects a 20-byte key");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 10240);
	__type(key, struct kesig_key);
	__type(value, __u64);
} kesig_total SEC(".maps");

SEC("tracepoint/signal/signal_generate")
int kesig_count(struct trace_event_raw_signal_generate *ctx)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct kesig_key key = { .sig = ctx->sig };

	BPF_CORE_READ_STR_INTO(&key.comm, task, comm);
	ke_add(&kesig_total, &key, 1);
	return 0;
}
`

const authorSigYAML = `metrics:
  counters:
    - name: kesig_total
      help: Signals generated, by signal and by the comm of the sender
      labels:
        - name: signal
          size: 4
          decoders:
            - name: signal
        - name: comm
          size: 16
          decoders:
            - name: string
`

// TestReleaseAuthor is issue 32's author session from the release tarball
// alone: a clean directory holds only the unpacked tarball of make
// release, and libbpf-dev's headers are hidden (each compile runs in a
// private mount namespace with an empty tmpfs over /usr/include/bpf, and
// clang -M shows every <bpf/...> header came from the tarball's include/).
// There, with clang as the only tool besides the tarball's binary:
//
//   - examples/README.md's Build and Check commands build and load its
//     example;
//   - kernel_exporter new writes a counter on signal:signal_generate,
//     which the author rewrites to count by signal and the sender's comm,
//     and a clock_nanosleep histogram (sys_enter to sys_exit), whose start
//     the author makes time only CLOCK_MONOTONIC sleeps, reading
//     ctx->args[0] through the struct the scaffold's hint names;
//     the Makefile new wrote builds each and make check (--config.check)
//     loads each, and the C names the tarball's
//     docs/configuration.md#decoders, which resolves;
//   - the tarball's binary serves both: 7 SIGUSR1 from a thread of its own
//     comm move {signal="SIGUSR1",comm} by exactly 7, and 9 sleeps of
//     17 ms on CLOCK_MONOTONIC from another (and 3 on CLOCK_REALTIME) add
//     exactly 9 observations, all in the bucket le=2^25 ns and none at or
//     below 2^24 ns.
func TestReleaseAuthor(t *testing.T) {
	for _, tool := range []string{"make", "go", "tar", "unshare", "clang-19"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.SkipOrFail(t, "%s not found: the author session needs make, a Go toolchain (make release), tar, unshare and clang-19 (make test-deps installs them): %v", tool, err)
		}
	}
	tracing := "/sys/kernel/tracing/events"
	if _, err := os.Stat(tracing + "/syscalls/sys_enter_clock_nanosleep"); err != nil {
		if err := unix.Mount("tracefs", "/sys/kernel/tracing", "tracefs", 0, ""); err != nil && err != unix.EBUSY {
			t.Fatalf("mount tracefs: %v", err)
		}
	}
	for _, ev := range []string{"syscalls/sys_enter_clock_nanosleep", "signal/signal_generate"} {
		if _, err := os.Stat(filepath.Join(tracing, ev)); err != nil {
			testenv.SkipLacking(t, "tracepoint", "no %s tracepoint: %v", ev, err)
		}
	}
	arch := map[string]string{"amd64": "x86", "arm64": "arm64"}[runtime.GOARCH]
	if arch == "" {
		t.Skipf("no release for %s", runtime.GOARCH)
	}

	dist := buildRelease(t)
	rel := unpackRelease(t, dist, releaseVersion(t, dist))
	exe := filepath.Join(rel, "kernel_exporter")
	checkDocLinks(t, rel, "the unpacked tarball")
	work := t.TempDir()

	// The compiler must not see libbpf-dev's headers.
	hide := hideLibbpf("sh", "-c", "! ls /usr/include/bpf/*.h 2>/dev/null")
	if out, err := exec.Command(hide[0], hide[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("hiding /usr/include/bpf: %v\n%s", err, out)
	}
	if _, err := os.Stat("/usr/include/bpf/bpf_helpers.h"); err == nil {
		t.Logf("libbpf-dev's /usr/include/bpf is installed and hidden from every compile")
	}
	run := func(dir string, hide bool, argv ...string) string {
		t.Helper()
		if hide {
			argv = hideLibbpf(argv...)
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("in %s: %s: %v\n%s", dir, strings.Join(argv, " "), err, out)
		}
		return string(out)
	}

	// examples/README.md, as written: Build, then the first Check command.
	readme, err := os.ReadFile(filepath.Join(rel, "examples", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	myPrograms := filepath.Join(work, "my-programs")
	build := shBlock(t, string(readme), "## Build")
	build = strings.ReplaceAll(build, "/tmp/my-programs", myPrograms)
	build = strings.ReplaceAll(build, "__TARGET_ARCH_x86", "__TARGET_ARCH_"+arch)
	run(rel, true, "sh", "-ec", build)
	check := firstCommand(shBlock(t, string(readme), "## Check, then run"))
	check = strings.ReplaceAll(strings.TrimPrefix(check, "sudo "), "/tmp/my-programs", myPrograms)
	if out := run(rel, false, "sh", "-ec", check); !strings.Contains(out, "ok    syscall_errors ") {
		t.Errorf("examples/README.md's check %q:\n%s", check, out)
	}

	configs := filepath.Join(work, "configs")
	if err := os.Mkdir(configs, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct{ name, kind, attach string }{
		{authorSig, "counter", "tracepoint:signal:signal_generate"},
		{authorSleep, "histogram", "tracepoint:syscalls:sys_enter_clock_nanosleep"},
	} {
		out := run(work, false, exe, "new", p.name, "--kind", p.kind, "--attach", p.attach)
		if !strings.Contains(out, "headers: "+filepath.Join(rel, "include")+"\n") {
			t.Errorf("new %s did not take the tarball's headers %s/include:\n%s", p.name, rel, out)
		}
		if strings.Contains(out, "libbpf") || strings.Contains(out, "note:") {
			t.Errorf("new %s: a note, with clang-19 and the tarball's headers at hand:\n%s", p.name, out)
		}
		dir := filepath.Join(work, p.name)
		src := filepath.Join(dir, p.name+".bpf.c")
		c, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		ref := filepath.Join(rel, "docs", "configuration.md") + "#decoders"
		if !strings.Contains(string(c), " * "+ref+".") {
			t.Errorf("%s does not name the tarball's %s:\n%s", src, ref, c)
		} else if md, err := os.ReadFile(filepath.Join(rel, "docs", "configuration.md")); err != nil || !mdlinks.Anchors(string(md))["decoders"] {
			t.Errorf("%s names %s, which does not resolve (err %v)", src, ref, err)
		}
		switch p.name {
		case authorSig:
			for f, text := range map[string]string{src: authorSigC, filepath.Join(dir, p.name+".yaml"): authorSigYAML} {
				if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		case authorSleep:
			// The scaffold's hint for syscalls:sys_enter_*: ctx as struct
			// trace_event_raw_sys_enter, the arguments in ctx->args[].
			// Only CLOCK_MONOTONIC sleeps are timed.
			loc := beginRE.FindIndex(c)
			if loc == nil {
				t.Fatalf("%s has no %s_begin(...) {:\n%s", src, p.name, c)
			}
			edited := string(c[:loc[0]]) + "int kesleep_begin(struct trace_event_raw_sys_enter *ctx)\n{\n" +
				"\tif (ctx->args[0] != 1 /* CLOCK_MONOTONIC */)\n\t\treturn 0;\n" + string(c[loc[1]:])
			if err := os.WriteFile(src, []byte(edited), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("%s: make: %s", p.name, strings.TrimSpace(run(dir, true, "make", "--no-print-directory")))
		deps := run(dir, true, "clang-19", "-target", "bpf", "-D__TARGET_ARCH_"+arch, "-I"+filepath.Join(rel, "include"), "-M", p.name+".bpf.c")
		if !strings.Contains(deps, filepath.Join(rel, "include", "bpf", "bpf_helpers.h")) || strings.Contains(deps, "/usr/include/bpf/") {
			t.Errorf("%s: the headers clang used are not the tarball's include/bpf/:\n%s", p.name, deps)
		}
		if out := run(dir, false, "make", "--no-print-directory", "check"); !strings.Contains(out, "ok    "+p.name+" ") {
			t.Errorf("%s: make check:\n%s", p.name, out)
		}
		for _, f := range []string{p.name + ".bpf.o", p.name + ".yaml"} {
			copyProbeFile(t, filepath.Join(dir, f), filepath.Join(configs, f))
		}
	}

	// A process that ignores SIGUSR1, for the signals to go to.
	target := exec.Command("sh", "-c", `trap "" USR1; exec sleep 60`)
	if err := target.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = target.Process.Kill(); _ = target.Wait() }()
	waitIgnoring(t, target.Process.Pid, unix.SIGUSR1)

	e := startBinary(t, exe, "--config.dir="+configs, "--config.names="+authorSig+","+authorSleep)
	before := e.Scrape()
	for _, c := range []string{authorSig, authorSleep} {
		if v := before.Value("kernel_exporter_config_up", L("config", c)); v != 1 {
			t.Fatalf("config %s not up (%v)\n%s", c, v, e.Logs())
		}
	}
	sigComm := fmt.Sprintf("kesig%d", os.Getpid()%1000000)
	onNamedThread(t, sigComm, func() error {
		for range sigSent {
			if err := unix.Kill(target.Process.Pid, unix.SIGUSR1); err != nil {
				return err
			}
		}
		return nil
	})
	sleepComm := fmt.Sprintf("kesl%d", os.Getpid()%1000000)
	onNamedThread(t, sleepComm, func() error {
		ts := unix.NsecToTimespec(sleepFor.Nanoseconds())
		for range sleeps {
			if err := unix.ClockNanosleep(unix.CLOCK_MONOTONIC, 0, &ts, nil); err != nil {
				return err
			}
		}
		// Not timed: the program reads the clock from ctx->args[0].
		for range realtimeSleeps {
			if err := unix.ClockNanosleep(unix.CLOCK_REALTIME, 0, &ts, nil); err != nil {
				return err
			}
		}
		return nil
	})
	after := e.Scrape()

	sig := L("signal", "SIGUSR1", "comm", sigComm)
	if d := after.Value("kernel_kesig_total", sig) - before.Value("kernel_kesig_total", sig); d != sigSent {
		t.Errorf("kernel_kesig_total{signal=SIGUSR1,comm=%q} moved by %v after %d kill(SIGUSR1), want %d\n%s",
			sigComm, d, sigSent, sigSent, after.seriesDump("kernel_kesig_total"))
	}
	count, sum, below, at := expBuckets(after, "kernel_kesleep_seconds", L("comm", sleepComm), sleepSlot)
	lo, hi := sleeps*sleepFor.Seconds(), sleeps*math.Ldexp(1, sleepSlot)*1e-9
	if count != sleeps || below != 0 || at != sleeps || sum < lo || sum > hi {
		t.Errorf("kernel_kesleep_seconds{comm=%q} after %d sleeps of %v: count %d, %d at or below 2^%d ns, %d at or below 2^%d ns, sum %.6f s; want %d, 0, %d and a sum in [%.3f, %.3f]\n%s",
			sleepComm, sleeps, sleepFor, count, below, sleepSlot-1, at, sleepSlot, sum, sleeps, sleeps, lo, hi,
			after.seriesDump("kernel_kesleep_seconds"))
	}
	t.Logf("from the tarball alone: kernel_kesig_total{signal=SIGUSR1,comm=%q} +%d; kernel_kesleep_seconds{comm=%q}: %d CLOCK_MONOTONIC sleeps of %v (and %d CLOCK_REALTIME ones left out), all %d in (2^%d, 2^%d] ns, sum %.6f s",
		sigComm, sigSent, sleepComm, count, sleepFor, realtimeSleeps, at, sleepSlot-1, sleepSlot, sum)
}

// hideLibbpf returns argv run in a private mount namespace in which
// /usr/include/bpf (libbpf-dev's headers) is an empty read-only tmpfs.
func hideLibbpf(argv ...string) []string {
	return append([]string{"unshare", "-m", "--propagation", "private", "--", "sh", "-c",
		`if [ -d /usr/include/bpf ]; then mount -t tmpfs -o ro,size=4k tmpfs /usr/include/bpf || exit 1; fi; exec "$@"`, "sh"}, argv...)
}

// shBlock returns the first ```sh block after the line heading of md.
func shBlock(t *testing.T, md, heading string) string {
	t.Helper()
	_, rest, ok := strings.Cut(md, "\n"+heading+"\n")
	if !ok {
		t.Fatalf("examples/README.md has no %q section", heading)
	}
	_, rest, ok = strings.Cut(rest, "```sh\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatalf("examples/README.md: no ```sh block under %q", heading)
	}
	return block
}

// firstCommand returns a shell block's first command, with its
// backslash-continued lines.
func firstCommand(block string) string {
	var b strings.Builder
	for _, l := range strings.Split(block, "\n") {
		b.WriteString(l + "\n")
		if !strings.HasSuffix(l, "\\") {
			break
		}
	}
	return b.String()
}

// waitIgnoring waits until process pid ignores sig (SigIgn of its
// /proc/<pid>/status) and has exec'd, for at most 10 s.
func waitIgnoring(t *testing.T, pid int, sig unix.Signal) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
			var name string
			var ign uint64
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				if v, ok := strings.CutPrefix(sc.Text(), "Name:\t"); ok {
					name = v
				}
				if v, ok := strings.CutPrefix(sc.Text(), "SigIgn:\t"); ok {
					ign, _ = strconv.ParseUint(v, 16, 64)
				}
			}
			f.Close()
			if name == "sleep" && ign&(1<<(uint(sig)-1)) != 0 {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("process %d did not come to ignore %v within 10 s", pid, sig)
}

// expBuckets returns, summed over the histogram series of name whose labels
// include want, the count, the sum, and the cumulative counts at the exp2
// bounds 2^(slot-1) and 2^slot ns (-1 when a bound is missing).
func expBuckets(ms Metrics, name string, want map[string]string, slot int) (count uint64, sum float64, below, at int64) {
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*b }
	count, sum, les := ms.histAt(name, want, near, math.Ldexp(1, slot-1)*1e-9, math.Ldexp(1, slot)*1e-9)
	return count, sum, les[0], les[1]
}

// startBinary is Start with another kernel_exporter binary (the release's).
func startBinary(t *testing.T, exe string, args ...string) *Exporter {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	return startArgv(t, addr, append([]string{exe, "--web.listen-address=" + addr}, args...), nil, exe)
}
