// SPDX-License-Identifier: Apache-2.0

package decoder

import (
	"encoding/hex"
	"fmt"

	"github.com/kernel-exporter/kernel_exporter/config"
)

func init() { register("hex", newHex) }

// hexDecoder prints a field in lowercase hex. A field of 1, 2, 4 or 8 bytes
// is an unsigned integer in host byte order and prints as 0x plus its value
// without leading zeros: 1f 00 00 00 → "0x1f". Any other width, or the text
// of an earlier decoder, prints as its raw bytes in order, without a 0x
// prefix: 00 11 22 33 44 55 → "001122334455".
//
// With Env.Compat every field prints as its raw bytes, as
// cloudflare/ebpf_exporter prints it (1f 00 00 00 → "1f000000").
type hexDecoder struct {
	size   int
	compat bool
}

func newHex(e *Env, _ config.Decoder, size int, _ StackMaps) (Decoder, error) {
	if size < 0 {
		return nil, fmt.Errorf("hex: size %d not supported", size)
	}
	return &hexDecoder{size: size, compat: e != nil && e.Compat}, nil
}

// Decode never fails for text input; for a raw field, in must be as wide as
// the field.
func (d *hexDecoder) Decode(in []byte) ([]byte, error) {
	if d.size != textInput {
		if err := checkLen("hex", in, d.size); err != nil {
			return nil, err
		}
		if v, ok := nativeUint(in); ok && !d.compat {
			return hexAddr(make([]byte, 0, 18), v), nil
		}
	}
	out := make([]byte, hex.EncodedLen(len(in)))
	hex.Encode(out, in)
	return out, nil
}
