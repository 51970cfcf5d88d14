// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/internal/testenv"
)

// compatLabelsFD is the magic fd of compat_labels.bpf.c.
const compatLabelsFD = -4243

// compatInput is struct compat_input of compat_labels.bpf.c: the bytes
// the decoders of compat_bytes_total read.
type compatInput struct {
	IP4     [4]byte  // inet_ip: 127.0.0.42
	IP6     [16]byte // inet_ip: ::1
	Dname   [32]byte // dname: example.com in DNS wire format, zero padded
	Hex     [4]byte  // hex: 1f 00 00 00
	Dev     uint32   // majorminor: a dev_t, userspace encoding
	Ifindex uint32   // ifname: 1, lo
}

// compatLabelCalls makes n magic pread64 calls with code as the count
// argument and an input naming device dev, on a thread named ke_labels.
func compatLabelCalls(code, n int, dev uint32) error {
	in := &compatInput{IP4: [4]byte{127, 0, 0, 42}, Hex: [4]byte{0x1f}, Dev: dev, Ifindex: 1}
	in.IP6[15] = 1
	copy(in.Dname[:], "\x07example\x03com\x00")
	_, err := runNamedThread("ke_labels", func() error {
		for range n {
			if err := magicPread(compatLabelsFD, unsafe.Pointer(in), uint64(code), 0); err != nil {
				return err
			}
		}
		return nil
	})
	return err
}

// compatLabelsChild is the child mode compatlabels (see childMain): arg
// "code:n:dev" for compatLabelCalls.
func compatLabelsChild(arg string) error {
	f := strings.Split(arg, ":")
	if len(f) != 3 {
		return fmt.Errorf("compatlabels: bad argument %q", arg)
	}
	code, err1 := strconv.Atoi(f[0])
	n, err2 := strconv.Atoi(f[1])
	dev, err3 := strconv.ParseUint(f[2], 10, 32)
	if err1 != nil || err2 != nil || err3 != nil {
		return fmt.Errorf("compatlabels: bad argument %q", arg)
	}
	return compatLabelCalls(code, n, uint32(dev))
}

// firstPartition returns the first device of /proc/partitions, the table
// the reference's majorminor decoder reads.
func firstPartition(t *testing.T) (dev uint32, name string) {
	t.Helper()
	f, err := os.Open("/proc/partitions")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) != 4 {
			continue
		}
		major, err1 := strconv.ParseUint(fs[0], 10, 32)
		minor, err2 := strconv.ParseUint(fs[1], 10, 32)
		if err1 == nil && err2 == nil {
			return uint32(unix.Mkdev(uint32(major), uint32(minor))), fs[3]
		}
	}
	t.Fatal("no device in /proc/partitions")
	return 0, ""
}

// TestCompatLabels runs testdata/compat/compat_labels (raw_tp/ and
// tp_btf/ programs; the decoders string, regexp, static_map with
// allow_unknown, syscall, errno, inet_ip, dname, hex, majorminor, ifname,
// ksym with kaddrs, cgroup, kstack; padding; a cgroup_id_map of type
// hash) under --compat.ebpf-exporter. This process makes 6 magic pread64
// calls (codes 1, 1, 1, 2, 2, 9) naming the first device of
// /proc/partitions; a child in a new cgroup, which the config's
// cgroup_id_map regexp matches, makes 4 (code 1) naming device 4000:77,
// which does not exist. It checks every series as the reference prints
// it: the reference's syscall name "pread", its dname text with one dot
// per padding byte, hex bytes, "unknown:4000:77", the first capture
// group of the regexp, the full cgroup path under the cgroup2 mount
// counted only for the child, and kernel stacks innermost frame first,
// one per line.
func TestCompatLabels(t *testing.T) {
	_, _, v2, ok := cgroupMounts(t)
	if !ok {
		t.Fatal("no cgroup2 file system in /proc/self/mountinfo: cgroup_id_map needs one")
	}
	if v2.root != "/" {
		testenv.SkipLacking(t, "a cgroup2 mount of the hierarchy's root", "cgroup2 is mounted from %s: the reference's full paths are not defined there", v2.root)
	}
	cg := newMemCgroup(t, 1<<30) // made before start: the first walk finds it
	cgPath := filepath.Join(v2.dir, cg.V2Path)
	e := startCompat(t, "compat_labels")

	dev, devName := firstPartition(t)
	if err := compatLabelCalls(1, 3, dev); err != nil {
		t.Fatal(err)
	}
	if err := compatLabelCalls(2, 2, dev); err != nil {
		t.Fatal(err)
	}
	if err := compatLabelCalls(9, 1, dev); err != nil {
		t.Fatal(err)
	}
	if out, err := runChild(t, "compatlabels", fmt.Sprintf("1:4:%d", unix.Mkdev(4000, 77)), cg.Procs); err != nil {
		t.Fatalf("child in %s: %v\n%s", cgPath, err, out)
	}

	var ms Metrics
	Eventually(t, 5*time.Second, func() bool {
		ms = e.Scrape()
		return ms.Value("ebpf_exporter_compat_calls_total", nil) >= 10 && ms.Value("ebpf_exporter_compat_kstack_total", nil) >= 10
	}, "ebpf_exporter_compat_calls_total did not count 10 calls:\n%s", e.Scrape().seriesDump("ebpf_exporter_compat_calls_total"))

	checkCounters(t, ms, "ebpf_exporter_compat_calls_total", map[string]float64{
		`code="one",comm="ke_labels",errno="EBADF",syscall="pread"`: 7,
		`code="two",comm="ke_labels",errno="EBADF",syscall="pread"`: 2,
		`code="9",comm="ke_labels",errno="EBADF",syscall="pread"`:   1, // allow_unknown: the value as it is
	})
	bytes := `comm="labels",device=%q,function="do_syscall_64",interface="lo",ip4="127.0.0.42",ip6="::1",name="example.com` +
		strings.Repeat(".", 20) + `",raw="1f000000"`
	checkCounters(t, ms, "ebpf_exporter_compat_bytes_total", map[string]float64{
		fmt.Sprintf(bytes, devName):           6,
		fmt.Sprintf(bytes, "unknown:4000:77"): 4,
	})
	checkCounters(t, ms, "ebpf_exporter_compat_cgroup_calls_total", map[string]float64{
		fmt.Sprintf("cgroup=%q", cgPath): 4,
	})
	stacks := 0.0
	for _, m := range ms["ebpf_exporter_compat_kstack_total"].GetMetric() {
		stacks += m.GetCounter().GetValue()
		s := m.GetLabel()[0].GetValue()
		frames := strings.Split(s, "\n")
		i, j := slices.Index(frames, "do_syscall_64"), slices.Index(frames, "entry_SYSCALL_64_after_hwframe")
		if i < 1 || j != len(frames)-1 || j < i {
			t.Errorf("kstack %q: want frames one per line, innermost first: ... do_syscall_64, entry_SYSCALL_64_after_hwframe", s)
		}
	}
	if stacks != 10 {
		t.Errorf("ebpf_exporter_compat_kstack_total: %v calls in all, want 10", stacks)
	}
	t.Logf("10 calls: decoders, padding, kaddrs and cgroup_id_map as the reference prints them (device %s, cgroup %s)", devName, cgPath)
}
