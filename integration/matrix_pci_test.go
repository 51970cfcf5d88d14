// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/config"
	"github.com/kernel-exporter/kernel_exporter/decoder"
)

// pciSysfsDevice is a PCI function under /sys/bus/pci/devices.
type pciSysfsDevice struct {
	dir                   string
	vendor, device, class uint64
}

// pciSysfsDevices lists the PCI functions of this machine, in name order.
func pciSysfsDevices(t *testing.T) []pciSysfsDevice {
	t.Helper()
	dirs, _ := filepath.Glob("/sys/bus/pci/devices/*")
	sort.Strings(dirs)
	var out []pciSysfsDevice
	for _, d := range dirs {
		var v [3]uint64
		for i, f := range []string{"vendor", "device", "class"} {
			b, err := os.ReadFile(filepath.Join(d, f))
			if err != nil {
				t.Fatal(err)
			}
			if v[i], err = strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(string(b)), "0x"), 16, 32); err != nil {
				t.Fatalf("%s/%s: %v", d, f, err)
			}
		}
		out = append(out, pciSysfsDevice{d, v[0], v[1], v[2]})
	}
	return out
}

// pciWantLabels decodes a device's ids as the config's chains do
// ([uint, pci_*] on the key's fields), with the same database.
func pciWantLabels(t *testing.T, env *decoder.Env, d pciSysfsDevice) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, c := range []struct {
		label string
		v     uint64
	}{
		{"pci_vendor", d.vendor},
		{"pci_device", d.vendor<<16 | d.device},
		{"pci_class", d.class >> 16},
		{"pci_subclass", d.class >> 8},
	} {
		dec, err := env.New(config.Decoder{Name: c.label}, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		s, err := dec.Decode([]byte(strconv.FormatUint(c.v, 10)))
		if err != nil {
			t.Fatal(err)
		}
		out[c.label] = string(s)
	}
	return out
}

// TestMatrixPCIConfigReads runs testdata/fallback/pci_config (kprobes on
// pci_user_read_config_byte/_word/_dword, as cloudflare/ebpf_exporter's
// pci example, with the four pci_* decoders) and reads the configuration
// space of every PCI function of the machine through its sysfs config
// file: for the i-th function (from 1), i rounds of a 1-byte, a 2-byte
// and a 4-byte read at offset 0, each one call of the byte, word and dword
// helper. Each function's series must move by 3i (exactly in the quiet
// matrix VM), labelled with the names the decoders give its ids; QEMU's
// i440FX host bridge (8086:1237) must read "Intel Corporation", "440FX -
// 82441FX PMC [Natoma]", "Bridge", "Host bridge" (the guest's initramfs
// carries the host's pci.ids). Without kprobes (this CI host) it skips.
func TestMatrixPCIConfigReads(t *testing.T) {
	const (
		name   = "pci_config"
		metric = "kernel_pci_config_reads_total"
	)
	r := matrixReport(t, "pci_* decoders (test)", "kprobe")
	if !kernelCaps(t).kprobes {
		r.result = "unsupported: no kprobes"
		t.Skip("kprobes not supported by this kernel: pci_user_read_config_* cannot be probed")
	}
	devs := pciSysfsDevices(t)
	if len(devs) == 0 {
		r.result = "unsupported: no PCI devices"
		t.Skip("no PCI devices under /sys/bus/pci/devices")
	}
	dir := t.TempDir()
	writeMatrixObject(t, dir, name, "", "")
	e := Start(t, "--programs=none", "--config.dir="+dir, "--config.names="+name)
	before := e.Scrape()
	if v := before.Value("kernel_exporter_config_up", L("config", name)); v != 1 {
		t.Fatalf("config_up{config=%s} = %v, want 1: %s\n%s", name, v, errorReason(before, name), e.Logs())
	}
	r.attach = "kprobe (3 programs)"
	env := decoder.NewEnv(16)
	type series struct {
		labels map[string]string
		want   float64
	}
	want := map[string]*series{}
	buf := make([]byte, 4)
	for i, d := range devs {
		l := pciWantLabels(t, env, d)
		k := fmt.Sprint(l)
		if want[k] == nil {
			want[k] = &series{labels: l}
		}
		want[k].want += float64(3 * (i + 1))
		if d.vendor == 0x8086 && d.device == 0x1237 {
			if w := pciLabels("Intel Corporation", "440FX - 82441FX PMC [Natoma]", "Bridge", "Host bridge"); fmt.Sprint(w) != k {
				t.Errorf("i440FX host bridge %s: labels %v, want %v", d.dir, l, w)
			}
		}
		fd, err := unix.Open(filepath.Join(d.dir, "config"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		for range i + 1 {
			for _, size := range []int{1, 2, 4} {
				if n, err := unix.Pread(fd, buf[:size], 0); n != size || err != nil {
					t.Fatalf("pread %d bytes of %s/config: %d, %v", size, d.dir, n, err)
				}
			}
		}
		unix.Close(fd)
	}
	var total float64
	for _, s := range want {
		total += s.want
	}
	waitValue(t, e, total, func(ms Metrics) float64 {
		var sum float64
		for _, s := range want {
			sum += ms.Value(metric, s.labels) - before.Value(metric, s.labels)
		}
		return sum
	})
	ms := e.Scrape()
	for _, s := range want {
		checkCalls(t, fmt.Sprintf("%s%v", metric, s.labels), ms.Value(metric, s.labels)-before.Value(metric, s.labels), s.want)
	}
	t.Logf("%d PCI functions, %d label sets:\n%s", len(devs), len(want), ms.seriesDump(metric))
	r.result = fmt.Sprintf("moved: %d functions, %v config reads counted by device labels", len(devs), total)
}
