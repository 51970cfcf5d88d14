// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"fmt"
	"strings"
	"testing"
)

// usdtConfig is the YAML of testdata/probes/usdt.bpf.c for binary bin.
func usdtConfig(namespace, bin string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `namespace: %s
metrics:
  counters:
    - name: usdt_values_total
      help: Firings and argument sums of the ketest probes
      labels:
        - name: what
          size: 4
          decoders:
            - name: uint
            - name: static_map
              static_map:
                "0": args_fired
                "1": args_i
                "2": args_neg
                "3": args_low
                "4": consts_fired
                "5": consts_5
                "6": consts_neg7
                "7": global_fired
                "8": global_value
                "9": gated_fired
                "10": gated_i
                "15": read_errors
usdt:
`, namespace)
	for _, p := range []string{"args", "consts", "global", "gated"} {
		fmt.Fprintf(&b, "  - program: on_%s\n    binary: %s\n    provider: ketest\n    name: %s\n", p, bin, p)
	}
	return b.String()
}

// TestUSDT attaches one program to each USDT probe of a C program built at
// -O0 (arguments on the stack: memory operands such as -20(%rbp)) and -O2
// (registers, and a %rip-relative global), runs N iterations, and checks
// every argument sum the BPF side computed from the probe specs: signed and
// unsigned widths 1 to 8, constants, a global, and a probe that fires only
// while its semaphore is raised by the attachment.
func TestUSDT(t *testing.T) {
	const n = 200
	for _, opt := range []string{"-O0", "-O2"} {
		t.Run(opt, func(t *testing.T) {
			dir := t.TempDir()
			bin := buildProbeTarget(t, dir, opt)
			buildProbeBPF(t, "usdt", dir, "usdt")
			writeProbeConfig(t, dir, "usdt", usdtConfig("usdt", bin))

			e, after := startWithSemaphore(t, dir, "usdt", bin, n)

			ms := e.Scrape()
			v := func(what string) float64 { return ms.Value("usdt_usdt_values_total", L("what", what)) }
			var sumI, sumLow float64
			for i := 1; i <= n; i++ {
				sumI += float64(i)
				sumLow += float64(byte(i + 200))
			}
			want := map[string]float64{
				"args_fired": n, "args_i": sumI, "args_neg": 1000 * sumI, "args_low": sumLow,
				"consts_fired": n, "consts_5": 5 * n, "consts_neg7": 7 * n,
				// ketest_counter starts at 41 and grows by one per iteration.
				"global_fired": n, "global_value": 41*n + sumI - n,
				"gated_fired": n, "gated_i": sumI,
				"read_errors": 0,
			}
			for what, w := range want {
				if got := v(what); got != w {
					t.Errorf("%s = %v, want %v", what, got, w)
				}
			}
			t.Logf("%s: args %v (i sum %v, -neg sum %v, low sum %v), consts %v, global sum %v, gated %v",
				opt, v("args_fired"), v("args_i"), v("args_neg"), v("args_low"), v("consts_fired"), v("global_value"), v("gated_fired"))

			// Detaching lowers the semaphore again: the probe stops firing.
			stopLowersSemaphore(t, e, after)
		})
	}
}

// TestUSDTBadTargets checks the reasons given for a missing probe and for a
// binary without probes.
func TestUSDTBadTargets(t *testing.T) {
	dir := t.TempDir()
	bin := buildProbeTarget(t, dir, "-O2")
	buildProbeBPF(t, "usdt", dir, "noprobe")
	copyProbeFile(t, dir+"/noprobe.bpf.o", dir+"/nonotes.bpf.o")
	writeProbeConfig(t, dir, "noprobe", strings.Replace(usdtConfig("noprobe", bin), "name: gated", "name: nosuch", 1))
	writeProbeConfig(t, dir, "nonotes", strings.ReplaceAll(usdtConfig("nonotes", bin), bin, "/bin/true"))
	e := Start(t, "--programs=none", "--config.dir="+dir, "--config.names=noprobe,nonotes")
	ms := e.Scrape()
	reasons := strings.Join(ms.LabelValues("kernel_exporter_config_error_info", "reason"), "\n")
	for _, want := range []string{
		"no probe ketest:nosuch (probes: ketest:args, ketest:consts, ketest:gated, ketest:global)",
		"usdt /bin/true: no probe ketest:args: the binary has no USDT probes (.note.stapsdt)",
	} {
		if !strings.Contains(reasons, want) {
			t.Errorf("no reason containing %q in:\n%s", want, reasons)
		}
	}
}
