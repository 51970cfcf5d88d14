// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"encoding/binary"
	"testing"
)

// FuzzValueBytes reads a field out of per-CPU value bytes as a map read
// does (valueSum, and entry's per-CPU split), for any field a plan may
// hold (offset and size inside the value) and any value bytes, and checks
// the sum against a plain reading of the same bytes.
func FuzzValueBytes(f *testing.F) {
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0}, uint8(0), uint8(8), false, uint8(2), uint8(8))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 9, 9, 9, 9, 0xfe, 0xff, 0xff, 0xff}, uint8(0), uint8(4), true, uint8(3), uint8(4))
	f.Add([]byte{0x80, 1, 2, 3, 4, 5, 6, 7}, uint8(3), uint8(1), true, uint8(1), uint8(8))
	f.Fuzz(func(t *testing.T, val []byte, off, size uint8, signed bool, ncpu, cpuSize uint8) {
		sizes := [4]int{1, 2, 4, 8}
		fld := ValueField{Off: int(off % 64), Size: sizes[size%4], Signed: signed}
		cs := max(int(cpuSize), fld.Off+fld.Size) // Compile: the field is inside the value
		n := max(int(ncpu%8), 1)
		if len(val) < n*cs {
			val = append(val, make([]byte, n*cs-len(val))...)
		}
		val = val[:n*cs]
		m := &metric{MetricPlan: &MetricPlan{Value: fld}, ncpu: n, cpuSize: cs}
		var want uint64
		for c := 0; c < n; c++ {
			b := val[c*cs+fld.Off:]
			var x uint64
			switch fld.Size {
			case 1:
				x = uint64(b[0])
				if signed {
					x = uint64(int64(int8(b[0])))
				}
			case 2:
				x = uint64(binary.NativeEndian.Uint16(b))
				if signed {
					x = uint64(int64(int16(x)))
				}
			case 4:
				x = uint64(binary.NativeEndian.Uint32(b))
				if signed {
					x = uint64(int64(int32(x)))
				}
			case 8:
				x = binary.NativeEndian.Uint64(b)
			}
			want += x
		}
		if got := m.valueSum(val); got != want {
			t.Fatalf("valueSum = %d, want %d", got, want)
		}
	})
}
