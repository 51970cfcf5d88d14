// SPDX-License-Identifier: Apache-2.0

package integration

// Helpers of the kernel matrix tests (matrix_test.go): what the running
// kernel supports, the attach mode of a run, the per-program report line
// that make test-kernels turns into a table, and workloads that need their
// own network namespace.

import (
	"embed"
	encbin "encoding/binary"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/internal/plural"
	"github.com/kernel-exporter/kernel_exporter/loader"
)

//go:embed testdata/fallback/fallback.bpf.o testdata/fallback/fallback.yaml
var fallbackFS embed.FS

// writeFallback writes the fallback test config into dir as <name>.yaml
// and <name>.bpf.o, for --config.dir. A non-empty requires replaces the
// config's requires block (with other top-level keys too, if wanted).
func writeFallback(t *testing.T, dir, name, requires string) {
	t.Helper()
	obj, err := fs.ReadFile(fallbackFS, "testdata/fallback/fallback.bpf.o")
	if err != nil {
		t.Fatal(err)
	}
	y, err := fs.ReadFile(fallbackFS, "testdata/fallback/fallback.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const block = "requires:\n  features: [btf]\n"
	if !strings.Contains(string(y), block) {
		t.Fatalf("fallback.yaml has no %q", block)
	}
	if requires != "" {
		y = []byte(strings.Replace(string(y), block, requires, 1))
	}
	if err := os.WriteFile(filepath.Join(dir, name+".bpf.o"), obj, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".yaml"), y, 0o644); err != nil {
		t.Fatal(err)
	}
}

// caps is what the running kernel supports, probed like the exporter does.
type caps struct{ fentry, kprobes bool }

var (
	capsOnce sync.Once
	capsVal  caps
	capsErr  error
)

// kernelCaps probes fentry and kprobes. When KE_MATRIX_EXPECT is set (a
// comma-separated list of "fentry", "kprobes", or "none"), the probe must
// find exactly those: make test-kernels pins what each kernel of the
// matrix has, so that a broken probe cannot turn a test into a skip.
func kernelCaps(t *testing.T) caps {
	t.Helper()
	capsOnce.Do(func() {
		capsVal.fentry = loader.HaveFeature("fentry", loader.Options{}) == nil
		capsVal.kprobes = loader.HaveFeature("kprobes", loader.Options{}) == nil
		if exp, ok := os.LookupEnv("KE_MATRIX_EXPECT"); ok {
			want := strings.Split(exp, ",")
			if capsVal.fentry != slices.Contains(want, "fentry") || capsVal.kprobes != slices.Contains(want, "kprobes") {
				capsErr = fmt.Errorf("KE_MATRIX_EXPECT=%q but probes found fentry=%v kprobes=%v (fentry: %v; kprobes: %v)", exp, capsVal.fentry, capsVal.kprobes,
					loader.HaveFeature("fentry", loader.Options{}), loader.HaveFeature("kprobes", loader.Options{}))
			}
		}
	})
	if capsErr != nil {
		t.Fatal(capsErr)
	}
	return capsVal
}

// attachMode is one way of running a config: which attach kinds the
// exporter may use (--attach.disable).
type attachMode struct {
	name string
	args []string
	// order is the families the mode allows, best first.
	order []string
}

var (
	modeDefault    = attachMode{"default", nil, []string{"fentry", "kprobe", "tracepoint"}}
	modeKprobe     = attachMode{"kprobe", []string{"--attach.disable=fentry,fexit"}, []string{"kprobe", "tracepoint"}}
	modeTracepoint = attachMode{"tracepoint", []string{"--attach.disable=fentry,fexit,kprobe,kretprobe"}, []string{"tracepoint"}}
)

// families maps a family to its section kinds.
var families = map[string][]string{
	"fentry":     {"fentry", "fexit"},
	"kprobe":     {"kprobe", "kretprobe"},
	"tracepoint": {"tracepoint"},
}

// expect returns the family the mode must choose for a config whose
// alternatives offer offered (families), or "" when none can work here.
func (m attachMode) expect(t *testing.T, offered ...string) string {
	c := kernelCaps(t)
	for _, f := range m.order {
		if !slices.Contains(offered, f) {
			continue
		}
		switch f {
		case "fentry":
			if c.fentry {
				return f
			}
		case "kprobe":
			if c.kprobes {
				return f
			}
		default:
			return f
		}
	}
	return ""
}

// matrixRow is one line of the per-kernel table. It is printed when the
// test ends as
//
//	MATRIX|<kernel>|<config>|<mode>|<attach>|<result>
//
// with result prefixed by "FAIL: " when the test failed.
type matrixRow struct {
	attach, result string
}

func matrixReport(t *testing.T, config, mode string) *matrixRow {
	r := &matrixRow{attach: "-", result: "not reached"}
	t.Cleanup(func() {
		res := r.result
		if t.Failed() {
			res = "FAIL: " + res
		}
		rel, _, _ := loader.KernelRelease()
		fmt.Printf("MATRIX|%s|%s|%s|%s|%s\n", rel, config, mode, r.attach, res)
	})
	return r
}

// fallbackOK lets alternatives group fall back from the expected family
// when the exporter's log says it passed over the better choice because
// of because (a kernel limit, e.g. fentry on a function with 7 arguments
// before 6.6).
type fallbackOK struct{ group, because string }

// checkChoice checks config's state after start-up against family and
// records the attach kinds or the reason in r. family "" means the kernel
// lacks every alternative in this mode: the config must be down with a
// "not supported" (or "disabled by --attach.disable") reason, and then the
// test ends as SKIP with that reason, since what the program measures
// cannot be checked here. Otherwise the config must be up, and checkChoice
// returns.
func checkChoice(t *testing.T, e *Exporter, config, family string, r *matrixRow, ok ...fallbackOK) {
	t.Helper()
	ms := e.Scrape()
	up := ms.Value("kernel_exporter_config_up", L("config", config))
	reasons := ms.LabelValues("kernel_exporter_config_error_info", "reason")
	if family == "" {
		if up != 0 {
			t.Fatalf("config %s is up, but this kernel supports none of its alternatives in this mode\n%s", config, e.Logs())
		}
		if len(reasons) != 1 || !unsupportedReason(reasons[0]) {
			t.Fatalf("config %s is down for an unexpected reason (want \"not supported by this kernel\" or \"disabled by --attach.disable\"): %q", config, reasons)
		}
		r.result = "unsupported: " + summarizeReason(reasons[0])
		t.Skipf("this kernel lacks every alternative of config %s in this mode (%s): its down status and reason were checked, its metrics cannot be",
			config, summarizeReason(reasons[0]))
	}
	if up != 1 && len(reasons) == 1 && strings.HasPrefix(reasons[0], "requires kernel >= ") {
		// The config's requires: names a newer kernel (funclatency needs
		// bpf_get_func_ip, 5.15): down on 5.10 whatever the hooks.
		r.result = "unsupported: " + reasons[0]
		t.Skipf("config %s is down on this kernel as its requires: block says (%s): its metrics cannot be checked", config, reasons[0])
	}
	if up != 1 {
		t.Fatalf("config %s is down, want up with %s programs: %q\n%s", config, family, reasons, e.Logs())
	}
	var kinds []string
	var progs int
	for _, m := range ms["kernel_exporter_program_attached"].GetMetric() {
		lbl := map[string]string{}
		for _, lp := range m.GetLabel() {
			lbl[lp.GetName()] = lp.GetValue()
		}
		if lbl["config"] != config {
			continue
		}
		if m.GetGauge().GetValue() != 1 {
			t.Errorf("program %s (%s) is not attached", lbl["program"], lbl["section"])
		}
		k, _, _ := strings.Cut(lbl["section"], "/")
		if g := lbl["alternative"]; g != "" && !slices.Contains(families[family], k) && !fellBack(e.Logs(), config, g, ok) {
			t.Errorf("program %s (%s) of alternative %q was chosen, want a %s program\n%s", lbl["program"], lbl["section"], g, family, e.Logs())
		}
		if !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
		progs++
	}
	sort.Strings(kinds)
	r.attach = fmt.Sprintf("%s (%s)", strings.Join(kinds, "+"), plural.Count(progs, "program"))
	r.result = "up, values not checked"
}

// fellBack reports whether the exporter logged that it passed over a
// choice of group for a reason listed in ok.
func fellBack(logs, config, group string, ok []fallbackOK) bool {
	for _, line := range strings.Split(logs, "\n") {
		if !strings.Contains(line, `msg="alternative chosen" config=`+config+` alternative=`+group+` `) {
			continue
		}
		for _, o := range ok {
			if o.group == group && strings.Contains(line, o.because) {
				return true
			}
		}
	}
	return false
}

func unsupportedReason(reason string) bool {
	return strings.Contains(reason, "not supported by this kernel") || strings.Contains(reason, "disabled by --attach.disable")
}

// summarizeReason shortens a down config's reason to what is missing.
func summarizeReason(reason string) string {
	var out []string
	for _, s := range []struct{ needle, short string }{
		{"fentry/fexit not supported", "no fentry/fexit"},
		{"kprobes not supported", "no kprobes"},
		{"disabled by --attach.disable", "disabled by flag"},
		{"requires ", "requirement not met"},
	} {
		if strings.Contains(reason, s.needle) {
			out = append(out, s.short)
		}
	}
	if len(out) == 0 {
		return reason
	}
	return strings.Join(out, ", ")
}

// errorReason returns the reason label of config's error_info, or "".
func errorReason(ms Metrics, config string) string {
	if mf, ok := ms["kernel_exporter_config_error_info"]; ok {
		for _, m := range mf.GetMetric() {
			if matches(m, L("config", config)) {
				for _, lp := range m.GetLabel() {
					if lp.GetName() == "reason" {
						return lp.GetValue()
					}
				}
			}
		}
	}
	return ""
}

// threadNetns is a network namespace of its own, entered by one locked OS
// thread. Run executes functions on that thread, so the sockets they
// create live in the namespace (the file descriptors work from any
// thread). The namespace has lo up and a route that sends 10.0.0.0/8 out
// of lo, where replies to those addresses are dropped: SYNs "from" them
// stay half-open in a listener's SYN queue. It goes away with its thread
// and its last socket.
type threadNetns struct {
	do chan func()
}

func newThreadNetns(t *testing.T) *threadNetns {
	t.Helper()
	ns := &threadNetns{do: make(chan func())}
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the thread exits with this goroutine, so no other
		// goroutine ever runs in the namespace.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("unshare network namespace: %w", err)
			return
		}
		for _, args := range [][]string{{"link", "set", "lo", "up"}, {"route", "add", "10.0.0.0/8", "dev", "lo"}} {
			// Children inherit the namespace of the thread that forks them.
			if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
				errc <- fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
				return
			}
		}
		errc <- nil
		for f := range ns.do {
			f()
		}
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { close(ns.do) })
	return ns
}

// Run calls f on the namespace's thread and returns its error.
func (ns *threadNetns) Run(f func() error) error {
	errc := make(chan error, 1)
	ns.do <- func() { errc <- f() }
	return <-errc
}

// sysctl writes a value under /proc/sys of the calling thread's
// namespaces (call it inside threadNetns.Run for net.* keys).
func sysctl(key, value string) error {
	p := "/proc/sys/" + strings.ReplaceAll(key, ".", "/")
	if err := os.WriteFile(p, []byte(value), 0o644); err != nil {
		return fmt.Errorf("sysctl %s=%s: %w", key, value, err)
	}
	return nil
}

// listenTCP4 opens a listening socket on 127.0.0.1:port with the given
// accept backlog (net.Listen always uses somaxconn) and, when rcvbuf > 0,
// SO_RCVBUF (inherited by accepted sockets).
func listenTCP4(port, backlog, rcvbuf int) (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if rcvbuf > 0 {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, rcvbuf); err != nil {
			unix.Close(fd)
			return -1, err
		}
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("bind 127.0.0.1:%d: %w", port, err)
	}
	if err := unix.Listen(fd, backlog); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// listenPort returns the local port of a bound socket.
func listenPort(fd int) int {
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return 0
	}
	return sa.(*unix.SockaddrInet4).Port
}

// connectTCP4 connects a new socket to 127.0.0.1:port (blocking).
func connectTCP4(port int) (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err := unix.Connect(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("connect 127.0.0.1:%d: %w", port, err)
	}
	return fd, nil
}

// sendSYN sends one bare TCP SYN from src:sport to 127.0.0.1:dport through
// a raw socket (IPPROTO_RAW: we write the IP header).
func sendSYN(raw int, src [4]byte, sport, dport uint16, seq uint32) error {
	dst := [4]byte{127, 0, 0, 1}
	pkt := make([]byte, 40)
	ip, tcp := pkt[:20], pkt[20:]
	ip[0] = 0x45
	encbin.BigEndian.PutUint16(ip[2:], 40)
	ip[8] = 64
	ip[9] = unix.IPPROTO_TCP
	copy(ip[12:16], src[:])
	copy(ip[16:20], dst[:])
	encbin.BigEndian.PutUint16(ip[10:], checksum(ip, 0))
	encbin.BigEndian.PutUint16(tcp[0:], sport)
	encbin.BigEndian.PutUint16(tcp[2:], dport)
	encbin.BigEndian.PutUint32(tcp[4:], seq)
	tcp[12] = 5 << 4
	tcp[13] = 0x02 // SYN
	encbin.BigEndian.PutUint16(tcp[14:], 65535)
	// Pseudo header: src, dst, zero, protocol, TCP length.
	var sum uint32
	for i := 0; i < 4; i += 2 {
		sum += uint32(encbin.BigEndian.Uint16(src[i:])) + uint32(encbin.BigEndian.Uint16(dst[i:]))
	}
	sum += unix.IPPROTO_TCP + uint32(len(tcp))
	encbin.BigEndian.PutUint16(tcp[16:], checksum(tcp, sum))
	return unix.Sendto(raw, pkt, 0, &unix.SockaddrInet4{Addr: dst})
}

// checksum is the Internet checksum of b, starting from a partial sum.
func checksum(b []byte, sum uint32) uint16 {
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(encbin.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}
