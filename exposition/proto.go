// SPDX-License-Identifier: Apache-2.0

package exposition

import (
	"math"
	"math/bits"

	"github.com/kernel-exporter/kernel_exporter/collector"
)

// The protobuf writer encodes io.prometheus.client.MetricFamily (see
// client_model's metrics.proto) by hand. Field numbers and wire types:
const (
	// MetricFamily
	tagFamilyName   = 1<<3 | wireBytes
	tagFamilyHelp   = 2<<3 | wireBytes
	tagFamilyType   = 3<<3 | wireVarint
	tagFamilyMetric = 4<<3 | wireBytes
	// Metric
	tagMetricLabel     = 1<<3 | wireBytes
	tagMetricGauge     = 2<<3 | wireBytes
	tagMetricCounter   = 3<<3 | wireBytes
	tagMetricHistogram = 7<<3 | wireBytes
	// LabelPair
	tagLabelName  = 1<<3 | wireBytes
	tagLabelValue = 2<<3 | wireBytes
	// Counter, Gauge
	tagValue = 1<<3 | wireFixed64
	// Histogram
	tagSampleCount   = 1<<3 | wireVarint
	tagSampleSum     = 2<<3 | wireFixed64
	tagBucket        = 3<<3 | wireBytes
	tagSchema        = 5<<3 | wireVarint // sint32
	tagZeroThreshold = 6<<3 | wireFixed64
	tagZeroCount     = 7<<3 | wireVarint
	tagPositiveSpan  = 12<<3 | wireBytes
	tagPositiveDelta = 13<<3 | wireBytes // packed sint64
	// Bucket
	tagCumulativeCount = 1<<3 | wireVarint
	tagUpperBound      = 2<<3 | wireFixed64
	// BucketSpan
	tagSpanOffset = 1<<3 | wireVarint // sint32
	tagSpanLength = 2<<3 | wireVarint

	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2

	// MetricType values.
	typeCounter   = 0
	typeGauge     = 1
	typeHistogram = 4
)

// Every tag above is below 128: one byte.

func sizeVarint(x uint64) int { return (bits.Len64(x|1) + 6) / 7 }

// sizeBytes is the size of a length-delimited field of n bytes.
func sizeBytes(n int) int { return 1 + sizeVarint(uint64(n)) + n }

func appendVarint(dst []byte, x uint64) []byte {
	for x >= 0x80 {
		dst = append(dst, byte(x)|0x80)
		x >>= 7
	}
	return append(dst, byte(x))
}

func appendFixed64(dst []byte, tag byte, f float64) []byte {
	u := math.Float64bits(f)
	return append(dst, tag, byte(u), byte(u>>8), byte(u>>16), byte(u>>24),
		byte(u>>32), byte(u>>40), byte(u>>48), byte(u>>56))
}

func appendString(dst []byte, tag byte, s string) []byte {
	dst = append(dst, tag)
	dst = appendVarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func zigzag32(n int32) uint64 { return uint64(uint32(n<<1) ^ uint32(n>>31)) }
func zigzag64(n int64) uint64 { return uint64(n<<1) ^ uint64(n>>63) }

// writeProtoFamily writes f as one length-delimited MetricFamily: a size
// pass over its series gives the family's length, then a write pass
// writes each series with its own length prefix (see beginLen).
func writeProtoFamily(b *buffer, f *collector.Family) error {
	help := validUTF8(f.Help)
	size := sizeBytes(len(f.Name)) + sizeBytes(len(help)) + 2
	for i := 0; i < f.Len(); i++ {
		size += sizeBytes(b.metricSize(f, i))
	}
	b.buf = appendVarint(b.buf, uint64(size))
	b.buf = appendString(b.buf, tagFamilyName, f.Name)
	b.buf = appendString(b.buf, tagFamilyHelp, help)
	typ := byte(typeCounter)
	switch f.Kind {
	case collector.KindGauge:
		typ = typeGauge
	case collector.KindHistogram:
		typ = typeHistogram
	}
	b.buf = append(b.buf, tagFamilyType, typ)
	for i := 0; i < f.Len(); i++ {
		b.buf = append(b.buf, tagFamilyMetric)
		at := b.beginLen()
		b.appendMetric(f, i)
		b.endLen(at)
		if err := b.check(); err != nil {
			return err
		}
	}
	return nil
}

// metricSize is the size of series i's Metric message.
func (b *buffer) metricSize(f *collector.Family, i int) int {
	n := 0
	b.values = f.AppendLabelValues(b.values[:0], i)
	for j, v := range b.values {
		n += sizeBytes(sizeBytes(len(f.LabelNames[j])) + sizeBytes(len(validUTF8(v))))
	}
	if f.Kind != collector.KindHistogram {
		return n + sizeBytes(9)
	}
	return n + sizeBytes(histogramSize(f, i))
}

// histogramSize is the size of series i's Histogram message.
func histogramSize(f *collector.Family, i int) int {
	cum, count, _ := f.Histogram(i)
	n := 1 + sizeVarint(count) + 9
	for _, c := range cum {
		n += 2 + 1 + sizeVarint(c) + 9 // a Bucket is < 128 bytes
	}
	if l := f.Native; l != nil {
		n += 1 + sizeVarint(zigzag32(l.Schema)) + 9 + 1 + sizeVarint(cum[0])
		n += 2 + spanSize(l, cum, count)
		n += sizeBytes(deltasSize(cum, count))
	}
	return n
}

// The native buckets are sent as one span: the classic buckets 1…n-1 are
// native indexes Index[1]… in a row, and the observations above the last
// bound, when there are any, are one more bucket, the next index: a
// native histogram's buckets must add up to its count (Prometheus refuses
// it otherwise), and it has no +Inf bucket.
func spanSize(l *collector.NativeLayout, cum []uint64, count uint64) int {
	return 1 + sizeVarint(zigzag32(l.Index[1])) + 1 + sizeVarint(uint64(nativeBuckets(cum, count)))
}

// nativeBuckets is the number of native buckets of a series: the classic
// buckets after the first (which is the zero bucket), and one for the
// observations above the last bound, if any.
func nativeBuckets(cum []uint64, count uint64) int {
	n := len(cum) - 1
	if count > cum[len(cum)-1] {
		n++
	}
	return n
}

// nativeCount is the count of native bucket k (1 ≤ k ≤ nativeBuckets):
// classic bucket k, or the observations above the last bound.
func nativeCount(cum []uint64, count uint64, k int) int64 {
	if k == len(cum) {
		return int64(count - cum[k-1])
	}
	return int64(cum[k] - cum[k-1])
}

// deltasSize is the size of the packed positive_delta payload: each
// native bucket's count minus the one before (the first minus zero).
func deltasSize(cum []uint64, count uint64) int {
	n, prev := 0, int64(0)
	for k := 1; k <= nativeBuckets(cum, count); k++ {
		c := nativeCount(cum, count, k)
		n += sizeVarint(zigzag64(c - prev))
		prev = c
	}
	return n
}

func (b *buffer) appendMetric(f *collector.Family, i int) {
	b.values = f.AppendLabelValues(b.values[:0], i)
	for j, v := range b.values {
		name, v := f.LabelNames[j], validUTF8(v)
		b.buf = append(b.buf, tagMetricLabel)
		b.buf = appendVarint(b.buf, uint64(sizeBytes(len(name))+sizeBytes(len(v))))
		b.buf = appendString(b.buf, tagLabelName, name)
		b.buf = appendString(b.buf, tagLabelValue, v)
	}
	switch f.Kind {
	case collector.KindCounter:
		b.buf = append(b.buf, tagMetricCounter, 9)
		b.buf = appendFixed64(b.buf, tagValue, f.Value(i))
	case collector.KindGauge:
		b.buf = append(b.buf, tagMetricGauge, 9)
		b.buf = appendFixed64(b.buf, tagValue, f.Value(i))
	case collector.KindHistogram:
		b.buf = append(b.buf, tagMetricHistogram)
		at := b.beginLen()
		b.appendHistogram(f, i)
		b.endLen(at)
	}
}

func (b *buffer) appendHistogram(f *collector.Family, i int) {
	cum, count, sum := f.Histogram(i)
	b.buf = append(b.buf, tagSampleCount)
	b.buf = appendVarint(b.buf, count)
	b.buf = appendFixed64(b.buf, tagSampleSum, sum)
	for k, c := range cum {
		b.buf = append(b.buf, tagBucket, byte(1+sizeVarint(c)+9), tagCumulativeCount)
		b.buf = appendVarint(b.buf, c)
		b.buf = appendFixed64(b.buf, tagUpperBound, f.Upper[k])
	}
	l := f.Native
	if l == nil {
		return
	}
	b.buf = append(b.buf, tagSchema)
	b.buf = appendVarint(b.buf, zigzag32(l.Schema))
	b.buf = appendFixed64(b.buf, tagZeroThreshold, l.ZeroThreshold)
	b.buf = append(b.buf, tagZeroCount)
	b.buf = appendVarint(b.buf, cum[0])
	nb := nativeBuckets(cum, count)
	b.buf = append(b.buf, tagPositiveSpan, byte(spanSize(l, cum, count)), tagSpanOffset)
	b.buf = appendVarint(b.buf, zigzag32(l.Index[1]))
	b.buf = append(b.buf, tagSpanLength)
	b.buf = appendVarint(b.buf, uint64(nb))
	b.buf = append(b.buf, tagPositiveDelta)
	b.buf = appendVarint(b.buf, uint64(deltasSize(cum, count)))
	prev := int64(0)
	for k := 1; k <= nb; k++ {
		c := nativeCount(cum, count, k)
		b.buf = appendVarint(b.buf, zigzag64(c-prev))
		prev = c
	}
}

// beginLen reserves one byte for the length of the message about to be
// appended, and returns where it is.
func (b *buffer) beginLen() int {
	b.buf = append(b.buf, 0)
	return len(b.buf)
}

// endLen writes the length of the message appended since beginLen
// returned at. A message of 128 bytes or more needs a longer varint: the
// message is moved up to make room. Most series are smaller, so the write
// pass does not compute sizes again.
func (b *buffer) endLen(at int) {
	n := len(b.buf) - at
	if n < 0x80 {
		b.buf[at-1] = byte(n)
		return
	}
	extra := sizeVarint(uint64(n)) - 1
	b.buf = append(b.buf, make([]byte, extra)...)
	copy(b.buf[at+extra:], b.buf[at:at+n])
	appendVarint(b.buf[:at-1], uint64(n))
}
