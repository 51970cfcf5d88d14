// SPDX-License-Identifier: Apache-2.0

package spans

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"math/rand/v2"
	"sync"

	"go.opentelemetry.io/otel/trace"
)

// idsKey carries a record's own ids to the IDGenerator through the context
// of tracer.Start.
type idsKey struct{}

// recordIDs are the ids a record gives; zero ones are generated.
type recordIDs struct {
	trace trace.TraceID
	span  trace.SpanID
}

// idGenerator is the SDK's IDGenerator for record spans: it returns the
// record's own trace and span ids, and random ones (as the SDK's default
// generator does) for those the record leaves zero.
type idGenerator struct {
	mu  sync.Mutex
	rng *rand.Rand
}

func newIDGenerator() *idGenerator {
	var seed [32]byte
	_, _ = crand.Read(seed[:])
	return &idGenerator{rng: rand.New(rand.NewChaCha8(seed))}
}

// NewIDs is called for a span without a parent trace id.
func (g *idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	ids, _ := ctx.Value(idsKey{}).(recordIDs)
	g.mu.Lock()
	defer g.mu.Unlock()
	if !ids.trace.IsValid() {
		binary.NativeEndian.PutUint64(ids.trace[:8], g.rng.Uint64())
		binary.NativeEndian.PutUint64(ids.trace[8:], g.rng.Uint64())
	}
	if !ids.span.IsValid() {
		ids.span = g.spanID()
	}
	return ids.trace, ids.span
}

// NewSpanID is called for a span whose trace id comes from its parent
// context (the record's trace id).
func (g *idGenerator) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	if ids, ok := ctx.Value(idsKey{}).(recordIDs); ok && ids.span.IsValid() {
		return ids.span
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.spanID()
}

// spanID is a random non-zero span id. The caller holds g.mu.
func (g *idGenerator) spanID() trace.SpanID {
	var s trace.SpanID
	for !s.IsValid() {
		binary.NativeEndian.PutUint64(s[:], g.rng.Uint64())
	}
	return s
}
