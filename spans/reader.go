// SPDX-License-Identifier: Apache-2.0

package spans

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"
	"go.opentelemetry.io/otel/trace"

	"github.com/kernel-exporter/kernel_exporter/decoder"
)

// Reader reads the ring buffers of one loaded config and emits their spans
// through its Sink, one goroutine per ring buffer, until Close.
type Reader struct {
	sink   *Sink
	config string
	rings  []*ring
	wg     sync.WaitGroup
	once   sync.Once
}

// ring is one ring buffer being read, with its counters.
type ring struct {
	l      *Layout
	rd     *ringbuf.Reader
	tracer trace.Tracer

	spans, short, long, decErr atomic.Uint64
	logged                     atomic.Bool // one log line per error reason kind
}

// Start begins reading the plan's ring buffers from the loaded collection.
// It builds the Sink's exporter first if this is the first config with
// spans: an error there (a bad OTEL_* variable) is returned, as is a ring
// buffer missing from coll or of another type, or one that cannot be read
// (ringbuf.NewReader's error). On error nothing is left running.
func (s *Sink) Start(p *Plan, coll *ebpf.Collection) (*Reader, error) {
	if p == nil {
		return nil, ErrNoSpans
	}
	s.mu.Lock()
	err := s.init()
	s.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	r := &Reader{sink: s, config: p.Config}
	for _, l := range p.Layouts {
		m := coll.Maps[l.RingBuf]
		if m == nil {
			r.closeRings()
			return nil, fmt.Errorf("tracing: no map %s in the loaded object", l.RingBuf)
		}
		if m.Type() != ebpf.RingBuf {
			r.closeRings()
			return nil, fmt.Errorf("tracing: map %s is a %s, not a ring buffer", l.RingBuf, m.Type())
		}
		rd, err := ringbuf.NewReader(m)
		if err != nil {
			r.closeRings()
			return nil, fmt.Errorf("tracing: ring buffer %s: %w", l.RingBuf, err)
		}
		s.mu.Lock()
		t := s.tracer(l.Service)
		s.mu.Unlock()
		r.rings = append(r.rings, &ring{l: l, rd: rd, tracer: t})
	}
	s.mu.Lock()
	s.readers[r] = struct{}{}
	s.mu.Unlock()
	for _, rg := range r.rings {
		r.wg.Go(func() { r.read(rg) })
	}
	return r, nil
}

// read emits the spans of one ring buffer until its reader is closed.
func (r *Reader) read(rg *ring) {
	var rec ringbuf.Record
	for {
		if err := rg.rd.ReadInto(&rec); err != nil {
			if errors.Is(err, os.ErrClosed) {
				return
			}
			r.sink.log.Warn("ring buffer read failed; reading stops", "config", r.config, "ringbuf", rg.l.RingBuf, "err", err)
			return
		}
		r.handle(rg, rec.RawSample)
	}
}

// handle decodes one record and emits its span, or counts why not.
func (r *Reader) handle(rg *ring, raw []byte) {
	rec, err := rg.l.Decode(raw)
	if err != nil {
		if errors.Is(err, decoder.ErrSkip) {
			return
		}
		reason := ReasonDecoder
		if re, ok := errors.AsType[*RecordError](err); ok {
			reason = re.Reason
		}
		switch reason {
		case ReasonShort:
			rg.short.Add(1)
		case ReasonLong:
			rg.long.Add(1)
		default:
			rg.decErr.Add(1)
		}
		if rg.logged.CompareAndSwap(false, true) {
			r.sink.log.Warn("ring buffer record dropped (further ones only counted in kernel_exporter_span_errors_total)", "config", r.config, "ringbuf", rg.l.RingBuf, "reason", reason, "err", err)
		}
		return
	}
	emit(rg.tracer, r.config, &rec)
	rg.spans.Add(1)
}

// Close stops reading and waits for the reading goroutines; spans already
// emitted stay queued for export. Its counters leave the Sink's metrics.
// Close is idempotent.
func (r *Reader) Close() {
	r.once.Do(func() {
		r.closeRings()
		r.wg.Wait()
		r.sink.mu.Lock()
		delete(r.sink.readers, r)
		r.sink.mu.Unlock()
	})
}

func (r *Reader) closeRings() {
	for _, rg := range r.rings {
		_ = rg.rd.Close()
	}
}
