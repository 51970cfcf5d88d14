// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"errors"
	"os"
	"testing"

	"github.com/cilium/ebpf"
)

// eachKernelMap calls fn with every live BPF map of the system, in id order,
// and its info. fn returns whether it keeps the map open; otherwise the map
// is closed after the call. Maps that go away meanwhile are skipped.
func eachKernelMap(t *testing.T, fn func(m *ebpf.Map, info *ebpf.MapInfo) (keep bool)) {
	t.Helper()
	var id ebpf.MapID
	for {
		next, err := ebpf.MapGetNextID(id)
		if errors.Is(err, os.ErrNotExist) {
			return
		}
		if err != nil {
			t.Fatalf("map ids: %v", err)
		}
		id = next
		m, err := ebpf.NewMapFromID(id)
		if err != nil {
			continue // gone meanwhile
		}
		info, err := m.Info()
		if err != nil || !fn(m, info) {
			m.Close()
		}
	}
}

// kernelMapNames returns the names of every live BPF map.
func kernelMapNames(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	eachKernelMap(t, func(_ *ebpf.Map, info *ebpf.MapInfo) bool {
		names[info.Name] = true
		return false
	})
	return names
}

// findMap opens the live BPF map named name with max_entries max (0: any;
// the newest if several), closed when the test ends.
func findMap(t *testing.T, name string, max uint32) *ebpf.Map {
	t.Helper()
	var found *ebpf.Map
	eachKernelMap(t, func(m *ebpf.Map, info *ebpf.MapInfo) bool {
		if info.Name != name || (max != 0 && info.MaxEntries != max) {
			return false
		}
		if found != nil {
			found.Close()
		}
		found = m
		return true
	})
	if found == nil {
		t.Fatalf("no live BPF map named %s", name)
	}
	t.Cleanup(func() { found.Close() })
	return found
}
