// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/features"

	"github.com/kernel-exporter/kernel_exporter/internal/testenv"
	"github.com/kernel-exporter/kernel_exporter/loader"
	"github.com/kernel-exporter/kernel_exporter/usdt"
)

// libbpfUSDTConfig is the YAML of testdata/probes/usdt_libbpf.bpf.c.
const libbpfUSDTConfig = `namespace: ketest
metrics:
  counters:
    - name: libbpf_usdt_names_total
      help: Firings of ketest_libbpf:mixed by its string argument
      labels:
        - name: name
          size: 16
          decoders:
            - name: string
    - name: libbpf_usdt_values_total
      help: Firings and argument sums of the ketest_libbpf probes
      labels:
        - name: what
          size: 4
          decoders:
            - name: uint
            - name: static_map
              static_map:
                "0": mixed_fired
                "1": i
                "2": neg
                "3": const_42
                "4": const_neg9
                "5": low
                "6": small
                "7": global
                "8": arg_cnt
                "9": usdt_cookie
                "10": arg8_enoent
                "11": site_fired
                "12": site_arg
                "15": string_errors
`

// TestUSDTLibbpf loads a program in ebpf_exporter's format, built with the
// system libbpf's <bpf/usdt.bpf.h> and BPF_USDT, whose sections name the
// traced binary (SEC("usdt/<path>:<provider>:<name>")), and checks every
// argument it read, for a target built at -O0 (memory operands such as
// -36(%rbp)) and -O2 (registers, a %rip-relative global): the loader must
// accept libbpf's __weak maps and LINUX_HAS_BPF_COOKIE, and fill
// __bpf_usdt_specs in libbpf's layout. Every probe of the target has a
// semaphore, raised by the attachment and lowered when the exporter stops.
func TestUSDTLibbpf(t *testing.T) {
	const n = 100 // signed char -i must not wrap
	for _, opt := range []string{"-O0", "-O2"} {
		t.Run(opt, func(t *testing.T) {
			dir := t.TempDir()
			bin := buildProbeProgram(t, dir, "ke_libbpf_target", opt, "target_libbpf.c")
			compileBPF(t, filepath.Join("integration", "testdata", "probes", "usdt_libbpf.bpf.c"), filepath.Join(dir, "libbpf.bpf.o"),
				fmt.Sprintf("-DKE_TARGET=%q", bin))
			writeProbeConfig(t, dir, "libbpf", libbpfUSDTConfig)

			e, after := startWithSemaphore(t, dir, "libbpf", bin, n)

			ms := e.Scrape()
			v := func(what string) float64 { return ms.Value("ketest_libbpf_usdt_values_total", L("what", what)) }
			var sumI, sumLow float64
			names := map[string]float64{}
			for i := 1; i <= n; i++ {
				sumI += float64(i)
				sumLow += float64(byte(i + 200))
				names[[]string{"alpha", "beta", "gamma"}[i%3]]++
			}
			want := map[string]float64{
				"mixed_fired": n, "i": sumI, "neg": 1000 * sumI, "const_42": 42 * n, "const_neg9": 9 * n,
				"low": sumLow, "small": sumI,
				// ketest_libbpf_counter starts at 100 and grows by one per iteration.
				"global":      100*n + sumI - n,
				"arg_cnt":     8 * n,
				"usdt_cookie": 0, "arg8_enoent": n,
				// site 1 passes 1, site 2 passes 2: each site has its own spec.
				"site_fired": 2 * n, "site_arg": 3 * n,
				"string_errors": 0,
			}
			for what, w := range want {
				if got := v(what); got != w {
					t.Errorf("%s = %v, want %v", what, got, w)
				}
			}
			for name, w := range names {
				if got := ms.Value("ketest_libbpf_usdt_names_total", L("name", name)); got != w {
					t.Errorf("names_total{name=%q} = %v, want %v", name, got, w)
				}
			}
			t.Logf("%s: mixed %v (i sum %v, -neg sum %v, low sum %v, -small sum %v, global sum %v), names %v, site %v (arg sum %v)",
				opt, v("mixed_fired"), v("i"), v("neg"), v("low"), v("small"), v("global"), names, v("site_fired"), v("site_arg"))

			stopLowersSemaphore(t, e, after)
		})
	}
}

// TestUSDTLibbpfPython runs a program in the form of ebpf_exporter's usdt
// example (SEC("usdt/python3:python:import__find__load__start"): a bare
// binary name, found as libbpf finds it) against Debian's python3, which
// has that probe, and checks the module names it counted: two python3
// processes each import the same 5 modules of a temporary directory
// (names no other process imports), so each is counted exactly twice.
func TestUSDTLibbpfPython(t *testing.T) {
	// The python3 the section names: the exporter looks a bare name up in
	// the standard directories, not in this process's PATH.
	py, err := loader.ResolveBinary("python3")
	if err != nil {
		testenv.SkipOrFail(t, "no python3 to trace (make test-deps installs python3-minimal): %v", err)
	}
	real, err := filepath.EvalSymlinks(py)
	if err != nil {
		t.Fatal(err)
	}
	f, err := usdt.Open(real)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Find("python", "import__find__load__start")) == 0 {
		t.Skipf("%s has no USDT probe python:import__find__load__start (built without --with-dtrace)", real)
	}
	const mods, runs = 5, 2
	dir := t.TempDir()
	compileBPF(t, filepath.Join("integration", "testdata", "probes", "usdt_python.bpf.c"), filepath.Join(dir, "python.bpf.o"))
	writeProbeConfig(t, dir, "python", `namespace: ketest
metrics:
  counters:
    - name: python_imports_total
      help: Modules python3 found and loaded
      labels:
        - name: module
          size: 64
          decoders:
            - name: string
`)
	modDir := t.TempDir()
	var names []string
	for k := range mods {
		name := fmt.Sprintf("ke_usdt_mod_%d_%d", os.Getpid(), k)
		names = append(names, name)
		if err := os.WriteFile(filepath.Join(modDir, name+".py"), []byte("X = 1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e := Start(t, "--programs=none", "--config.dir="+dir, "--config.names=python")
	if v := e.Scrape().Value("kernel_exporter_config_up", L("config", "python")); v != 1 {
		t.Fatalf("python config down\n%s", e.Logs())
	}
	for range runs {
		cmd := exec.Command(py, "-B", "-c", "import "+strings.Join(names, ", "))
		cmd.Env = append(os.Environ(), "PYTHONPATH="+modDir)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", cmd, err, out)
		}
	}
	ms := e.Scrape()
	for _, name := range names {
		if got := ms.Value("ketest_python_imports_total", L("module", name)); got != runs {
			t.Errorf("python_imports_total{module=%q} = %v, want %d", name, got, runs)
		}
	}
	t.Logf("%d modules imported by %d python3 processes; %d module names counted in all", mods, runs, ms.Series("ketest_python_imports_total", nil))
}

//go:embed testdata/fallback/usdt_libbpf.bpf.o testdata/fallback/usdt_target
var usdtLibbpfFS embed.FS

// TestMatrixUSDTLibbpf runs a program built with libbpf's usdt.bpf.h
// (testdata/fallback/usdt_libbpf.bpf.c, a bare SEC("usdt") listed under
// usdt in the config) against a static executable at fixed addresses
// (testdata/fallback/usdt_target.c), both committed prebuilt, on this
// kernel and in the kernel matrix guests. With BPF cookies (5.15+) the
// header finds each site's spec by the cookie; without them (5.10), by the
// probe's address in __bpf_usdt_ip_to_spec_id, and the verifier must drop
// the branch that calls bpf_get_attach_cookie. Two runs of the target fire
// the probe 1000 times each: every argument sum must be exact.
func TestMatrixUSDTLibbpf(t *testing.T) {
	const runs, n = 2, 1000
	r := matrixReport(t, "usdt_libbpf", "default")
	dir := t.TempDir()
	for name, mode := range map[string]os.FileMode{"usdt_libbpf.bpf.o": 0o644, "usdt_target": 0o755} {
		b, err := fs.ReadFile(usdtLibbpfFS, "testdata/fallback/"+name)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, mode); err != nil {
			t.Fatal(err)
		}
	}
	target := filepath.Join(dir, "usdt_target")
	writeProbeConfig(t, dir, "usdt_libbpf", fmt.Sprintf(`namespace: ketest
metrics:
  counters:
    - name: usdt_libbpf_values_total
      help: Firings and argument sums of ketest_static:tick
      labels:
        - name: what
          size: 4
          decoders:
            - name: uint
usdt:
  - program: on_tick
    binary: %s
    provider: ketest_static
    name: tick
`, target))
	how := "usdt (spec by BPF cookie)"
	if features.HaveProgramHelper(ebpf.Kprobe, asm.FnGetAttachCookie) != nil {
		how = "usdt (spec by probe address, no BPF cookies)"
	}
	e := Start(t, "--programs=none", "--config.dir="+dir, "--config.names=usdt_libbpf")
	if v := e.Scrape().Value("kernel_exporter_config_up", L("config", "usdt_libbpf")); v != 1 {
		t.Fatalf("usdt_libbpf config down\n%s", e.Logs())
	}
	r.attach = how
	for range runs {
		// Exit status 1: the semaphore was never raised.
		if out, err := exec.Command(target).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v (1: its probe's semaphore was not raised)\n%s", target, err, out)
		}
	}
	ms := e.Scrape()
	v := func(what int) float64 {
		return ms.Value("ketest_usdt_libbpf_values_total", L("what", fmt.Sprint(what)))
	}
	sumI := float64(runs * n * (n + 1) / 2)
	for what, w := range []float64{runs * n, sumI, 1000 * sumI, 42 * runs * n, 3 * runs * n, 0} {
		if got := v(what); got != w {
			t.Errorf("values_total{what=%d} = %v, want %v", what, got, w)
		}
	}
	r.result = fmt.Sprintf("ok: %v firings, argument sums exact", v(0))
	t.Logf("%s: %v firings; sums i %v, -neg %v, const %v, arg_cnt %v; %v failed reads", how, v(0), v(1), v(2), v(3), v(4), v(5))
}

// TestUSDTLibbpfUnknownLayout checks that an object whose libbpf USDT spec
// struct has a member this version does not know is refused with a reason
// naming the struct and the member, and nothing attached.
func TestUSDTLibbpfUnknownLayout(t *testing.T) {
	dir := t.TempDir()
	buildProbeBPF(t, "usdt_libbpf_future", dir, "future")
	writeProbeConfig(t, dir, "future", `metrics:
  counters:
    - name: future_calls_total
      help: Never counted
      labels:
        - name: id
          size: 4
          decoders:
            - name: uint
`)
	e := Start(t, "--programs=none", "--config.dir="+dir, "--config.names=future")
	ms := e.Scrape()
	if v := ms.Value("kernel_exporter_config_up", L("config", "future")); v != 0 {
		t.Fatalf("config with an unknown spec layout is up\n%s", e.Logs())
	}
	const want = "map __bpf_usdt_specs: struct __bpf_usdt_arg_spec: member scale is not in a layout this version knows (libbpf 0.8 to 1.7)"
	reasons := strings.Join(ms.LabelValues("kernel_exporter_config_error_info", "reason"), "\n")
	if !strings.Contains(reasons, want) {
		t.Errorf("no reason containing %q in:\n%s", want, reasons)
	}
	t.Logf("reason: %s", reasons)
}
