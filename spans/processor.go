// SPDX-License-Identifier: Apache-2.0

package spans

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Batching bounds, from the standard OTEL_BSP_* variables when set (each
// range-checked), else these defaults (the specification's).
const (
	DefaultQueueSize     = 2048             // OTEL_BSP_MAX_QUEUE_SIZE: ended spans waiting for export
	DefaultBatchSize     = 512              // OTEL_BSP_MAX_EXPORT_BATCH_SIZE: spans per export call
	DefaultScheduleDelay = 5 * time.Second  // OTEL_BSP_SCHEDULE_DELAY (ms): longest wait before a partial batch is sent
	DefaultExportTimeout = 30 * time.Second // OTEL_BSP_EXPORT_TIMEOUT (ms): bound of one export call

	MaxQueueSize = 1 << 20 // a span of a record is under 2 KiB: at most ~2 GiB queued
)

// batchConfig are the processor's bounds.
type batchConfig struct {
	queue, batch   int
	delay, timeout time.Duration
}

// batchConfigFromEnv reads OTEL_BSP_*; an error names the variable and
// its value.
func batchConfigFromEnv() (batchConfig, error) {
	c := batchConfig{DefaultQueueSize, DefaultBatchSize, DefaultScheduleDelay, DefaultExportTimeout}
	ints := []struct {
		env      string
		dst      *int
		min, max int
	}{
		{"OTEL_BSP_MAX_QUEUE_SIZE", &c.queue, 1, MaxQueueSize},
		{"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", &c.batch, 1, MaxQueueSize},
	}
	for _, v := range ints {
		if s := os.Getenv(v.env); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < v.min || n > v.max {
				return c, fmt.Errorf("%s=%s: want an integer from %d to %d", v.env, strconv.Quote(s), v.min, v.max)
			}
			*v.dst = n
		}
	}
	durs := []struct {
		env string
		dst *time.Duration
	}{
		{"OTEL_BSP_SCHEDULE_DELAY", &c.delay},
		{"OTEL_BSP_EXPORT_TIMEOUT", &c.timeout},
	}
	for _, v := range durs {
		if s := os.Getenv(v.env); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 || n > 3600_000 {
				return c, fmt.Errorf("%s=%s: want milliseconds from 1 to 3600000", v.env, strconv.Quote(s))
			}
			*v.dst = time.Duration(n) * time.Millisecond
		}
	}
	c.batch = min(c.batch, c.queue)
	return c, nil
}

// batcher is a SpanProcessor like the SDK's batch span processor, but one
// that counts what it drops: ended spans wait in a queue of at most
// cfg.queue spans (one more is dropped, counted as queue_full) and are
// exported cfg.batch at a time, at least every cfg.delay, each export
// bounded by cfg.timeout (a failed export's spans are counted as
// export_failed; nothing is retried beyond the exporter's own retries).
type batcher struct {
	exp sdktrace.SpanExporter
	cfg batchConfig
	q   chan sdktrace.ReadOnlySpan

	dropQueue, dropExport, exported atomic.Uint64
	onError                         func(error)

	flush    chan chan struct{}
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

func newBatcher(exp sdktrace.SpanExporter, cfg batchConfig, onError func(error)) *batcher {
	b := &batcher{exp: exp, cfg: cfg, q: make(chan sdktrace.ReadOnlySpan, cfg.queue), onError: onError,
		flush: make(chan chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	go b.run()
	return b
}

// OnStart does nothing: spans are complete when they end.
func (b *batcher) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd queues s, or drops it when the queue is full.
func (b *batcher) OnEnd(s sdktrace.ReadOnlySpan) {
	select {
	case b.q <- s:
	default:
		b.dropQueue.Add(1)
	}
}

func (b *batcher) run() {
	defer close(b.done)
	batch := make([]sdktrace.ReadOnlySpan, 0, b.cfg.batch)
	t := time.NewTimer(b.cfg.delay)
	defer t.Stop()
	send := func() {
		if len(batch) == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), b.cfg.timeout)
		err := b.exp.ExportSpans(ctx, batch)
		cancel()
		if err != nil {
			b.dropExport.Add(uint64(len(batch)))
			b.onError(err)
		} else {
			b.exported.Add(uint64(len(batch)))
		}
		clear(batch)
		batch = batch[:0]
	}
	drain := func() {
		for {
			select {
			case s := <-b.q:
				if batch = append(batch, s); len(batch) == b.cfg.batch {
					send()
				}
			default:
				send()
				return
			}
		}
	}
	for {
		select {
		case s := <-b.q:
			if batch = append(batch, s); len(batch) == b.cfg.batch {
				send()
			}
		case <-t.C:
			send()
			t.Reset(b.cfg.delay)
		case ack := <-b.flush:
			drain()
			close(ack)
		case <-b.stop:
			drain()
			return
		}
	}
}

// ForceFlush exports everything queued, waiting until ctx is done at most.
func (b *batcher) ForceFlush(ctx context.Context) error {
	ack := make(chan struct{})
	select {
	case b.flush <- ack:
	case <-b.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-ack:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Shutdown exports what is queued and shuts the exporter down, waiting
// until ctx is done at most. Spans ending later are dropped (queue_full).
func (b *batcher) Shutdown(ctx context.Context) error {
	b.stopOnce.Do(func() { close(b.stop) })
	select {
	case <-b.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return b.exp.Shutdown(ctx)
}
