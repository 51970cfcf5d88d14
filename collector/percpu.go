// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// Per-CPU values and value fields.
//
// A map read hands each entry's value bytes to every metric of the map
// (several for a struct value, see plan_values.go): ncpu values of cpuSize
// bytes for a per-CPU map (each CPU's value padded to 8 bytes), one value
// otherwise. A metric reads its ValueField from each, and either adds the
// CPUs up (per_cpu: sum, the default) or hands each CPU's value to the
// series of the key prefixed with the CPU number (per_cpu: label).

// valueSum returns the metric's field summed over the value's CPUs
// (wrapping, so signed fields add up as int64).
func (m *metric) valueSum(val []byte) uint64 {
	var v uint64
	for c := 0; c+m.Value.Off+m.Value.Size <= len(val) && c < m.cpuSize*m.ncpu; c += m.cpuSize {
		v += m.Value.read(val[c:])
	}
	return v
}

// entry adds one map entry to the read in flight.
func (m *metric) entry(key, val []byte) {
	if m.ValueSlots > 0 {
		m.entrySlots(key, val)
		return
	}
	if !m.CPULabel {
		v := m.valueSum(val)
		if v == 0 && m.SkipZero {
			return
		}
		if m.exp != nil {
			m.addSeen(key, v)
		} else {
			m.add(key, v)
		}
		return
	}
	k := m.cpuKeyOf(key)
	for c := 0; c < m.ncpu && (c+1)*m.cpuSize <= len(val); c++ {
		v := m.Value.read(val[c*m.cpuSize:])
		if v == 0 && m.SkipZero {
			continue
		}
		nativeEndian.PutUint32(k, uint32(c))
		m.add(k, v)
	}
}

// entrySlots adds one entry of a histogram with slots_in_value: slot i
// of each CPU's value is the u64 at bytes [8i, 8i+8), summed over CPUs
// or, under per_cpu: label, a series per CPU. An entry whose slots are
// all zero (an array entry never written) makes no series, as a key
// absent from a hash map.
func (m *metric) entrySlots(key, val []byte) {
	if !m.CPULabel {
		var sums [64]uint64
		slots := sums[:0]
		if m.ValueSlots > len(sums) {
			slots = make([]uint64, 0, m.ValueSlots)
		}
		nonzero := false
		for i := 0; i < m.ValueSlots; i++ {
			var v uint64
			for c := 0; c < m.ncpu && (c+1)*m.cpuSize <= len(val); c++ {
				v += nativeEndian.Uint64(val[c*m.cpuSize+8*i:])
			}
			slots = append(slots, v)
			nonzero = nonzero || v != 0
		}
		if !nonzero {
			return
		}
		if s := m.series(key); s >= 0 {
			for i, v := range slots {
				if v != 0 {
					m.addSlot(s, uint64(i), v)
				}
			}
		}
		return
	}
	k := m.cpuKeyOf(key)
	for c := 0; c < m.ncpu && (c+1)*m.cpuSize <= len(val); c++ {
		cpu := val[c*m.cpuSize : c*m.cpuSize+8*m.ValueSlots]
		if allZero(cpu) {
			continue
		}
		nativeEndian.PutUint32(k, uint32(c))
		s := m.series(k)
		if s < 0 {
			continue
		}
		for i := 0; i < m.ValueSlots; i++ {
			if v := nativeEndian.Uint64(cpu[8*i:]); v != 0 {
				m.addSlot(s, uint64(i), v)
			}
		}
	}
}

// cpuKeyOf returns the metric's key buffer for per_cpu: label, holding
// key after the 4 bytes of the CPU number, which the caller sets.
func (m *metric) cpuKeyOf(key []byte) []byte {
	k := m.cpuKey
	if len(k) != cpuKeySize+len(key) {
		k = make([]byte, cpuKeySize+len(key))
		m.cpuKey = k
	}
	copy(k[cpuKeySize:], key)
	return k
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// add adds value v of key (with its CPU prefix under per_cpu: label) to
// its series.
func (m *metric) add(key []byte, v uint64) {
	s := m.series(key)
	if s < 0 {
		return
	}
	if !m.Histogram {
		m.rs.value[s] += v
		return
	}
	m.addSlot(s, readUint(key[m.BucketOff:m.BucketOff+m.BucketSize]), v)
}

// addSlot adds count v of slot to histogram series s (the sum slot's v to
// its sum).
func (m *metric) addSlot(s int32, slot, v uint64) {
	rs := &m.rs
	switch i := m.Buckets.Slot(slot); {
	case i == -2:
		rs.sum[s] += v
	case i >= 0:
		rs.bk[int(s)*rs.nb+i] += v
		rs.value[s] += v
	case i == -3: // left out (Buckets.LeaveOut)
	default:
		rs.value[s] += v // only in +Inf
	}
}

// number returns a counter or gauge total as the metric's value: signed
// fields are two's complement.
func (m *metric) number(v uint64) float64 {
	if m.Value.Signed {
		return float64(int64(v))
	}
	return float64(v)
}

// BPF commands on one element (include/uapi/linux/bpf.h).
const (
	bpfMapLookupElem          = 1
	bpfMapLookupAndDeleteElem = 21 // Linux 4.20 for queues, 5.14 for hash maps
)

// bpfElemAttr is the element part of union bpf_attr.
type bpfElemAttr struct {
	MapFD uint32
	_     uint32
	Key   unsafe.Pointer
	Value unsafe.Pointer
	Flags uint64
}

// errNoLookupDelete: the kernel has no lookup-and-delete for the map type.
var errNoLookupDelete = fmt.Errorf("lookup and delete: %w", ebpf.ErrNotSupported)

// lookupRaw looks key up (cmd bpfMapLookupElem) or looks it up and
// deletes it (bpfMapLookupAndDeleteElem), copying the value into val in
// the kernel's layout (per-CPU values padded to 8 bytes each). val must
// hold the whole value. A missing key is ebpf.ErrKeyNotExist; a kernel
// without the command for the map type, errNoLookupDelete.
func lookupRaw(m *ebpf.Map, cmd uintptr, key, val []byte) error {
	attr := bpfElemAttr{MapFD: uint32(m.FD()), Key: unsafe.Pointer(&key[0]), Value: unsafe.Pointer(&val[0])}
	_, _, errno := unix.Syscall(unix.SYS_BPF, cmd, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	switch errno {
	case 0:
		return nil
	case unix.ENOENT:
		return fmt.Errorf("lookup %s: %w", m, ebpf.ErrKeyNotExist)
	case unix.EINVAL, unix.EOPNOTSUPP, unix.Errno(524): // 524: ENOTSUPP
		if cmd == bpfMapLookupAndDeleteElem {
			return errNoLookupDelete
		}
	}
	return fmt.Errorf("lookup %s: %w", m, errno)
}

// isNoLookupDelete reports whether err says the kernel lacks
// lookup-and-delete for the map.
func isNoLookupDelete(err error) bool { return errors.Is(err, errNoLookupDelete) }
