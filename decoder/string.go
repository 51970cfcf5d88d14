// SPDX-License-Identifier: Apache-2.0

package decoder

import (
	"bytes"
	"unicode/utf8"

	"github.com/kernel-exporter/kernel_exporter/config"
)

func init() { register("string", newString) }

// stringDecoder reads a C string: the bytes of a field (a char array of any
// width) up to the first NUL, or all of them if there is none. Prometheus
// label values must be UTF-8, so invalid sequences become U+FFFD.
type stringDecoder struct{}

func newString(_ *Env, _ config.Decoder, _ int, _ StackMaps) (Decoder, error) {
	return stringDecoder{}, nil
}

// Decode never fails. Valid UTF-8 is returned without copying.
func (stringDecoder) Decode(in []byte) ([]byte, error) {
	if i := bytes.IndexByte(in, 0); i >= 0 {
		in = in[:i]
	}
	in = in[:len(in):len(in)] // appending to the result must not touch the key
	if !utf8.Valid(in) {
		return bytes.ToValidUTF8(in, []byte("\uFFFD")), nil
	}
	return in, nil
}
