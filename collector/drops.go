// SPDX-License-Identifier: Apache-2.0

package collector

// Drops: events a program left out of its metrics on purpose, counted by the
// program itself by reason (include/kernel_exporter/drops.bpf.h):
//
//	kernel_exporter_bpf_dropped_total{config,reason}
//
// The counts come from the per-CPU hash ke_dropped that the header adds to
// an object including it: key a reason name, NUL-padded to 16 bytes, value
// the count per CPU. They are read with the config's maps (at each read) and
// summed over CPUs. Configs whose object has no such map get no series.

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/cilium/ebpf"
	"github.com/prometheus/client_golang/prometheus"
)

// DroppedMap is the name of the per-CPU hash, keyed by reason, in which the
// programs count what they drop (include/kernel_exporter/drops.bpf.h).
const DroppedMap = "ke_dropped"

// dropReasonSize is the size of a ke_dropped key: a reason name.
const dropReasonSize = 16

var bpfDroppedDesc = prometheus.NewDesc(selfNamespace+"_bpf_dropped_total",
	"Events a program of the config left out of its metrics on purpose, by the program's reason (for example biolatency's stale_start: a start time that belongs to an earlier request at the same address), counted by the program through include/kernel_exporter/drops.bpf.h, summed over CPUs.", []string{"config", "reason"}, nil)

// dropCount is one reason's count at the last read.
type dropCount struct {
	reason string
	n      uint64
}

// drops reads the ke_dropped map of one config.
type drops struct {
	r    *mapReader
	last atomic.Pointer[[]dropCount] // sorted by reason; nil before the first read
}

// newDrops returns the reader of coll's ke_dropped map, nil when the object
// has none. Errors: the map has another type or key or value size.
func newDrops(coll *ebpf.Collection) (*drops, error) {
	m := coll.Maps[DroppedMap]
	if m == nil {
		return nil, nil
	}
	if m.Type() != ebpf.PerCPUHash || m.KeySize() != dropReasonSize || m.ValueSize() != 8 {
		return nil, fmt.Errorf("map %s has type %s, %d-byte keys and %d-byte values; want PerCPUHash, %d and 8",
			DroppedMap, m.Type(), m.KeySize(), m.ValueSize(), dropReasonSize)
	}
	r, err := newMapReader(m, true)
	if err != nil {
		return nil, err
	}
	return &drops{r: r}, nil
}

// read reads the counts; config names the config for a debug log line when
// the read fails (the previous counts then stay).
func (d *drops) read(config string) {
	var out []dropCount
	_, err := d.r.each(func(key []byte, v uint64) {
		reason := DropReason(key)
		// Two keys that differ only in bytes DropReason replaces share
		// a series.
		for i := range out {
			if out[i].reason == reason {
				out[i].n += v
				return
			}
		}
		out = append(out, dropCount{reason, v})
	})
	if err != nil {
		slog.Debug("reading drop counts", "config", config, "err", err)
		return
	}
	slices.SortFunc(out, func(a, b dropCount) int { return strings.Compare(a.reason, b.reason) })
	d.last.Store(&out)
}

// collect sends the counts of the last read.
func (d *drops) collect(ch chan<- prometheus.Metric, config string) {
	p := d.last.Load()
	if p == nil {
		return
	}
	for _, c := range *p {
		ch <- prometheus.MustNewConstMetric(bpfDroppedDesc, prometheus.CounterValue, float64(c.n), config, c.reason)
	}
}

// DropReason returns the reason label of a ke_dropped key: the bytes before
// the first NUL (at most 16), with every byte other than an ASCII letter,
// digit, '_', '-' or '.' replaced by '_'; "_" when that leaves nothing.
func DropReason(key []byte) string {
	if len(key) > dropReasonSize {
		key = key[:dropReasonSize]
	}
	b := make([]byte, 0, len(key))
	for _, c := range key {
		if c == 0 {
			break
		}
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-', c == '.':
			b = append(b, c)
		default:
			b = append(b, '_')
		}
	}
	if len(b) == 0 {
		return "_"
	}
	return string(b)
}
