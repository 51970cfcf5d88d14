// SPDX-License-Identifier: Apache-2.0

package decoder

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/bounded"
	"github.com/kernel-exporter/kernel_exporter/config"
)

// TestKernelFilesBounded checks that the files decoders read are opened
// through package bounded: a FIFO in place of kallsyms or mountinfo is
// refused at once (it would block a plain open forever), and a partitions
// table that is not a regular file is ignored.
func TestKernelFilesBounded(t *testing.T) {
	proc, sys := t.TempDir(), t.TempDir()
	mkdirs(t, proc, "self")
	for _, p := range []string{"kallsyms", "self/mountinfo", "partitions"} {
		if err := unix.Mkfifo(filepath.Join(proc, p), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	e := NewEnv(16)
	e.ProcRoot, e.SysRoot = proc, sys
	d := mustNew(t, e, config.Decoder{Name: "ksym"}, 8)
	_, err := d.Decode(u64(0xffffffff81000000))
	if !errors.Is(err, bounded.ErrNotRegular) || !strings.Contains(err.Error(), "kernel symbol table") {
		t.Errorf("ksym on a FIFO kallsyms: %v", err)
	}
	if _, err := e.New(config.Decoder{Name: "cgroup"}, 8, nil); !errors.Is(err, bounded.ErrNotRegular) {
		t.Errorf("cgroup on a FIFO mountinfo: %v", err)
	}
	mm := mustNew(t, e, config.Decoder{Name: "majorminor"}, 4)
	if out, err := mm.Decode(u32(8<<20 | 1)); err != nil || string(out) != "8:1" {
		t.Errorf("majorminor with a FIFO partitions = %q, %v", out, err)
	}
}

// TestKallsymsBounds checks parseKallsyms' limits: names longer than
// maxSymbolName are skipped, and input over the kallsyms cap is refused.
func TestKallsymsBounds(t *testing.T) {
	k, err := parseKallsyms([]byte("10 T " + strings.Repeat("n", maxSymbolName+1) + "\n20 T ok\n"))
	if err != nil || len(k.addrs) != 1 || string(k.names) != "ok" {
		t.Fatalf("long name: %+v, %v", k, err)
	}
	big := make([]byte, bounded.MaxKallsyms+1)
	if _, err := parseKallsyms(big); err == nil || !strings.Contains(err.Error(), "128 MiB") {
		t.Errorf("oversize kallsyms: %v", err)
	}
}
