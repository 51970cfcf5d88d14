package loader

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/bounded"
	"github.com/kernel-exporter/kernel_exporter/config"
)

// probeSpec is an object with one trivial program "p" in section sec.
func probeSpec(sec string, typ ebpf.ProgramType) *ebpf.CollectionSpec {
	return &ebpf.CollectionSpec{Programs: map[string]*ebpf.ProgramSpec{
		"p": {
			Name:         "p",
			Type:         typ,
			SectionName:  sec,
			License:      "GPL",
			Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
		},
	}}
}

// loadWithin runs Load and fails the test if it does not return within d
// (the code before finding 5 blocked forever opening a FIFO target).
func loadWithin(t *testing.T, d time.Duration, spec *ebpf.CollectionSpec, cfg *config.Config) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		obj, err := Load(spec, cfg, Options{})
		if obj != nil {
			obj.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("Load did not return within %v: blocked on the target", d)
		return nil
	}
}

// unblockFIFO opens the write side of a FIFO and closes it, so that a
// reader blocked on it (in the code before the fix) gets EOF and ends.
func unblockFIFO(path string) {
	for i := 0; i < 3; i++ {
		fd, err := unix.Open(path, unix.O_RDWR|unix.O_NONBLOCK, 0)
		if err != nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
		unix.Close(fd)
	}
}

// TestHardening05TargetFIFO: a uprobe or USDT target that is a FIFO, or a
// symlink to /dev/zero, gives a prompt error naming the path instead of
// blocking start-up (or reading forever).
func TestHardening05TargetFIFO(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "target.fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unblockFIFO(fifo) })
	zero := filepath.Join(dir, "target.zero")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	for _, target := range []struct{ path, kind string }{{fifo, "a FIFO"}, {zero, "a character device"}} {
		for _, tc := range []struct {
			name string
			spec *ebpf.CollectionSpec
			cfg  *config.Config
		}{
			{"uprobes", probeSpec("uprobe", ebpf.Kprobe), &config.Config{File: "t.yaml",
				Uprobes: []config.Uprobe{{Program: "p", Binary: target.path, Symbol: "main"}}}},
			{"uretprobe-offset", probeSpec("uretprobe", ebpf.Kprobe), &config.Config{File: "t.yaml",
				Uprobes: []config.Uprobe{{Program: "p", Binary: target.path, Offset: 0x1000}}}},
			{"section", probeSpec("uprobe/"+target.path+":main", ebpf.Kprobe), &config.Config{File: "t.yaml"}},
			{"usdt", probeSpec("usdt", ebpf.Kprobe), &config.Config{File: "t.yaml",
				USDT: []config.USDT{{Program: "p", Binary: target.path, Provider: "prov", Name: "probe"}}}},
			{"usdt-section", probeSpec("usdt/"+target.path+":prov:probe", ebpf.Kprobe), &config.Config{File: "t.yaml"}},
		} {
			t.Run(filepath.Base(target.path)+"/"+tc.name, func(t *testing.T) {
				err := loadWithin(t, 5*time.Second, tc.spec, tc.cfg)
				if err == nil {
					t.Fatal("Load succeeded, want an error")
				}
				if !errors.Is(err, bounded.ErrNotRegular) {
					t.Errorf("error %q: want bounded.ErrNotRegular", err)
				}
				msg := err.Error()
				if !strings.Contains(msg, target.path) || !strings.Contains(msg, "not a regular file") || !strings.Contains(msg, target.kind) {
					t.Errorf("error %q: want the path %s, %q and %q", msg, target.path, "not a regular file", target.kind)
				}
			})
		}
	}
}
