// SPDX-License-Identifier: Apache-2.0

package decoder

import (
	"strconv"

	"github.com/kernel-exporter/kernel_exporter/config"
)

func init() { register("uint", newUint) }

// uintDecoder turns an unsigned integer of 1, 2, 4 or 8 bytes, in host byte
// order, into its decimal text: 2a 00 00 00 → "42".
type uintDecoder struct{ size int }

func newUint(_ *Env, _ config.Decoder, size int, _ StackMaps) (Decoder, error) {
	if err := checkSize("uint", size, 1, 2, 4, 8); err != nil {
		return nil, err
	}
	return &uintDecoder{size: size}, nil
}

// Decode fails if in is not as wide as the field the decoder was built for.
func (d *uintDecoder) Decode(in []byte) ([]byte, error) {
	if err := checkLen("uint", in, d.size); err != nil {
		return nil, err
	}
	v, _ := nativeUint(in)
	return appendDecimal(nil, v), nil
}

// appendDecode appends the decimal text to dst (see Chain.AppendSettled).
func (d *uintDecoder) appendDecode(dst, in []byte) ([]byte, error) {
	if err := checkLen("uint", in, d.size); err != nil {
		return dst, err
	}
	v, _ := nativeUint(in)
	return strconv.AppendUint(dst, v, 10), nil
}

// smallDecimals holds the text of 0..smallDecimalMax back to back, so that
// the common small values (histogram slots, CPU numbers, syscall numbers)
// decode without allocating. smallDecimalEnd[i] is where i's text ends.
const smallDecimalMax = 1023

var smallDecimals, smallDecimalEnd = func() ([]byte, []uint16) {
	var buf []byte
	ends := make([]uint16, smallDecimalMax+1)
	for i := range ends {
		buf = strconv.AppendUint(buf, uint64(i), 10)
		ends[i] = uint16(len(buf))
	}
	return buf, ends
}()

// appendDecimal appends v in decimal to dst. With a nil dst and a small v it
// returns a shared read-only slice instead of allocating.
func appendDecimal(dst []byte, v uint64) []byte {
	if dst == nil && v <= smallDecimalMax {
		start := 0
		if v > 0 {
			start = int(smallDecimalEnd[v-1])
		}
		end := int(smallDecimalEnd[v])
		return smallDecimals[start:end:end]
	}
	if dst == nil {
		dst = make([]byte, 0, 20)
	}
	return strconv.AppendUint(dst, v, 10)
}
