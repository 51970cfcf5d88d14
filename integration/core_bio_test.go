package integration

import (
	"testing"
	"time"
)

// TestBioLatencyDirectIO writes then reads 32 MiB with O_DIRECT, 512 blocks
// of 64 KiB, and checks that the biolatency histogram of the file's disk
// counted at least one request per write and per read syscall, with a
// plausible mean latency.
func TestBioLatencyDirectIO(t *testing.T) {
	const (
		blocks = 512
		block  = 64 << 10
		metric = "kernel_bio_latency_seconds"
	)
	dir := ioTempDir(t)
	disk, err := diskOf(dir)
	if err != nil {
		t.Fatal(err)
	}
	e := Start(t, "--programs=biolatency")
	before := e.Scrape()
	r0, w0 := diskStat(disk)
	writes, reads := directIO(t, dir, blocks, block)
	r1, w1 := diskStat(disk)
	kernel := map[string]uint64{"read": r1 - r0, "write": w1 - w0}

	for _, c := range []struct {
		op       string
		syscalls int
	}{{"write", writes}, {"read", reads}} {
		labels := L("device", disk, "operation", c.op)
		c0, s0, _ := before.Hist(metric, labels, 0)
		var dc uint64
		var ds float64
		Eventually(t, 5*time.Second, func() bool {
			c1, s1, _ := e.Scrape().Hist(metric, labels, 0)
			dc, ds = c1-c0, s1-s0
			return dc >= uint64(c.syscalls)
		}, "%s{device=%q,operation=%q}: count moved by %d after %d O_DIRECT %s syscalls, want >= %d "+
			"(/sys/block/%s/stat: %d %ss completed meanwhile)\ndevices: %v, operations: %v\n%s",
			metric, disk, c.op, dc, c.syscalls, c.op, c.syscalls, disk, kernel[c.op], c.op,
			e.Scrape().LabelValues(metric, "device"), e.Scrape().LabelValues(metric, "operation"), e.Logs())
		if ds <= 0 {
			t.Errorf("%s: _sum moved by %v, want > 0", c.op, ds)
			continue
		}
		mean := ds / float64(dc)
		if mean < 1e-6 || mean > 1 {
			t.Errorf("%s: mean latency %v s (sum %v / count %d), want within [1µs, 1s]", c.op, mean, ds, dc)
		}
		t.Logf("device %s %s: %d syscalls, count +%d (kernel stat: +%d), sum +%.6f s, mean %.1f µs", disk, c.op, c.syscalls, dc, kernel[c.op], ds, mean*1e6)
	}
}
