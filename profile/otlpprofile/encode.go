// SPDX-License-Identifier: Apache-2.0

package otlpprofile

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

type protoNum = protowire.Number

// message is a protobuf message being written. Its methods append one
// field each; as in proto3, a singular scalar field equal to zero is left
// out (a reader takes its absence as zero).
type message []byte

// varint appends a varint field (uint64, int64, int32) unless v is 0.
func (m *message) varint(num protoNum, v uint64) {
	if v != 0 {
		m.varintAlways(num, v)
	}
}

// varintAlways appends a varint field even when v is 0 (a oneof member).
func (m *message) varintAlways(num protoNum, v uint64) {
	*m = protowire.AppendTag(*m, num, protowire.VarintType)
	*m = protowire.AppendVarint(*m, v)
}

// int32 appends an int32 field: a negative value is sign-extended to ten
// bytes, as protobuf encodes int32.
func (m *message) int32(num protoNum, v int32) { m.varint(num, uint64(int64(v))) }

// fixed64 appends a fixed64 field.
func (m *message) fixed64(num protoNum, v uint64) {
	*m = protowire.AppendTag(*m, num, protowire.Fixed64Type)
	*m = protowire.AppendFixed64(*m, v)
}

// bytes appends a length-delimited field (bytes, string, embedded
// message, or an entry of a repeated one), even when empty.
func (m *message) bytes(num protoNum, b []byte) {
	*m = protowire.AppendTag(*m, num, protowire.BytesType)
	*m = protowire.AppendBytes(*m, b)
}

// str appends a singular string field unless s is empty.
func (m *message) str(num protoNum, s string) {
	if s != "" {
		*m = protowire.AppendTag(*m, num, protowire.BytesType)
		*m = protowire.AppendString(*m, s)
	}
}

// packedInt32 appends a packed repeated int32 field, unless vs is empty.
func (m *message) packedInt32(num protoNum, vs []int32) {
	if len(vs) == 0 {
		return
	}
	n := 0
	for _, v := range vs {
		n += protowire.SizeVarint(uint64(int64(v)))
	}
	*m = protowire.AppendTag(*m, num, protowire.BytesType)
	*m = protowire.AppendVarint(*m, uint64(n))
	for _, v := range vs {
		*m = protowire.AppendVarint(*m, uint64(int64(v)))
	}
}

// packedInt64 appends a packed repeated int64 field, unless vs is empty.
func (m *message) packedInt64(num protoNum, vs ...int64) {
	if len(vs) == 0 {
		return
	}
	n := 0
	for _, v := range vs {
		n += protowire.SizeVarint(uint64(v))
	}
	*m = protowire.AppendTag(*m, num, protowire.BytesType)
	*m = protowire.AppendVarint(*m, uint64(n))
	for _, v := range vs {
		*m = protowire.AppendVarint(*m, uint64(v))
	}
}

// partialSuccess is ExportProfilesServiceResponse.partial_success.
type partialSuccess struct {
	rejected int64  // rejected_profiles
	message  string // error_message
}

// errResponse: the response is not a valid protobuf message.
var errResponse = errors.New("malformed ExportProfilesServiceResponse")

// parseResponse reads an ExportProfilesServiceResponse{partial_success 1:
// ExportProfilesPartialSuccess{rejected_profiles 1 (int64), error_message
// 2 (string)}}, skipping unknown fields. An empty body is a full success.
func parseResponse(b []byte) (partialSuccess, error) {
	var ps partialSuccess
	err := fields(b, func(num protoNum, typ protowire.Type, v uint64, sub []byte) error {
		if num != 1 || typ != protowire.BytesType {
			return nil
		}
		return fields(sub, func(num protoNum, typ protowire.Type, v uint64, s []byte) error {
			switch {
			case num == 1 && typ == protowire.VarintType:
				ps.rejected = int64(v)
			case num == 2 && typ == protowire.BytesType:
				ps.message = string(s)
			}
			return nil
		})
	})
	return ps, err
}

// fields calls f for each field of message b: a varint or fixed value in
// v, a length-delimited one in sub. Groups are skipped.
func fields(b []byte, f func(num protoNum, typ protowire.Type, v uint64, sub []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: %v", errResponse, protowire.ParseError(n))
		}
		b = b[n:]
		var v uint64
		var sub []byte
		switch typ {
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(b)
		case protowire.Fixed32Type:
			var v32 uint32
			v32, n = protowire.ConsumeFixed32(b)
			v = uint64(v32)
		case protowire.Fixed64Type:
			v, n = protowire.ConsumeFixed64(b)
		case protowire.BytesType:
			sub, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return fmt.Errorf("%w: field %d: %v", errResponse, num, protowire.ParseError(n))
		}
		b = b[n:]
		if err := f(num, typ, v, sub); err != nil {
			return err
		}
	}
	return nil
}
