// SPDX-License-Identifier: Apache-2.0

package config

import (
	"fmt"
	"regexp"
)

// Tracing is the tracing section: ring buffers whose records become
// OpenTelemetry spans (package spans), as in cloudflare/ebpf_exporter v2.
type Tracing struct {
	Spans []Span `yaml:"spans"`
}

// Span says how the records of one BPF_MAP_TYPE_RINGBUF map become spans.
//
// A record is decoded like a map key: label i takes Size bytes, then skips
// Padding bytes. Labels with the names of SpanLabelSizes give the span's
// identity and timing (ids as the record's bytes in memory order, times as
// host-order u64 nanoseconds); every other label becomes a span attribute
// with its decoded value. A record must be exactly as long as the labels'
// sizes and paddings add up to, or longer by less than 8 bytes (the tail
// padding of a C struct).
type Span struct {
	// RingBuf is the ring buffer map's name in the object.
	RingBuf string `yaml:"ringbuf"`
	// Name is the span name unless a span_name label gives one; empty
	// means RingBuf.
	Name string `yaml:"name"`
	// Service is the resource's service.name; empty means
	// $OTEL_SERVICE_NAME (then the SDK's default, unknown_service:<exe>).
	Service string  `yaml:"service"`
	Labels  []Label `yaml:"labels"`
}

// Span label names with a meaning of their own, and the size each must
// have. span_name has no fixed size (a C string, decoded by its chain).
const (
	SpanTraceID   = "trace_id"                    // 16 bytes; all zero: a new trace
	SpanParentID  = "parent_span_id"              // 8 bytes; all zero: a root span
	SpanID        = "span_id"                     // 8 bytes; all zero: generated
	SpanTimestamp = "span_monotonic_timestamp_ns" // 8 bytes: CLOCK_MONOTONIC ns (bpf_ktime_get_ns) of the start
	SpanDuration  = "span_duration_ns"            // 8 bytes: ns from start to end
	SpanNameLabel = "span_name"                   // any size: the span name, decoded
)

// SpanLabelSizes maps the fixed-size special span labels to their size.
var SpanLabelSizes = map[string]int{
	SpanTraceID:   16,
	SpanParentID:  8,
	SpanID:        8,
	SpanTimestamp: 8,
	SpanDuration:  8,
}

// MaxSpans bounds the spans entries of one config.
const MaxSpans = 64

// maxServiceName bounds a span's service name, in bytes.
const maxServiceName = 256

// ringbufNameRe is a BPF map name: at most 15 bytes in the kernel (BPF_OBJ_NAME_LEN - 1),
// longer in the object's ELF symbols.
var ringbufNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.]*$`)

// validateTracing checks tracing.spans: names, the ring buffer map name
// (unique in the config; that it is a ring buffer is checked against the
// object, by package spans), labels as map key labels, and the sizes of the
// special labels. Whether the map exists is checked at load.
func (c *Config) validateTracing(budget *decoderBudget) error {
	if len(c.Tracing.Spans) > MaxSpans {
		return c.Errorf("tracing.spans", "%d spans, more than the limit of %d", len(c.Tracing.Spans), MaxSpans)
	}
	seen := map[string]string{}
	for i, s := range c.Tracing.Spans {
		path := fmt.Sprintf("tracing.spans[%d]", i)
		if s.RingBuf == "" {
			return c.Errorf(path+".ringbuf", "missing ring buffer map name")
		}
		if len(s.RingBuf) > MaxNameLen || !ringbufNameRe.MatchString(s.RingBuf) {
			return c.Errorf(path+".ringbuf", "invalid map name %s", Quote(s.RingBuf))
		}
		if prev, ok := seen[s.RingBuf]; ok {
			return c.Errorf(path+".ringbuf", "ring buffer %s is already read by %s", Quote(s.RingBuf), prev)
		}
		seen[s.RingBuf] = path
		if len(s.Name) > MaxNameLen {
			return c.Errorf(path+".name", "span name longer than %d bytes (%d)", MaxNameLen, len(s.Name))
		}
		if len(s.Service) > maxServiceName {
			return c.Errorf(path+".service", "service name longer than %d bytes (%d)", maxServiceName, len(s.Service))
		}
		if len(s.Labels) == 0 {
			return c.Errorf(path+".labels", "no labels: a record's layout must be given")
		}
		if err := c.validateLabels(path, s.Labels, false, true, budget); err != nil {
			return err
		}
		for j, l := range s.Labels {
			lp := fmt.Sprintf("%s.labels[%d]", path, j)
			if l.Of != "" {
				return c.Errorf(lp+".of", "span labels decode their own bytes: of is for map keys")
			}
			if want, ok := SpanLabelSizes[l.Name]; ok && l.Size != want {
				return c.Errorf(lp+".size", "%s must be %d bytes, got %d", l.Name, want, l.Size)
			}
		}
	}
	return nil
}
