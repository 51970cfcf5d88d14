// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// xdpConfig is the YAML of testdata/probes/xdp.bpf.c.
func xdpConfig(namespace string) string {
	return fmt.Sprintf(`namespace: %s
metrics:
  counters:
    - name: xdp_packets_total
      help: Packets arriving on the interface, by kind
      labels:
        - name: kind
          size: 4
          decoders:
            - name: uint
            - name: static_map
              static_map: {"0": udp_test, "1": other}
`, namespace)
}

// xdpTestPort is XDP_TEST_PORT of testdata/probes/xdp.bpf.c.
const xdpTestPort = 31337

// ipRun runs ip(8) with args and fails the test on error.
func ipRun(t *testing.T, ip string, args ...string) string {
	t.Helper()
	out, err := exec.Command(ip, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// sendUDPFromNetns sends n UDP datagrams to dst from inside the network
// namespace at nsPath, on a locked OS thread that is never handed back to
// the Go scheduler (it ends with its goroutine).
func sendUDPFromNetns(nsPath string, dst *net.UDPAddr, n int) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // not unlocked: the thread dies in the netns
		errc <- func() error {
			f, err := os.Open(nsPath)
			if err != nil {
				return err
			}
			defer f.Close()
			if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
				return fmt.Errorf("setns %s: %w", nsPath, err)
			}
			// Unconnected: ICMP port unreachable replies are not reported
			// to it, so every write sends one datagram.
			c, err := net.ListenUDP("udp4", nil)
			if err != nil {
				return err
			}
			defer c.Close()
			for i := 0; i < n; i++ {
				if _, err := c.WriteToUDP([]byte("kernel_exporter xdp test"), dst); err != nil {
					return err
				}
				// A veth with XDP queues in a 256-packet ring: let the
				// receiving side drain it now and then.
				if i%50 == 49 {
					time.Sleep(2 * time.Millisecond)
				}
			}
			return nil
		}()
	}()
	return <-errc
}

// TestXDPInterface attaches SEC("xdp/<if>") to one end of a veth pair whose
// other end is in a private network namespace (driver mode), sends N UDP
// datagrams from that namespace, and checks that the program counted
// exactly N of them; the same with SEC("xdp/lo") (generic mode) and N
// datagrams to 127.0.0.1.
// A section naming a missing interface is down with a reason naming the
// section and the interface; when the exporter stops, the interface has no
// XDP program left.
func TestXDPInterface(t *testing.T) {
	const n = 200
	ip := probeNeedTool(t, "create a veth pair and a network namespace", "ip")
	id := os.Getpid() % 100000
	host, peer, ns := fmt.Sprintf("kexdp%d", id), fmt.Sprintf("kexdq%d", id), fmt.Sprintf("ke-xdp-%d", id)
	ipRun(t, ip, "netns", "add", ns)
	t.Cleanup(func() { exec.Command(ip, "netns", "del", ns).Run() })
	ipRun(t, ip, "link", "add", host, "type", "veth", "peer", "name", peer)
	t.Cleanup(func() { exec.Command(ip, "link", "del", host).Run() })
	ipRun(t, ip, "link", "set", peer, "netns", ns)
	ipRun(t, ip, "addr", "add", "10.254.77.1/30", "dev", host)
	ipRun(t, ip, "link", "set", host, "up")
	ipRun(t, ip, "-n", ns, "addr", "add", "10.254.77.2/30", "dev", peer)
	ipRun(t, ip, "-n", ns, "link", "set", peer, "up")
	ipRun(t, ip, "-n", ns, "link", "set", "lo", "up")
	// A static neighbour entry: no ARP exchange holds back the first
	// datagrams.
	hostIf, err := net.InterfaceByName(host)
	if err != nil {
		t.Fatal(err)
	}
	ipRun(t, ip, "-n", ns, "neigh", "replace", "10.254.77.1", "lladdr", hostIf.HardwareAddr.String(), "dev", peer, "nud", "permanent")

	dir := t.TempDir()
	src := filepath.Join("integration", "testdata", "probes", "xdp.bpf.c")
	compileBPF(t, src, filepath.Join(dir, "xdp_veth.bpf.o"), `-DXDP_SECTION="xdp/`+host+`"`)
	compileBPF(t, src, filepath.Join(dir, "xdp_missing.bpf.o"), `-DXDP_SECTION="xdp/kenosuch0"`)
	compileBPF(t, src, filepath.Join(dir, "xdp_lo.bpf.o"), `-DXDP_SECTION="xdp/lo"`)
	writeProbeConfig(t, dir, "xdp_lo", xdpConfig("xdp_lo"))
	writeProbeConfig(t, dir, "xdp_veth", xdpConfig("xdp_veth"))
	writeProbeConfig(t, dir, "xdp_missing", xdpConfig("xdp_missing"))

	e := Start(t, "--programs=none", "--config.dir="+dir, "--config.names=xdp_veth,xdp_missing,xdp_lo")
	ms := e.Scrape()
	for _, c := range []string{"xdp_veth", "xdp_lo"} {
		if v := ms.Value("kernel_exporter_config_up", L("config", c)); v != 1 {
			t.Fatalf("config %s is not up\n%s", c, e.Logs())
		}
	}
	if v := ms.Value("kernel_exporter_config_up", L("config", "xdp_missing")); v != 0 {
		t.Errorf("config xdp_missing up, want down")
	}
	reasons := strings.Join(ms.LabelValues("kernel_exporter_config_error_info", "reason"), "\n")
	if want := `section "xdp/kenosuch0": network interface kenosuch0 not found`; !strings.Contains(reasons, want) {
		t.Errorf("xdp_missing: no reason %q in:\n%s", want, reasons)
	}
	// The veth driver runs XDP natively ("xdp"); loopback has no driver
	// XDP, so the kernel runs it in generic mode ("xdpgeneric").
	if out := ipRun(t, ip, "link", "show", "dev", "lo"); !strings.Contains(out, " xdpgeneric ") {
		t.Errorf("exporter running: lo has no generic XDP program:\n%s", out)
	}
	if out := ipRun(t, ip, "link", "show", "dev", host); !strings.Contains(out, " xdp ") || !strings.Contains(out, "prog/xdp") {
		t.Errorf("exporter running: %s has no XDP program:\n%s", host, out)
	} else {
		t.Logf("attached: %s", strings.Join(strings.Fields(out), " "))
	}

	base := ms.Value("xdp_veth_xdp_packets_total", L("kind", "udp_test"))
	if err := sendUDPFromNetns("/run/netns/"+ns, &net.UDPAddr{IP: net.IPv4(10, 254, 77, 1), Port: xdpTestPort}, n); err != nil {
		t.Fatal(err)
	}
	Eventually(t, 5*time.Second, func() bool {
		return e.Scrape().Value("xdp_veth_xdp_packets_total", L("kind", "udp_test"))-base >= n
	}, "xdp_veth: %d UDP datagrams not counted", n)
	ms = e.Scrape()
	got := ms.Value("xdp_veth_xdp_packets_total", L("kind", "udp_test")) - base
	other := ms.Value("xdp_veth_xdp_packets_total", L("kind", "other"))
	t.Logf("xdp on %s counted %v test datagrams (want %d), %v other packets", host, got, n, other)
	if got != n {
		t.Errorf("xdp on %s counted %v test datagrams, want %d", host, got, n)
	}

	// The reference's own example: xdp/lo, datagrams to 127.0.0.1.
	baseLo := ms.Value("xdp_lo_xdp_packets_total", L("kind", "udp_test"))
	c, err := net.ListenUDP("udp4", nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if _, err := c.WriteToUDP([]byte("kernel_exporter xdp test"), &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: xdpTestPort}); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	Eventually(t, 5*time.Second, func() bool {
		return e.Scrape().Value("xdp_lo_xdp_packets_total", L("kind", "udp_test"))-baseLo >= n
	}, "xdp_lo: %d UDP datagrams not counted", n)
	gotLo := e.Scrape().Value("xdp_lo_xdp_packets_total", L("kind", "udp_test")) - baseLo
	t.Logf("xdp on lo counted %v test datagrams (want %d)", gotLo, n)
	if gotLo != n {
		t.Errorf("xdp on lo counted %v test datagrams, want %d", gotLo, n)
	}

	if err := e.Stop(); err != nil {
		t.Logf("stop: %v", err)
	}
	if out := ipRun(t, ip, "link", "show", "dev", host); strings.Contains(out, "prog/xdp") {
		t.Errorf("exporter stopped: %s still has an XDP program:\n%s", host, out)
	}
	if out := ipRun(t, ip, "link", "show", "dev", "lo"); strings.Contains(out, "prog/xdp") {
		t.Errorf("exporter stopped: lo still has an XDP program:\n%s", out)
	}
}
