// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/config"
	"github.com/kernel-exporter/kernel_exporter/internal/plural"
	"github.com/kernel-exporter/kernel_exporter/loader"
	"github.com/kernel-exporter/kernel_exporter/programs"
)

// exhaustion is the result of exhaustPorts.
type exhaustion struct {
	netns      uint64 // inode of the private network namespace
	ok         int    // connects that succeeded
	fail4      int    // EADDRNOTAVAIL to 127.0.0.1:443
	fail6      int    // EADDRNOTAVAIL to [::1]:8080
	port4      int    // 443
	port6      int    // 8080
	range6Low  int    // 7168: 8080's block of 1024
	range6High int    // 8191
}

// exhaustPorts makes connect() fail with EADDRNOTAVAIL a known number of
// times, in a private network namespace whose ip_local_port_range is two
// ports (40000-40001): two connections to a listener on 127.0.0.1:443 and
// two to one on [::1]:8080 take both ports for each destination (a local
// port may serve several destinations), then every further connect to
// either destination finds no free port.
func exhaustPorts(t *testing.T, fail4, fail6 int) exhaustion {
	t.Helper()
	ns := newThreadNetns(t)
	x := exhaustion{fail4: fail4, fail6: fail6, port4: 443, port6: 8080, range6Low: 7168, range6High: 8191}
	var fds []int
	t.Cleanup(func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	})
	err := ns.Run(func() error {
		var st unix.Stat_t
		if err := unix.Stat("/proc/thread-self/ns/net", &st); err != nil {
			return err
		}
		x.netns = st.Ino
		if err := sysctl("net.ipv4.ip_local_port_range", "40000 40001"); err != nil {
			return err
		}
		for _, dst := range []struct {
			family, port, fail int
		}{{unix.AF_INET, x.port4, fail4}, {unix.AF_INET6, x.port6, fail6}} {
			addr := loopback4(dst.port)
			if dst.family == unix.AF_INET6 {
				addr = loopback6(dst.port)
			}
			l, err := unix.Socket(dst.family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return err
			}
			fds = append(fds, l)
			if err := unix.Bind(l, addr); err != nil {
				return fmt.Errorf("bind port %d: %w", dst.port, err)
			}
			if err := unix.Listen(l, 16); err != nil {
				return err
			}
			for i := 0; i < 2+dst.fail; i++ {
				fd, err := unix.Socket(dst.family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
				if err != nil {
					return err
				}
				err = unix.Connect(fd, addr)
				switch {
				case i < 2 && err != nil:
					unix.Close(fd)
					return fmt.Errorf("connect #%d to port %d: %w, want success (2 local ports)", i, dst.port, err)
				case i < 2:
					fds = append(fds, fd) // keep the port taken
					x.ok++
				case !errors.Is(err, unix.EADDRNOTAVAIL):
					unix.Close(fd)
					return fmt.Errorf("connect #%d to port %d: %v, want EADDRNOTAVAIL", i, dst.port, err)
				default:
					unix.Close(fd)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// checkExhaustionCounts checks connect_addr_not_avail_total moved by exactly
// the failures of x, under x's namespace and the destinations' port ranges.
func checkExhaustionCounts(t *testing.T, before, after Metrics, x exhaustion) {
	t.Helper()
	const metric = "kernel_connect_addr_not_avail_total"
	ns := strconv.FormatUint(x.netns, 10)
	for _, c := range []struct {
		min, max int
		family   string
		want     int
	}{{x.port4, x.port4, "inet", x.fail4}, {x.range6Low, x.range6High, "inet6", x.fail6}} {
		lbl := L("netns", ns, "port_min", strconv.Itoa(c.min), "port_max", strconv.Itoa(c.max), "family", c.family)
		if d := after.Value(metric, lbl) - before.Value(metric, lbl); d != float64(c.want) {
			t.Errorf("%s%v moved by %v, want exactly %d\n%s", metric, lbl, d, c.want, after.seriesDump(metric))
		} else {
			t.Logf("%s%v +%v", metric, lbl, d)
		}
	}
	if n := after.Series(metric, L("netns", ns)); n != 2 {
		t.Errorf("netns %s has %d series, want 2\n%s", ns, n, after.seriesDump(metric))
	}
}

// TestProgramPortExhaustion fails 9 connects to 127.0.0.1:443 and 6 to
// [::1]:8080 with EADDRNOTAVAIL in a private network namespace (see
// exhaustPorts) and checks the counts under that namespace's inode and
// the ranges 443-443 and 7168-8191 are exactly 9 and 6. The namespace is
// new, so nothing else can count there.
func TestProgramPortExhaustion(t *testing.T) {
	e := Start(t, "--programs=port_exhaustion")
	before := e.Scrape()
	if v := before.Value("kernel_exporter_config_up", L("config", "port_exhaustion")); v != 1 {
		t.Fatalf("config_up{config=port_exhaustion} = %v, want 1\n%s", v, e.Logs())
	}
	x := exhaustPorts(t, 9, 6)
	checkExhaustionCounts(t, before, e.Scrape(), x)
}

// checkExhaustionChoice checks the programs port_exhaustion attached: the
// "connect" group on tracepoints (exit only, or entry and exit), and the
// "search" groups on family's kinds, or absent when family is "" (the
// kernel has neither fentry nor kprobes in this mode). It returns the
// attach kinds for the matrix row.
func checkExhaustionChoice(t *testing.T, ms Metrics, family string) string {
	t.Helper()
	var kinds []string
	progs := 0
	for _, mt := range ms["kernel_exporter_program_attached"].GetMetric() {
		lbl := map[string]string{}
		for _, lp := range mt.GetLabel() {
			lbl[lp.GetName()] = lp.GetValue()
		}
		if lbl["config"] != "port_exhaustion" {
			continue
		}
		kind, _, _ := strings.Cut(lbl["section"], "/")
		want := []string{"tracepoint"}
		if strings.HasPrefix(lbl["alternative"], "search") {
			want = families[family]
			if family == "fentry-or-kprobe" {
				want = slices.Concat(families["fentry"], families["kprobe"])
			}
		}
		if !slices.Contains(want, kind) {
			t.Errorf("program %s (%s) of alternative %q attached, want one of %v", lbl["program"], lbl["section"], lbl["alternative"], want)
		}
		if !slices.Contains(kinds, kind) {
			kinds = append(kinds, kind)
		}
		progs++
	}
	sort.Strings(kinds)
	return fmt.Sprintf("%s (%s)", strings.Join(kinds, "+"), plural.Count(progs, "program"))
}

// TestMatrixPortExhaustion runs port_exhaustion in each attach mode: its
// connect() counts are tracepoints and must work everywhere; its
// inet_hash_connect search length needs fentry or kprobes (an optional
// group). Where the kernel has one, the EADDRNOTAVAIL results of
// __inet_hash_connect must be exactly the failed connects (on a quiet
// machine; at least, otherwise), each having checked at least one port;
// where it has neither, the config must be up without the group, and the
// test ends as SKIP for the search length.
func TestMatrixPortExhaustion(t *testing.T) {
	const hist = "kernel_inet_hash_connect_ports_checked"
	for _, m := range kprobeModes {
		t.Run(m.name, func(t *testing.T) {
			r := matrixReport(t, "port_exhaustion", m.name)
			e := Start(t, append([]string{"--programs=port_exhaustion"}, m.args...)...)
			family := m.expect(t, "fentry", "kprobe")
			before := e.Scrape()
			if v := before.Value("kernel_exporter_config_up", L("config", "port_exhaustion")); v != 1 {
				t.Fatalf("config_up{config=port_exhaustion} = %v, want 1 (the search groups are optional)\n%s", v, e.Logs())
			}
			choice := family
			if family == "fentry" {
				// Before 5.17 the fexit programs' bpf_get_func_ret is
				// missing, so those search groups fall back to kprobes
				// while the fentry-only ones keep fentry.
				if _, v, err := loader.KernelRelease(); err == nil && v.Less(config.KernelVersion{5, 17, 0}) {
					choice = "fentry-or-kprobe"
				}
			}
			r.attach = checkExhaustionChoice(t, before, choice)
			failed, _, _ := before.Hist(hist, L("result", "EADDRNOTAVAIL"), 1)
			x := exhaustPorts(t, 9, 6)
			after := e.Scrape()
			checkExhaustionCounts(t, before, after, x)
			if family == "" {
				if n := after.Series(hist, nil); n != 0 {
					t.Errorf("%s has %d series without a search hook", hist, n)
				}
				r.result = fmt.Sprintf("connect counts moved (%d+%d EADDRNOTAVAIL); search length: not on this kernel", x.fail4, x.fail6)
				t.Skipf("%s needs fentry or kprobes, which this kernel lacks in mode %s: the connect() counts were checked", hist, m.name)
			}
			c, sum, _ := after.Hist(hist, L("result", "EADDRNOTAVAIL"), 1)
			checkCalls(t, "inet_hash_connect EADDRNOTAVAIL results", float64(c-failed), float64(x.fail4+x.fail6))
			_, sum0, _ := before.Hist(hist, L("result", "EADDRNOTAVAIL"), 1)
			if sum-sum0 < float64(c-failed) {
				t.Errorf("failed searches checked %v ports in all, want >= 1 each (%d)", sum-sum0, c-failed)
			}
			okc, _, _ := after.Hist(hist, L("result", "ok"), 1)
			okb, _, _ := before.Hist(hist, L("result", "ok"), 1)
			if okc-okb < uint64(x.ok) {
				t.Errorf("successful searches moved by %d, want >= %d", okc-okb, x.ok)
			}
			r.result = fmt.Sprintf("moved: %d EADDRNOTAVAIL connects, %d failed searches checking %.0f ports, %d ok", x.fail4+x.fail6, c-failed, sum-sum0, okc-okb)
		})
	}
}

// writeBundledVariant writes bundled program name into dir as a user
// config (<name>.yaml and <name>.bpf.o, for --config.dir) with the YAML
// text old replaced by new: with the choices of an alternatives group
// swapped, the fallback that older kernels take runs on this one (the
// better choice, still in the group, is never loaded).
// startBundledVariant starts the exporter with only a copy of bundled
// program name whose YAML has old replaced by new (see
// writeBundledVariant), checks that it is up, and returns the exporter and
// its first scrape.
func startBundledVariant(t *testing.T, name, old, new string) (*Exporter, Metrics) {
	t.Helper()
	dir := t.TempDir()
	writeBundledVariant(t, dir, name, old, new)
	e := Start(t, "--programs=none", "--config.dir="+dir, "--config.names="+name)
	ms := e.Scrape()
	if v := ms.Value("kernel_exporter_config_up", L("config", name)); v != 1 {
		t.Fatalf("config_up{config=%s} = %v, want 1\n%s", name, v, e.Logs())
	}
	return e, ms
}

func writeBundledVariant(t *testing.T, dir, name, old, new string) {
	t.Helper()
	y, err := fs.ReadFile(programs.FS, name+".yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(y), old) {
		t.Fatalf("%s.yaml has no %q", name, old)
	}
	obj, err := fs.ReadFile(programs.FS, name+".bpf.o")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(strings.Replace(string(y), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".bpf.o"), obj, 0o644); err != nil {
		t.Fatal(err)
	}
}

// checkAttached fails unless exactly progs of config are attached, each
// once.
func checkAttached(t *testing.T, ms Metrics, config string, progs ...string) {
	t.Helper()
	var got []string
	for _, mt := range ms["kernel_exporter_program_attached"].GetMetric() {
		if !matches(mt, L("config", config)) || mt.GetGauge().GetValue() != 1 {
			continue
		}
		for _, lp := range mt.GetLabel() {
			if lp.GetName() == "program" {
				got = append(got, lp.GetValue())
			}
		}
	}
	sort.Strings(got)
	want := slices.Clone(progs)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Fatalf("config %s attached %v, want %v", config, got, want)
	}
}

// TestProgramPortExhaustionEntryExit runs port_exhaustion's fallback for
// kernels without bpf_task_pt_regs (before 5.15), sys_enter_connect and
// sys_exit_connect with a per-thread entry, on this kernel (the choices
// swapped in a copy of the config), and checks the same exact
// counts as TestProgramPortExhaustion.
func TestProgramPortExhaustionEntryExit(t *testing.T) {
	e, before := startBundledVariant(t, "port_exhaustion",
		"      - connect_exit_regs\n      - [connect_enter, connect_exit]\n",
		"      - [connect_enter, connect_exit]\n      - connect_exit_regs\n")
	var progs []string
	if kernelCaps(t).fentry {
		progs = append(progs, "hash_connect_fentry", "hash_connect_fexit", "check4_fentry", "check6_fentry")
	} else if kernelCaps(t).kprobes {
		progs = append(progs, "hash_connect_kprobe", "hash_connect_kretprobe", "check4_kprobe", "check6_kprobe")
	}
	checkAttached(t, before, "port_exhaustion", append(progs, "connect_enter", "connect_exit")...)
	x := exhaustPorts(t, 9, 6)
	checkExhaustionCounts(t, before, e.Scrape(), x)
}
