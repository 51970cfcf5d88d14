// SPDX-License-Identifier: Apache-2.0

package decoder

import (
	"errors"
	"fmt"

	"github.com/kernel-exporter/kernel_exporter/config"
)

func init() { register("dname", newDname) }

// dnameDecoder turns a DNS name in wire format (RFC 1035 §3.1: labels, each
// prefixed by its length, ended by a zero length) into dotted text without
// the final dot: 07 example 03 com 00 → "example.com"; the root name (a
// lone 00) is ".". The field may be wider than the name: bytes after the
// terminating zero are ignored. Bytes that are not printable ASCII, and "."
// or "\" inside a label, are escaped as in zone files (\DDD, \., \\), which
// also keeps the label value valid UTF-8.
type dnameDecoder struct{}

func newDname(e *Env, _ config.Decoder, _ int, _ StackMaps) (Decoder, error) {
	if e != nil && e.Compat {
		return refDname{}, nil
	}
	return dnameDecoder{}, nil
}

// refDname prints a wire-format name as cloudflare/ebpf_exporter does
// (Env.Compat): every length byte of the field becomes a dot and the labels
// are copied as they are, so the text keeps the dot of the final
// zero-length label ("example.com.") and one more dot per zero byte after
// it; the leading dot is dropped. An empty field prints as "."; a label
// running past the end of the field leaves the field's bytes unchanged.
type refDname struct{}

// Decode never fails.
func (refDname) Decode(in []byte) ([]byte, error) {
	if len(in) == 0 {
		return []byte("."), nil
	}
	out := make([]byte, 0, len(in))
	for i := 0; i < len(in); {
		n := int(in[i])
		i++
		if i+n > len(in) {
			return in[:len(in):len(in)], nil
		}
		out = append(out, '.')
		out = append(out, in[i:i+n]...)
		i += n
	}
	return out[1:], nil
}

// Decode fails on a label longer than 63 bytes, a compression pointer, a
// name longer than 255 bytes, or a name without its terminating zero.
func (dnameDecoder) Decode(in []byte) ([]byte, error) {
	if len(in) > 0 && in[0] == 0 {
		return []byte("."), nil
	}
	out := make([]byte, 0, len(in))
	for i := 0; ; {
		if i >= len(in) {
			return nil, errors.New("dname: name not terminated by a zero-length label")
		}
		n := int(in[i])
		if n == 0 {
			if i+1 > 255 {
				return nil, fmt.Errorf("dname: name is %d bytes long, longer than 255", i+1)
			}
			return out, nil
		}
		if n > 63 {
			if n&0xc0 == 0xc0 {
				return nil, fmt.Errorf("dname: compression pointer at offset %d", i)
			}
			return nil, fmt.Errorf("dname: label length %d at offset %d exceeds 63", n, i)
		}
		if i+1+n > len(in) {
			return nil, fmt.Errorf("dname: label at offset %d runs past the end (%d bytes)", i, len(in))
		}
		if i > 0 {
			out = append(out, '.')
		}
		for _, c := range in[i+1 : i+1+n] {
			switch {
			case c == '.' || c == '\\':
				out = append(out, '\\', c)
			case c < '!' || c > '~':
				out = append(out, '\\', '0'+c/100, '0'+c/10%10, '0'+c%10)
			default:
				out = append(out, c)
			}
		}
		i += 1 + n
	}
}
