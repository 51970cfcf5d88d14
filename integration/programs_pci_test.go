// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/decoder"
	"github.com/kernel-exporter/kernel_exporter/internal/testenv"
)

// pciTestAdvice is the fadvise64 advice pci_ids.bpf.c counts.
const pciTestAdvice = 0x7e57

// pciDevice is one PCI function: its ids, and the four labels the pci_*
// decoders give it.
type pciDevice struct {
	vendor, device, class uint32 // class: 24 bits, class << 16 | subclass << 8 | prog-if
	labels                map[string]string
}

func pciLabels(vendor, device, class, subclass string) map[string]string {
	return L("pci_vendor", vendor, "pci_device", device, "pci_class", class, "pci_subclass", subclass)
}

// TestPCIDecoders runs testdata/compat/pci_ids (a config in
// cloudflare/ebpf_exporter's format with the four pci_* decoders) against
// the system's pci.ids database: the test passes PCI ids to the program in
// fadvise64() calls, a different number of calls per device, and checks
// that each device's series moved by exactly that number under the label
// texts the reference prints: names of known ids (this VM's own virtio
// devices among them), "unknown pci device: 0x80860d57" for this VM's
// host bridge, which the database does not list, and the unknown forms of
// made-up ids. With --compat.ebpf-exporter a vendor below 0x1000 (Compaq,
// 0x0e11) is unknown as in the reference; without, it is named.
func TestPCIDecoders(t *testing.T) {
	found := false
	for _, p := range decoder.PCIIDsPaths {
		if _, err := os.Stat(p); err == nil {
			found = true
		}
	}
	if !found {
		testenv.SkipOrFail(t, "no pci.ids database in %v (apt-get install pci.ids)", decoder.PCIIDsPaths)
	}
	dir := t.TempDir()
	compileBPF(t, filepath.Join("integration", "testdata", "compat", "pci_ids.bpf.c"), filepath.Join(dir, "pci_ids.bpf.o"))
	y, err := os.ReadFile(filepath.Join(repoRoot, "integration", "testdata", "compat", "pci_ids.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pci_ids.yaml"), y, 0o644); err != nil {
		t.Fatal(err)
	}
	devices := []pciDevice{
		{0x8086, 0x1000, 0x020000, pciLabels("Intel Corporation", "82542 Gigabit Ethernet Controller (Fiber)", "Network controller", "Ethernet controller")},
		{0x8086, 0x0d57, 0x060000, pciLabels("Intel Corporation", "unknown pci device: 0x80860d57", "Bridge", "Host bridge")},
		{0x1af4, 0x1042, 0x018000, pciLabels("Red Hat, Inc.", "Virtio 1.0 block device", "Mass storage controller", "Mass storage controller")},
		{0x1af4, 0x1045, 0xffff00, pciLabels("Red Hat, Inc.", "Virtio 1.0 memory balloon", "Unassigned class", "unknown pci subclass: 0xff (class 0xff)")},
		{0xbeef, 0xcafe, 0xfd0b00, pciLabels("unknown pci vendor: 0xbeef", "unknown pci device: 0xbeefcafe", "unknown pci class: 0xfd", "unknown pci class: 0xfd")},
		{0x0001, 0x0002, 0x010b00, pciLabels("SafeNet (wrong ID)", "unknown pci device: 0x10002", "Mass storage controller", "unknown pci subclass: 0x0b (class 0x01)")},
	}
	compaq := pciDevice{0x0e11, 0x0046, 0x010400, nil}
	for _, tc := range []struct {
		name    string
		flags   []string
		compaq  map[string]string
		safeNet string
	}{
		{"default", nil, pciLabels("Compaq Computer Corporation", "Smart Array 64xx", "Mass storage controller", "RAID bus controller"), "SafeNet (wrong ID)"},
		{"compat", []string{"--compat.ebpf-exporter"}, pciLabels("unknown pci vendor: 0xe11", "unknown pci device: 0xe110046", "Mass storage controller", "RAID bus controller"), "unknown pci vendor: 0x01"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			metric := "kernel_pci_test_calls_total"
			if tc.name == "compat" {
				metric = "ebpf_exporter_pci_test_calls_total"
			}
			args := append([]string{"--programs=none", "--config.dir=" + dir, "--config.names=pci_ids"}, tc.flags...)
			e := Start(t, args...)
			before := e.Scrape()
			if v := before.Value("kernel_exporter_config_up", L("config", "pci_ids")); v != 1 {
				t.Fatalf("config_up{config=pci_ids} = %v, want 1: %s\n%s", v, errorReason(before, "pci_ids"), e.Logs())
			}
			all := append(append([]pciDevice{}, devices...), pciDevice{compaq.vendor, compaq.device, compaq.class, tc.compaq})
			all[5].labels = pciLabels(tc.safeNet, "unknown pci device: 0x10002", "Mass storage controller", "unknown pci subclass: 0x0b (class 0x01)")
			for i, d := range all {
				for range i + 1 {
					// EINVAL (the advice), after the tracepoint fired.
					_ = unix.Fadvise(-1, int64(d.vendor<<16|d.device), int64(d.class), pciTestAdvice)
				}
			}
			var after Metrics
			Eventually(t, 5*time.Second, func() bool {
				after = e.Scrape()
				return after.Series(metric, nil) >= len(all)
			}, "%s: fewer than %d series\n%s", metric, len(all), e.Logs)
			for i, d := range all {
				if got := after.Value(metric, d.labels) - before.Value(metric, d.labels); got != float64(i+1) {
					t.Errorf("%s%v moved by %v, want %d\n%s", metric, d.labels, got, i+1, after.seriesDump(metric))
				}
			}
			if n := after.Series(metric, nil); n != len(all) {
				t.Errorf("%s: %d series, want %d\n%s", metric, n, len(all), after.seriesDump(metric))
			}
			t.Logf("%d devices, each moved by its call count (1 to %d):\n%s", len(all), len(all), after.seriesDump(metric))
		})
	}
}
