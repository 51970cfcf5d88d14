// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// hintsYAML is the config of every variant of testdata/hints/mistakes.bpf.c.
const hintsYAML = `metrics:
  counters:
    - name: hints_calls_total
      help: getppid calls by process (loader hints test)
`

// idleYAML is the config of testdata/hints/idle.bpf.c.
const idleYAML = `metrics:
  counters:
    - name: idle_syscalls_total
      help: System calls of the host (idle program test)
  histograms:
    - name: idle_acct_calls
      help: acct calls, each in slot 0 (idle program test)
      bucket_type: exp2
      bucket_min: 0
      bucket_max: 7
`

// hasLine reports whether out has line as one of its lines.
func hasLine(out, line string) bool {
	for _, l := range strings.Split(out, "\n") {
		if l == line {
			return true
		}
	}
	return false
}

// TestLoaderHints builds an author's common mistakes with clang and checks
// what --config.check says of each, line for line: a missing license
// section (loads, with a warning naming the object and the helpers that
// would be refused; the same warning in the log), a GPL-only helper called
// without one, a loop bounded by a syscall argument that runs past a stack
// array, and a map value used without a NULL check (each refused: the
// program, its section, the verifier's complaint and the advice).
func TestLoaderHints(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join("integration", "testdata", "hints", "mistakes.bpf.c")
	const (
		sec  = "tracepoint/syscalls/sys_enter_getppid"
		fix  = `: add char LICENSE[] SEC("license") = "GPL"; (or "Dual BSD/GPL")`
		tail = "; verifier log tail:"
	)
	for _, tc := range []struct {
		name, define string
		code         int
		want         []string // lines, with Y the YAML's path and O the object's
	}{{
		name: "no_license", define: "NO_LICENSE",
		want: []string{
			"ok    no_license (Y): 1 program attached",
			"warn  no_license (Y): object O has no license section, so the kernel will refuse its calls to GPL-only helpers (it calls none now, but " +
				"bpf_probe_read_kernel, bpf_probe_read_user and their _str forms, bpf_get_current_task, bpf_perf_event_output, bpf_get_stack, bpf_get_stackid, bpf_printk (bpf_trace_printk) would be refused)" + fix,
		},
	}, {
		name: "gpl_helper", define: "GPL_HELPER", code: 1,
		want: []string{
			"FAIL  gpl_helper (Y): O: load: verifier rejected program count_getppid (section " + sec + "): invalid argument: cannot call GPL-restricted function from non-GPL compatible program; " +
				"hint: bpf_probe_read_kernel_str is GPL-only and the object has no license section" + fix + tail,
			"warn  gpl_helper (Y): object O has no license section, so the kernel will refuse its calls to GPL-only helpers (it calls bpf_probe_read_kernel_str)" + fix,
		},
	}, {
		name: "ctx_loop", define: "CTX_LOOP", code: 1,
		want: []string{
			"FAIL  ctx_loop (Y): O: load: verifier rejected program count_getppid (section " + sec + "): permission denied: invalid read from stack R4 off=0 size=1; " +
				"hint: an access runs past a stack variable, most often an array index in a loop bounded by a value from the context (the verifier follows every iteration): " +
				"bound the index by the array's size as well (for (i = 0; i < n && i < sizeof(buf); i++))" + tail,
		},
	}, {
		name: "no_null_check", define: "NO_NULL_CHECK", code: 1,
		want: []string{
			"FAIL  no_null_check (Y): O: load: verifier rejected program count_getppid (section " + sec + "): permission denied: R0 invalid mem access 'map_value_or_null'; " +
				"hint: the value bpf_map_lookup_elem returned is used without a NULL check (it is NULL when the key is absent): check it first (if (!value) return 0;)" + tail,
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			obj := filepath.Join(dir, tc.name+".bpf.o")
			compileBPF(t, src, obj, "-D"+tc.define)
			writeProbeConfig(t, dir, tc.name, hintsYAML)
			out, errOut, code := runExporter(t, "--programs=none", "--config.dir="+dir, "--config.names="+tc.name, "--config.check")
			if code != tc.code {
				t.Errorf("--config.check exited %d, want %d", code, tc.code)
			}
			r := strings.NewReplacer("Y", filepath.Join(dir, tc.name+".yaml"), "O", obj)
			for _, w := range tc.want {
				if w = r.Replace(w); !hasLine(out, w) {
					t.Errorf("--config.check does not print the line\n%s\n%s%s", w, out, errOut)
				}
			}
			if tc.name == "no_license" && !strings.Contains(errOut, `msg="config object without a GPL-compatible licence" config=no_license warning="object `+obj+` has no license section`) {
				t.Errorf("the load's log lacks the licence warning:\n%s", errOut)
			}
		})
	}
}

// TestNeverRan loads a program attached to a tracepoint nothing calls
// (syscalls:sys_enter_acct) beside one every system call runs, and checks
// that --config.check --verbose, dump and hist name the first as having
// run 0 times over their window, and only it, and that the landing page
// marks it from the CPU budget's last window.
func TestNeverRan(t *testing.T) {
	dir := t.TempDir()
	compileBPF(t, filepath.Join("integration", "testdata", "hints", "idle.bpf.c"), filepath.Join(dir, "idle.bpf.o"))
	writeProbeConfig(t, dir, "idle", idleYAML)
	yaml := regexp.QuoteMeta(filepath.Join(dir, "idle.yaml"))
	const (
		never = `program never \(section tracepoint/syscalls/sys_enter_acct\) ran 0 times `
		why   = ` \(BPF run count\): nothing triggered its hook; check that the hook is the one the workload reaches`
	)
	load := []string{"--programs=none", "--config.dir=" + dir, "--config.names=idle"}

	out, errOut, code := runExporter(t, append(load, "--config.check", "--verbose")...)
	if code != 0 {
		t.Fatalf("--config.check --verbose exited %d\n%s%s", code, out, errOut)
	}
	want := regexp.MustCompile(`(?m)^idle  idle \(` + yaml + `\): ` + never + `in the [0-9.]+m?s since its load` + why + `$`)
	if !want.MatchString(out) || strings.Contains(out, "program busy") {
		t.Errorf("--config.check --verbose does not say that never (and only it) ran 0 times (%s):\n%s", want, out)
	}

	out, errOut, code = runExporter(t, append([]string{"dump"}, append(load, "--duration=1s")...)...)
	if code != 0 {
		t.Fatalf("dump exited %d\n%s", code, errOut)
	}
	want = regexp.MustCompile(`(?m)^kernel_exporter dump: config idle \(` + yaml + `\): ` + never + `in the 1(\.[0-9])?s window` + why + `$`)
	if !want.MatchString(errOut) || strings.Contains(errOut, "program busy") {
		t.Errorf("dump does not say that never (and only it) ran 0 times (%s):\n%s", want, errOut)
	}
	if !regexp.MustCompile(`(?m)^kernel_idle_syscalls_total\{zero="0"\} [1-9]`).MatchString(out) {
		t.Errorf("dump: busy counted no system call:\n%s", out)
	}

	out, errOut, code = runExporter(t, "hist", "--config.dir="+dir, "idle", "--interval=1s", "--count=1")
	if code != 0 {
		t.Fatalf("hist exited %d\n%s%s", code, out, errOut)
	}
	want = regexp.MustCompile(`(?m)^[0-9:]{8} ` + never + `in the 1(\.[0-9])?s interval` + why + `$`)
	if !want.MatchString(out) || strings.Contains(out, "program busy") {
		t.Errorf("hist does not say that never (and only it) ran 0 times (%s):\n%s", want, out)
	}

	e := Start(t, append(load, "--bpf.cpu-budget=1", "--bpf.budget-period=1s", "--bpf.budget-window=200ms")...)
	want = regexp.MustCompile(`<span class="mark idle">ran 0 times</span> in the last 2[0-9]{2}ms window, (just now|[0-9]s ago): never \(section tracepoint/syscalls/sys_enter_acct\) `)
	var row string
	Eventually(t, 10*time.Second, func() bool {
		row = landingRow(e.Get("/"), "idle")
		return want.MatchString(row)
	}, "the landing page's row of idle does not mark never (%s)", want)
	if strings.Contains(row, "busy (section") {
		t.Errorf("the landing page marks busy as idle:\n%s", row)
	}
}
