// SPDX-License-Identifier: Apache-2.0

package bpfstats

import (
	"sync"
	"unsafe"

	"github.com/cilium/ebpf"

	"github.com/kernel-exporter/kernel_exporter/collector"
)

// OursFromStatus returns Options.Ours for the exporter's status: the
// config name of each program of a config that is up or detached, by
// program id. Each program's id is read once (BPF_OBJ_GET_INFO_BY_FD on
// its descriptor, which needs no capability) and kept while the program
// is in the status.
func OursFromStatus(status *collector.Status) func() map[uint32]string {
	var mu sync.Mutex
	ids := map[*ebpf.Program]uint32{}
	return func() map[uint32]string {
		mu.Lock()
		defer mu.Unlock()
		out := map[uint32]string{}
		seen := map[*ebpf.Program]uint32{}
		for _, st := range status.States() {
			for _, p := range st.Programs {
				if p.Prog == nil {
					continue
				}
				id, ok := ids[p.Prog]
				if !ok {
					id = programID(p.Prog)
				}
				seen[p.Prog] = id
				if id != 0 {
					out[id] = st.Name
				}
			}
		}
		ids = seen
		return out
	}
}

// programID returns p's id, 0 when it cannot be read (p closed).
func programID(p *ebpf.Program) uint32 {
	fd := p.FD()
	if fd < 0 {
		return 0
	}
	var info progInfo
	if err := objInfo(fd, unsafe.Pointer(&info), unsafe.Sizeof(info)); err != nil {
		return 0
	}
	return info.ID
}
