// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/kernel-exporter/kernel_exporter/bounded"
)

// Limits of the kernel files the sources read (docs/security.md).
const (
	// maxProcStat bounds /proc/stat, whose intr line has a count per
	// interrupt number (about 100 KiB on a large machine).
	maxProcStat = 4 << 20
	// maxSoftirqs bounds /proc/softirqs: 10 lines of a column per CPU
	// (about 120 KiB with 1024 CPUs).
	maxSoftirqs = 1 << 20
	// maxSchedstat bounds /proc/schedstat: a line per CPU and per
	// scheduling domain of each CPU.
	maxSchedstat = 16 << 20
	// maxVmstat bounds /proc/vmstat (about 8 KiB).
	maxVmstat = 256 << 10
	// maxSNMP bounds /proc/net/snmp (about 2 KiB).
	maxSNMP = 64 << 10
	// maxDisks bounds the whole disks summed by the block sources.
	maxDisks = 4096
)

// softirqVectors are /proc/softirqs' row names, in vector order (the
// kernel's softirq_to_name), and the sources that read one each.
var softirqVectors = []struct{ row, source string }{
	{"HI", "softirqs_hi"}, {"TIMER", "softirqs_timer"}, {"NET_TX", "softirqs_net_tx"},
	{"NET_RX", "softirqs_net_rx"}, {"BLOCK", "softirqs_block"}, {"IRQ_POLL", "softirqs_irq_poll"},
	{"TASKLET", "softirqs_tasklet"}, {"SCHED", "softirqs_sched"}, {"HRTIMER", "softirqs_hrtimer"},
	{"RCU", "softirqs_rcu"},
}

// diskField is the /sys/block/<disk>/stat field (0-based) of each block
// source (Documentation/block/stat.rst).
var diskField = map[string]int{"block_reads": 0, "block_writes": 4, "block_discards": 11, "block_flushes": 15}

// UnavailableError is the error of a kernel counter this kernel does not
// keep: its file is absent (/proc/schedstat without CONFIG_SCHEDSTATS),
// or the file lacks the counter's line or field, or has a format version
// we do not read. The audit shows such a pair as not available, with
// Reason, and counts no error: the kernel cannot give it, on every
// interval alike. Every other error (a file that exists but cannot be
// read, a malformed line) is a read error.
type UnavailableError struct {
	// Reason says what is missing, e.g. "/proc/schedstat is absent
	// (CONFIG_SCHEDSTATS off)"; it never quotes a file's content.
	Reason string
}

func (e *UnavailableError) Error() string { return "not available on this kernel: " + e.Reason }

// absentHint says which kernel option provides a file, for Reason.
var absentHint = map[string]string{
	"/proc/schedstat": " (CONFIG_SCHEDSTATS off)",
	"/proc/net/snmp":  " (no CONFIG_NET or CONFIG_PROC_FS)",
	"/proc/softirqs":  " (no CONFIG_PROC_FS)",
	"/proc/vmstat":    " (no CONFIG_PROC_FS)",
	"/proc/stat":      " (no CONFIG_PROC_FS)",
	"/sys/block":      " (sysfs not mounted, or no CONFIG_BLOCK)",
}

// absent turns err into an UnavailableError when it says path does not
// exist.
func absent(path string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return &UnavailableError{Reason: path + " is absent" + absentHint[path]}
	}
	return err
}

// errMissing marks a parser's error for a counter the file does not
// have (a line, a field, a format version): Kernel.Read turns it into an
// UnavailableError.
var errMissing = errors.New("missing")

// missing returns an error that wraps errMissing.
func missing(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errMissing}, args...)...)
}

// Kernel reads the kernel's counters for one config's interval: each file
// at most once, so that the counters of one interval come from one read.
// Root is the file system root ("/" but in tests).
type Kernel struct {
	Root     string
	softirqs map[string]uint64
	files    map[string][]byte
	disks    *[16]uint64
	errs     map[string]error
}

// NewKernel returns a Kernel reading below root.
func NewKernel(root string) *Kernel {
	return &Kernel{Root: root, files: map[string][]byte{}, errs: map[string]error{}}
}

func (k *Kernel) path(p string) string { return filepath.Join(k.Root, p) }

// file reads path (below Root) once, at most limit bytes.
func (k *Kernel) file(path string, limit int64) ([]byte, error) {
	if b, ok := k.files[path]; ok {
		return b, nil
	}
	if err, ok := k.errs[path]; ok {
		return nil, err
	}
	b, err := bounded.ReadFile(k.path(path), "kernel counter file", limit)
	if err != nil {
		err = absent(path, err)
		k.errs[path] = err
		return nil, err
	}
	k.files[path] = b
	return b, nil
}

// Read returns the value of source, one of config.AuditSources. Errors
// name the file and what is wrong with it, never its content.
func (k *Kernel) Read(source string) (uint64, error) {
	if f, ok := diskField[source]; ok {
		d, err := k.readDisks()
		if err != nil {
			return 0, err
		}
		return d[f], nil
	}
	switch source {
	case "context_switches":
		b, err := k.file("/proc/stat", maxProcStat)
		if err != nil {
			return 0, err
		}
		return fileErr("/proc/stat")(ParseProcStatCtxt(b))
	case "schedstat_switch_ins":
		b, err := k.file("/proc/schedstat", maxSchedstat)
		if err != nil {
			return 0, err
		}
		return fileErr("/proc/schedstat")(ParseSchedstatSwitchIns(b))
	case "tcp_retrans_segs":
		b, err := k.file("/proc/net/snmp", maxSNMP)
		if err != nil {
			return 0, err
		}
		return fileErr("/proc/net/snmp")(ParseSNMP(b, "Tcp", "RetransSegs"))
	case "oom_kills", "direct_reclaims":
		b, err := k.file("/proc/vmstat", maxVmstat)
		if err != nil {
			return 0, err
		}
		prefix, exact := "oom_kill", true
		if source == "direct_reclaims" {
			prefix, exact = "allocstall_", false
		}
		return fileErr("/proc/vmstat")(ParseVmstat(b, prefix, exact))
	}
	if source == "softirqs" || len(source) > 9 && source[:9] == "softirqs_" {
		if k.softirqs == nil {
			b, err := k.file("/proc/softirqs", maxSoftirqs)
			if err != nil {
				return 0, err
			}
			m, err := ParseSoftirqs(b)
			if err != nil {
				return 0, fmt.Errorf("/proc/softirqs: %w", err)
			}
			k.softirqs = m
		}
		if source == "softirqs" {
			var sum uint64
			for _, v := range k.softirqs {
				sum += v
			}
			return sum, nil
		}
		for _, v := range softirqVectors {
			if v.source == source {
				n, ok := k.softirqs[v.row]
				if !ok {
					return 0, &UnavailableError{Reason: "/proc/softirqs: no " + v.row + " row"}
				}
				return n, nil
			}
		}
	}
	return 0, fmt.Errorf("unknown kernel counter %q", source)
}

func fileErr(path string) func(uint64, error) (uint64, error) {
	return func(v uint64, err error) (uint64, error) {
		if errors.Is(err, errMissing) {
			return 0, &UnavailableError{Reason: path + ": " + strings.TrimPrefix(err.Error(), "missing: ")}
		}
		if err != nil {
			return 0, fmt.Errorf("%s: %w", path, err)
		}
		return v, nil
	}
}

// readDisks sums the stat fields of the request-based whole disks: the
// entries of /sys/block (whole disks only: partitions are not listed
// there) that have an mq directory, that is the disks whose requests go
// through blk-mq and so past the block_rq_* tracepoints. Bio-based disks
// (device mapper, md, zram, NVMe multipath heads) count their own bios,
// which end as requests of the disks below them, counted there.
func (k *Kernel) readDisks() (*[16]uint64, error) {
	if k.disks != nil {
		return k.disks, nil
	}
	dir, err := os.Open(k.path("/sys/block"))
	if err != nil {
		return nil, absent("/sys/block", err)
	}
	names, err := dir.Readdirnames(maxDisks + 1)
	dir.Close()
	if err != nil {
		return nil, fmt.Errorf("/sys/block: %w", err)
	}
	if len(names) > maxDisks {
		return nil, fmt.Errorf("/sys/block: more than %d disks", maxDisks)
	}
	var sum [16]uint64
	for _, n := range names {
		if st, err := os.Stat(k.path(filepath.Join("/sys/block", n, "mq"))); err != nil || !st.IsDir() {
			continue
		}
		p := filepath.Join("/sys/block", n, "stat")
		b, err := bounded.ReadFile(k.path(p), "disk statistics", bounded.MaxSmall)
		if errors.Is(err, os.ErrNotExist) {
			continue // removed since the listing
		}
		if err != nil {
			return nil, err
		}
		f, err := ParseDiskStat(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		for i := range sum {
			sum[i] += f[i]
		}
	}
	k.disks = &sum
	return k.disks, nil
}

// ParseDiskStat parses a /sys/block/<disk>/stat file: its first 16
// fields (Linux 5.5+: reads, merges, sectors, ticks; the same for writes;
// in flight, io ticks, time in queue; the same four for discards; flushes
// and their ticks). Errors: fewer than 16 fields, or one that is not a
// decimal number.
func ParseDiskStat(b []byte) ([16]uint64, error) {
	var out [16]uint64
	fields := bytes.Fields(b)
	if len(fields) < 16 {
		return out, fmt.Errorf("%d fields, want 16 or more (Linux 5.5+)", len(fields))
	}
	for i := range out {
		v, err := parseUint(fields[i])
		if err != nil {
			return out, fmt.Errorf("field %d: %w", i+1, err)
		}
		out[i] = v
	}
	return out, nil
}

// ParseProcStatCtxt returns the ctxt line's value of /proc/stat: the
// context switches of every CPU since boot.
func ParseProcStatCtxt(b []byte) (uint64, error) {
	for line := range bytes.Lines(b) {
		if rest, ok := bytes.CutPrefix(line, []byte("ctxt ")); ok {
			v, err := parseUint(bytes.TrimSpace(rest))
			if err != nil {
				return 0, fmt.Errorf("ctxt: %w", err)
			}
			return v, nil
		}
	}
	return 0, missing("no ctxt line")
}

// ParseSchedstatSwitchIns sums field 9 of the cpu<N> lines of
// /proc/schedstat (versions 15 to 17): the times a task other than the
// idle task was switched in on that CPU (rq->rq_sched_info.pcount,
// kernel/sched/stats.h sched_info_arrive).
func ParseSchedstatSwitchIns(b []byte) (uint64, error) {
	var sum uint64
	cpus := 0
	version := -1
	for line := range bytes.Lines(b) {
		f := bytes.Fields(line)
		if len(f) == 2 && string(f[0]) == "version" {
			v, err := parseUint(f[1])
			if err != nil {
				return 0, fmt.Errorf("version: %w", err)
			}
			if v < 15 || v > 17 {
				return 0, missing("version %d, want 15 to 17", v)
			}
			version = int(v)
			continue
		}
		if len(f) == 0 || !bytes.HasPrefix(f[0], []byte("cpu")) {
			continue
		}
		if version < 0 {
			return 0, errors.New("no version line before the first cpu line")
		}
		if len(f) < 10 {
			return 0, fmt.Errorf("cpu line with %d fields, want 10 or more", len(f))
		}
		v, err := parseUint(f[9])
		if err != nil {
			return 0, fmt.Errorf("cpu line field 9: %w", err)
		}
		sum += v
		cpus++
	}
	if cpus == 0 {
		return 0, errors.New("no cpu line")
	}
	return sum, nil
}

// ParseSoftirqs parses /proc/softirqs: a header of CPU names, then a
// line per vector ("NET_RX:" and a count per CPU). It returns each
// vector's count summed over CPUs. Errors: no header, a row without the
// colon, a count that is not a decimal number, more counts than CPUs.
func ParseSoftirqs(b []byte) (map[string]uint64, error) {
	out := map[string]uint64{}
	cpus := -1
	for line := range bytes.Lines(b) {
		f := bytes.Fields(line)
		if len(f) == 0 {
			continue
		}
		if cpus < 0 {
			cpus = len(f)
			continue
		}
		name, ok := bytes.CutSuffix(f[0], []byte(":"))
		if !ok || len(name) == 0 || len(name) > 16 {
			return nil, fmt.Errorf("row %d: no vector name", len(out)+1)
		}
		row := len(out) + 1
		if len(f)-1 > cpus {
			return nil, fmt.Errorf("row %d: %d counts for %d CPUs", row, len(f)-1, cpus)
		}
		var sum uint64
		for _, c := range f[1:] {
			v, err := parseUint(c)
			if err != nil {
				return nil, fmt.Errorf("row %d: %w", row, err)
			}
			sum += v
		}
		out[string(name)] = sum
		if len(out) > 64 {
			return nil, errors.New("more than 64 vectors")
		}
	}
	if cpus < 0 {
		return nil, errors.New("empty")
	}
	return out, nil
}

// ParseSNMP returns the field name of the proto lines of /proc/net/snmp
// (a line of names, "Tcp: RtoAlgorithm ...", then a line of values).
func ParseSNMP(b []byte, proto, name string) (uint64, error) {
	prefix := []byte(proto + ":")
	var names [][]byte
	for line := range bytes.Lines(b) {
		f := bytes.Fields(line)
		if len(f) == 0 || !bytes.Equal(f[0], prefix) {
			continue
		}
		if names == nil {
			names = f[1:]
			continue
		}
		if len(f)-1 != len(names) {
			return 0, fmt.Errorf("%s: %d names but %d values", proto, len(names), len(f)-1)
		}
		for i, n := range names {
			if string(n) == name {
				// Some fields are signed (MaxConn -1); ours are counters.
				v, err := parseUint(f[i+1])
				if err != nil {
					return 0, fmt.Errorf("%s %s: %w", proto, name, err)
				}
				return v, nil
			}
		}
		return 0, missing("%s: no field %s", proto, name)
	}
	return 0, missing("no %s lines", proto)
}

// ParseVmstat returns the value of /proc/vmstat's line name (exact), or
// the sum of the lines whose name starts with name (not exact). Errors:
// no such line, a value that is not a decimal number.
func ParseVmstat(b []byte, name string, exact bool) (uint64, error) {
	var sum uint64
	found := false
	for line := range bytes.Lines(b) {
		f := bytes.Fields(line)
		if len(f) != 2 {
			continue
		}
		if exact && string(f[0]) != name || !exact && !bytes.HasPrefix(f[0], []byte(name)) {
			continue
		}
		v, err := parseUint(f[1])
		if err != nil {
			return 0, fmt.Errorf("%s line: %w", name, err)
		}
		sum += v
		found = true
		if exact {
			break
		}
	}
	if !found {
		return 0, missing("no %s line", name)
	}
	return sum, nil
}

// parseUint parses a decimal u64; the error never quotes the input.
func parseUint(b []byte) (uint64, error) {
	if len(b) == 0 || len(b) > 20 {
		return 0, fmt.Errorf("not a decimal number (%d bytes)", len(b))
	}
	v, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("not a decimal number (%d bytes)", len(b))
	}
	return v, nil
}
