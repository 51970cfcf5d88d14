// SPDX-License-Identifier: Apache-2.0

// Package spans turns the records of BPF ring buffers into OpenTelemetry
// spans and exports them over OTLP (the tracing: section of a config, as in
// cloudflare/ebpf_exporter v2).
//
// A config's tracing.spans entry names a BPF_MAP_TYPE_RINGBUF map and the
// layout of its records as a list of labels (config.Span). Each record the
// BPF program submits (bpf_ringbuf_reserve/bpf_ringbuf_submit) is decoded
// field by field:
//
//	trace_id                     16 bytes, the record's bytes in memory order;
//	                             all zero: the SDK generates one
//	parent_span_id                8 bytes, memory order; all zero: a root span
//	span_id                       8 bytes, memory order; all zero: generated
//	span_monotonic_timestamp_ns   8 bytes, host-order u64: start, CLOCK_MONOTONIC
//	                             ns (bpf_ktime_get_ns); absent: the time read
//	span_duration_ns              8 bytes, host-order u64: end - start in ns
//	span_name                     any size, decoded by its chain: the span name
//	                             (else the entry's name, else the ring buffer's)
//	anything else                 a string attribute, decoded by its chain
//
// Every span also has the attribute ebpf_exporter.config = <config name>
// and, as resource, service.name = the entry's service (else
// $OTEL_SERVICE_NAME, else kernel_exporter). A Sink exports the spans of
// every config through one OTLP exporter (gRPC or HTTP/protobuf, from the
// standard OTEL_* variables) behind a bounded queue, and serves the
// self-metrics kernel_exporter_spans_total, kernel_exporter_span_errors_total,
// kernel_exporter_spans_dropped_total and kernel_exporter_spans_exported_total.
package spans

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/kernel-exporter/kernel_exporter/config"
	"github.com/kernel-exporter/kernel_exporter/decoder"
)

// fieldKind says what a record field is for.
type fieldKind int

const (
	fieldAttr fieldKind = iota
	fieldTraceID
	fieldParentID
	fieldSpanID
	fieldTimestamp
	fieldDuration
	fieldName
)

var kinds = map[string]fieldKind{
	config.SpanTraceID:   fieldTraceID,
	config.SpanParentID:  fieldParentID,
	config.SpanID:        fieldSpanID,
	config.SpanTimestamp: fieldTimestamp,
	config.SpanDuration:  fieldDuration,
	config.SpanNameLabel: fieldName,
}

// field is one label of a record: bytes [Off, Off+Size).
type field struct {
	name  string
	kind  fieldKind
	off   int
	size  int
	chain decoder.Chain // attributes and span_name
}

// Layout is one compiled tracing.spans entry.
type Layout struct {
	Config  string // the config's name
	RingBuf string // the ring buffer map's name
	Name    string // the default span name
	Service string // service.name as configured (may be empty)
	// Size is the record size the labels describe, in bytes (at most
	// config.MaxKeySize); a record may be longer by less than
	// MaxTailPadding bytes.
	Size   int
	fields []field
}

// MaxTailPadding is how many bytes a record may have beyond its labels:
// the tail padding a C compiler adds to align a struct to 8 bytes.
const MaxTailPadding = 8

// Plan is a config's compiled tracing section.
type Plan struct {
	Config  string
	Layouts []*Layout
}

// Compile checks a config's tracing.spans against the object's maps (each
// ring buffer must exist and be a BPF_MAP_TYPE_RINGBUF) and builds the
// decoder chains of its labels. Errors are *config.Error naming the file,
// field and value. A config without spans compiles to nil.
func Compile(cfg *config.Config, spec *ebpf.CollectionSpec, env *decoder.Env) (*Plan, error) {
	if len(cfg.Tracing.Spans) == 0 {
		return nil, nil
	}
	p := &Plan{Config: cfg.Name}
	for i, s := range cfg.Tracing.Spans {
		path := fmt.Sprintf("tracing.spans[%d]", i)
		if spec != nil {
			ms, ok := spec.Maps[s.RingBuf]
			if !ok {
				return nil, cfg.Errorf(path+".ringbuf", "no map %s in the object", config.Quote(s.RingBuf))
			}
			if ms.Type != ebpf.RingBuf {
				return nil, cfg.Errorf(path+".ringbuf", "map %s is a %s, not a ring buffer (BPF_MAP_TYPE_RINGBUF)", config.Quote(s.RingBuf), ms.Type)
			}
		}
		l := &Layout{Config: cfg.Name, RingBuf: s.RingBuf, Name: s.Name, Service: s.Service}
		if l.Name == "" {
			l.Name = s.RingBuf
		}
		for j, lab := range s.Labels {
			lp := fmt.Sprintf("%s.labels[%d]", path, j)
			f := field{name: lab.Name, kind: kinds[lab.Name], off: l.Size, size: lab.Size}
			if f.kind == fieldAttr || f.kind == fieldName {
				chain, err := env.NewChain(lab.Decoders, lab.Size, nil)
				if err != nil {
					if ce, ok := errors.AsType[*decoder.ChainError](err); ok {
						return nil, cfg.Errorf(fmt.Sprintf("%s.decoders[%d].name", lp, ce.Index), "%s", config.Sanitize(ce.Err.Error()))
					}
					return nil, cfg.Errorf(lp+".decoders", "%s", config.Sanitize(err.Error()))
				}
				f.chain = chain
			}
			l.fields = append(l.fields, f)
			// config bounds each size and padding and their sum.
			l.Size += lab.Size + lab.Padding
		}
		p.Layouts = append(p.Layouts, l)
	}
	return p, nil
}
