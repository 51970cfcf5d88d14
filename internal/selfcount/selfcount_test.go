// SPDX-License-Identifier: Apache-2.0

package selfcount

import (
	"os"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/kernel-exporter/kernel_exporter/internal/testenv"
)

// TestInstructions loads the program as a socket filter (which the kernel
// can test-run), runs it 3 times and reads 3 back from the array.
func TestInstructions(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.SkipOrFail(t, "needs root to load a BPF program")
	}
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SocketFilter, License: "GPL", Instructions: Instructions(m)})
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	defer prog.Close()
	in := make([]byte, 14)
	for i := 0; i < 3; i++ {
		ret, err := prog.Run(&ebpf.RunOptions{Data: in})
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		if ret != 0 {
			t.Fatalf("run %d returned %d, want 0", i, ret)
		}
	}
	var n uint64
	if err := m.Lookup(uint32(0), &n); err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Errorf("count = %d after 3 runs, want 3", n)
	}
}
