// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"golang.org/x/sys/unix"
)

// ioTempDir returns a fresh directory (removed at cleanup) on a file system
// backed by a block device, so that O_DIRECT I/O in it reaches a disk that
// the block tracepoints see. It tries os.TempDir first and falls back to the
// repository checkout when the former is tmpfs or has no block device.
func ioTempDir(t testing.TB) string {
	t.Helper()
	for _, parent := range []string{"", repoRoot} {
		dir, err := os.MkdirTemp(parent, "kernel_exporter-io-")
		if err != nil {
			t.Fatalf("create I/O temp dir: %v", err)
		}
		var fs unix.Statfs_t
		if err := unix.Statfs(dir, &fs); err != nil {
			os.RemoveAll(dir)
			t.Fatalf("statfs %s: %v", dir, err)
		}
		if fs.Type != unix.TMPFS_MAGIC && fs.Type != unix.RAMFS_MAGIC {
			if _, err := diskOf(dir); err == nil {
				t.Cleanup(func() { os.RemoveAll(dir) })
				return dir
			}
		}
		os.RemoveAll(dir)
	}
	t.Fatalf("neither %s nor %s is on a block device: O_DIRECT tests need a disk", os.TempDir(), repoRoot)
	return ""
}

// diskOf returns the name of the whole disk ("vda", "nvme0n1") that holds
// path: the device of the file system, with a partition replaced by its
// parent disk, and a stacked device with a single member (dm, md) replaced
// by that member, since block requests are issued on the bottom disk.
func diskOf(path string) (string, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return "", fmt.Errorf("stat %s: %w", path, err)
	}
	sys, err := filepath.EvalSymlinks(fmt.Sprintf("/sys/dev/block/%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev)))
	if err != nil {
		return "", fmt.Errorf("device %d:%d of %s is not a block device: %w", unix.Major(st.Dev), unix.Minor(st.Dev), path, err)
	}
	for range 8 {
		if _, err := os.Stat(filepath.Join(sys, "partition")); err == nil {
			sys = filepath.Dir(sys)
		}
		slaves, _ := os.ReadDir(filepath.Join(sys, "slaves"))
		if len(slaves) != 1 {
			break
		}
		next, err := filepath.EvalSymlinks(filepath.Join(sys, "slaves", slaves[0].Name()))
		if err != nil {
			break
		}
		sys = next
	}
	return filepath.Base(sys), nil
}

// directIO writes then reads back an n × size-byte file in dir with
// O_DIRECT, one pwrite/pread per size-byte block, from a page-aligned
// anonymous mapping. It returns the number of write and read syscalls
// issued; each is synchronous, so each becomes at least one block request.
func directIO(t *testing.T, dir string, n, size int) (writes, reads int) {
	t.Helper()
	writes, reads, err := runDirectIO(dir, n, size)
	if err != nil {
		t.Fatal(err)
	}
	return writes, reads
}

// runDirectIO is directIO returning its error, for use off the test's
// goroutine.
func runDirectIO(dir string, n, size int) (writes, reads int, err error) {
	buf, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return 0, 0, fmt.Errorf("mmap I/O buffer: %w", err)
	}
	defer unix.Munmap(buf)
	for i := range buf {
		buf[i] = byte(i*7 + 1)
	}
	f, err := os.CreateTemp(dir, "odirect-")
	if err != nil {
		return 0, 0, fmt.Errorf("create I/O file: %w", err)
	}
	name := f.Name()
	f.Close()
	defer os.Remove(name)
	fd, err := unix.Open(name, unix.O_RDWR|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, 0, fmt.Errorf("open %s with O_DIRECT: %w", name, err)
	}
	defer unix.Close(fd)
	// Allocate up front so the direct writes never need to extend the file.
	if err := unix.Fallocate(fd, 0, 0, int64(n*size)); err != nil {
		return 0, 0, fmt.Errorf("fallocate %s: %w", name, err)
	}
	for i := range n {
		w, err := unix.Pwrite(fd, buf, int64(i*size))
		if err != nil || w != size {
			return writes, reads, fmt.Errorf("O_DIRECT pwrite #%d of %s: %d bytes, %v", i, name, w, err)
		}
		writes++
	}
	if err := unix.Fdatasync(fd); err != nil {
		return writes, reads, fmt.Errorf("fdatasync %s: %w", name, err)
	}
	for i := range n {
		r, err := unix.Pread(fd, buf, int64(i*size))
		if err != nil || r != size {
			return writes, reads, fmt.Errorf("O_DIRECT pread #%d of %s: %d bytes, %v", i, name, r, err)
		}
		reads++
	}
	return writes, reads, nil
}

// diskStat returns the requests completed so far on disk, from
// /sys/block/<disk>/stat: reads (field 1) and writes (field 5). It is the
// kernel's own accounting, printed next to ours when a test fails.
func diskStat(disk string) (reads, writes uint64) {
	b, err := os.ReadFile(filepath.Join("/sys/block", disk, "stat"))
	if err != nil {
		return 0, 0
	}
	f := strings.Fields(string(b))
	if len(f) >= 5 {
		fmt.Sscan(f[0], &reads)
		fmt.Sscan(f[4], &writes)
	}
	return reads, writes
}

// histAbove returns, summed over the series of name whose labels include
// want, the observation count and how many observations lie above the
// bucket bound closest to bound (count minus that bucket's cumulative
// count), and that bound.
func (ms Metrics) histAbove(name string, want map[string]string, bound float64) (count, above uint64, le float64) {
	le = math.NaN()
	mf, ok := ms[name]
	if !ok {
		return 0, 0, le
	}
	for _, m := range mf.GetMetric() {
		if !matches(m, want) {
			continue
		}
		h := m.GetHistogram()
		var best *dto.Bucket
		for _, b := range h.GetBucket() {
			if best == nil || math.Abs(math.Log(b.GetUpperBound()/bound)) < math.Abs(math.Log(best.GetUpperBound()/bound)) {
				best = b
			}
		}
		count += h.GetSampleCount()
		if best != nil {
			above += h.GetSampleCount() - best.GetCumulativeCount()
			le = best.GetUpperBound()
		}
	}
	return count, above, le
}

// landingRow returns the table row of config name on the landing page, or
// "" when the page has none.
func landingRow(page, name string) string {
	for _, row := range strings.Split(page, "<tr>") {
		if strings.HasPrefix(strings.TrimSpace(row), "<td>"+name+"</td>") {
			return row
		}
	}
	return ""
}
