// SPDX-License-Identifier: Apache-2.0

package spans

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/kernel-exporter/kernel_exporter/decoder"
)

// Record is one decoded ring buffer record.
type Record struct {
	TraceID  trace.TraceID // zero: none given
	ParentID trace.SpanID  // zero: a root span
	SpanID   trace.SpanID  // zero: generate one
	// Start is the CLOCK_MONOTONIC start in ns; HasStart is false when
	// the layout has no span_monotonic_timestamp_ns.
	Start    uint64
	HasStart bool
	Duration uint64 // ns
	Name     string
	Attrs    []attribute.KeyValue
}

// MaxDuration bounds span_duration_ns: a longer one is a program's bug (an
// end before its start, read as unsigned), counted as a decoder error.
const MaxDuration = uint64(365 * 24 * time.Hour)

// Error reasons of kernel_exporter_span_errors_total.
const (
	ReasonShort   = "short_record" // a record shorter than its labels
	ReasonLong    = "long_record"  // longer by MaxTailPadding bytes or more
	ReasonDecoder = "decoder"      // a decoder of an attribute or span_name failed, or span_duration_ns > MaxDuration
)

// RecordError is a record that could not become a span; Reason is one of
// the Reason constants.
type RecordError struct {
	Reason string
	Err    error
}

func (e *RecordError) Error() string { return e.Err.Error() }
func (e *RecordError) Unwrap() error { return e.Err }

// Decode decodes one record. Errors: decoder.ErrSkip (a regexp decoder
// dropped the record: not an error), or a *RecordError: the record is
// shorter than Size (ReasonShort), at least MaxTailPadding bytes longer
// (ReasonLong), or a decoder failed (ReasonDecoder). The record's bytes
// are never quoted beyond decoder.Token's 8 bytes. rec is not kept.
func (l *Layout) Decode(rec []byte) (Record, error) {
	var r Record
	if len(rec) < l.Size {
		return r, &RecordError{ReasonShort, fmt.Errorf("ring buffer %s: record of %d bytes, the labels describe %d", l.RingBuf, len(rec), l.Size)}
	}
	if len(rec)-l.Size >= MaxTailPadding {
		return r, &RecordError{ReasonLong, fmt.Errorf("ring buffer %s: record of %d bytes, the labels describe %d", l.RingBuf, len(rec), l.Size)}
	}
	r.Name = l.Name
	for i := range l.fields {
		f := &l.fields[i]
		b := rec[f.off : f.off+f.size]
		switch f.kind {
		case fieldTraceID:
			copy(r.TraceID[:], b)
		case fieldParentID:
			copy(r.ParentID[:], b)
		case fieldSpanID:
			copy(r.SpanID[:], b)
		case fieldTimestamp:
			r.Start, r.HasStart = binary.NativeEndian.Uint64(b), true
		case fieldDuration:
			r.Duration = binary.NativeEndian.Uint64(b)
			if r.Duration > MaxDuration {
				return Record{}, &RecordError{ReasonDecoder, fmt.Errorf("ring buffer %s: span_duration_ns %d is more than %d (a year)", l.RingBuf, r.Duration, uint64(MaxDuration))}
			}
		default:
			v, err := f.chain.Decode(b)
			if err != nil {
				if errors.Is(err, decoder.ErrSkip) {
					return Record{}, decoder.ErrSkip
				}
				return Record{}, &RecordError{ReasonDecoder, fmt.Errorf("ring buffer %s: label %s: %w", l.RingBuf, f.name, err)}
			}
			if f.kind == fieldName {
				if v != "" {
					r.Name = v
				}
				continue
			}
			r.Attrs = append(r.Attrs, attribute.String(f.name, v))
		}
	}
	return r, nil
}
