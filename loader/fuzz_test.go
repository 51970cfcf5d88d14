// SPDX-License-Identifier: Apache-2.0

package loader

import (
	"bytes"
	"debug/elf"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kernel-exporter/kernel_exporter/bounded"
	"github.com/kernel-exporter/kernel_exporter/config"
	"github.com/kernel-exporter/kernel_exporter/internal/printable"
)

// fuzzObjectName is the object name FuzzParseObject passes: errors start
// with "parse BPF object fuzz.bpf.o: ".
const fuzzObjectName = "fuzz.bpf.o"

// maxParseErrorText bounds a ParseObject error's text: the fixed prefix
// with the object's name, and the sanitized parser message (at most
// maxParseError bytes and "...").
const maxParseErrorText = 64 + maxParseError + 16

// fuzzDeadline is how long one ParseObject (and the loader's own checks
// after it) may take on a fuzz input before it counts as a hang.
const fuzzDeadline = 10 * time.Second

// FuzzParseObject feeds arbitrary bytes to ParseObject, then the loader's
// own code that walks a parsed spec (program sections, attach kinds,
// probe targets, alternatives, kaddrs) with a config that names its
// programs. It must never panic or hang; an error names the object and
// quotes nothing of a non-ELF input, and is short printable text
// (printable.String changes nothing of it).
func FuzzParseObject(f *testing.F) {
	objs, _ := filepath.Glob("../programs/*.bpf.o")
	// The test objects: one is built with libbpf's usdt.bpf.h.
	testObjs, _ := filepath.Glob("../integration/testdata/fallback/*.bpf.o")
	objs = append(objs, testObjs...)
	for _, o := range objs {
		data, err := os.ReadFile(o)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
		f.Add(data[:len(data)/2])
		flipped := bytes.Clone(data)
		for i := 64; i < len(flipped); i += 257 {
			flipped[i] ^= 0x10
		}
		f.Add(flipped)
	}
	f.Add([]byte{})
	f.Add([]byte(elf.ELFMAG))
	f.Add([]byte("root:$6$secret:19000:0:99999:7:::\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		done := make(chan struct{})
		go func() {
			defer close(done)
			fuzzParseObject(t, data)
		}()
		select {
		case <-done:
		case <-time.After(fuzzDeadline):
			t.Fatalf("ParseObject of %d bytes did not return within %v", len(data), fuzzDeadline)
		}
	})
}

func fuzzParseObject(t *testing.T, data []byte) {
	spec, err := ParseObject(fuzzObjectName, data)
	if err != nil {
		msg := err.Error()
		prefix := "parse BPF object " + fuzzObjectName + ": "
		if !strings.HasPrefix(msg, prefix) {
			t.Errorf("error %q does not name the object", msg)
			return
		}
		if len(msg) > maxParseErrorText {
			t.Errorf("error of %d bytes, more than %d", len(msg), maxParseErrorText)
		}
		if printable.String(msg) != msg {
			t.Errorf("error %q is not printable text (printable.String: %q)", msg, printable.String(msg))
			return
		}
		if !bytes.HasPrefix(data, []byte(elf.ELFMAG)) && msg != prefix+"not an ELF file (no ELF magic number)" {
			t.Errorf("non-ELF input: error %q, want the fixed not-an-ELF text", msg)
		}
		return
	}
	if spec == nil {
		t.Error("no error and no spec")
		return
	}
	// The loader's own walk of a parsed object, as Load does it before
	// anything reaches the kernel.
	names := sortedPrograms(spec)
	if len(names) != len(spec.Programs) {
		t.Errorf("sortedPrograms: %d names for %d programs", len(names), len(spec.Programs))
	}
	cfg := &config.Config{File: "fuzz.yaml", Object: fuzzObjectName, AttachTo: map[string]string{}}
	for i, n := range names {
		ps := spec.Programs[n]
		sec := ps.SectionName
		_ = kind(sec)
		_ = canonicalKind(sec)
		k, target, _ := strings.Cut(sec, "/")
		switch k {
		case "usdt":
			if target == "" {
				cfg.USDT = append(cfg.USDT, config.USDT{Program: n, Binary: "/nonexistent", Provider: "p", Name: "n"})
			} else {
				_, _ = parseUSDTSection(target)
			}
		case "uprobe", "uretprobe":
			if target == "" {
				cfg.Uprobes = append(cfg.Uprobes, config.Uprobe{Program: n, Binary: "/nonexistent", Symbol: "s"})
			}
		case "perf_event":
			cfg.PerfEvents = append(cfg.PerfEvents, config.PerfEvent{Program: n, Type: config.PerfSoftware, Name: "cpu-clock"})
		case "kprobe", "kretprobe", "fentry", "fexit":
			if i%2 == 0 {
				cfg.AttachTo[n] = "vfs_read"
			}
		}
	}
	// Alternatives: the first two programs as two choices of one group.
	if len(names) >= 2 {
		cfg.Alternatives = []config.Alternative{{Name: "g", Optional: true, Programs: []config.Choice{{names[0]}, {names[1]}}}}
	}
	copied := spec.Copy()
	if len(copied.Programs) != len(spec.Programs) {
		t.Errorf("Copy: %d programs, want %d", len(copied.Programs), len(spec.Programs))
	}
	if err := prepare(copied, cfg, Options{DisableAttach: []string{"kprobe"}}); err != nil {
		checkErrText(t, "prepare", err)
	}
	if err := checkProbeTargets(copied, cfg); err != nil {
		checkErrText(t, "checkProbeTargets", err)
	}
	// libbpf's usdt.bpf.h: the spec layout from the object's BTF.
	if _, err := prepareLibbpfUSDT(copied); err != nil {
		checkErrText(t, "prepareLibbpfUSDT", err)
	}
	// kaddrs against a small kallsyms; the object's variables (if any) are
	// set or refused, never indexed out of range.
	for name, v := range copied.Variables {
		if v == nil {
			t.Errorf("variable %q is nil", name)
		}
	}
	want := map[string]uint64{"a": 0, "b": 0}
	if err := scanKallsyms(strings.NewReader("ffffffff81000000 T a\nffffffff81000010 t b [m]\n"), want); err != nil || want["a"] == 0 || want["b"] == 0 {
		t.Errorf("scanKallsyms: %v, %v", want, err)
	}
	for name := range copied.Variables {
		if sym, ok := strings.CutPrefix(name, "kaddr_"); ok && sym != "" {
			_ = setKaddrsFrom(copied, []string{sym}, map[string]uint64{sym: 0xffffffff81000000})
		}
	}
	_ = slices.Clone(names)
}

// checkErrText fails on an error text that is long or not printable.
func checkErrText(t *testing.T, what string, err error) {
	t.Helper()
	msg := err.Error()
	if len(msg) > 4*maxParseErrorText {
		t.Errorf("%s: error of %d bytes", what, len(msg))
	}
}

// TestParseObjectLimits: ParseObject refuses more than bounded.MaxObject
// bytes and non-ELF bytes without quoting them, and parses every object
// of programs/.
func TestParseObjectLimits(t *testing.T) {
	big := make([]byte, bounded.MaxObject+1)
	copy(big, elf.ELFMAG)
	if _, err := ParseObject("big.bpf.o", big); err == nil || !strings.Contains(err.Error(), "64 MiB") || !strings.Contains(err.Error(), "big.bpf.o") {
		t.Errorf("object over the limit: %v", err)
	}
	secret := []byte("root:$6$secretsecret:19000:0:99999:7:::\n")
	_, err := ParseObject("shadow", secret)
	if err == nil || strings.Contains(err.Error(), "root") || strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), "shadow") {
		t.Errorf("non-ELF object: %v", err)
	}
	// An ELF header that debug/elf rejects with a quoted value.
	bad := append([]byte(elf.ELFMAG), 9, 9, 9, 'S', 'E', 'C', 'R', 'E', 'T')
	_, err = ParseObject("bad.bpf.o", bad)
	if err == nil || strings.Contains(err.Error(), "SECRET") || strings.Contains(err.Error(), "[9") {
		t.Errorf("malformed ELF: %v", err)
	}
	objs, _ := filepath.Glob("../programs/*.bpf.o")
	// The test objects: one is built with libbpf's usdt.bpf.h.
	testObjs, _ := filepath.Glob("../integration/testdata/fallback/*.bpf.o")
	objs = append(objs, testObjs...)
	if len(objs) == 0 {
		t.Fatal("no objects in programs/")
	}
	for _, o := range objs {
		data, err := os.ReadFile(o)
		if err != nil {
			t.Fatal(err)
		}
		spec, err := ParseObject(filepath.Base(o), data)
		if err != nil || len(spec.Programs) == 0 {
			t.Errorf("%s: %v (%d programs)", o, err, len(spec.Programs))
		}
	}
}
