// SPDX-License-Identifier: Apache-2.0

package exposition

import (
	"math"
	"strconv"
	"strings"

	"github.com/kernel-exporter/kernel_exporter/collector"
)

// The text format 0.0.4 and OpenMetrics 1.0.0 differ here in: the family
// name of a counter (OpenMetrics drops its _total suffix, and calls a
// counter without one "unknown"), the escaping of quotes in HELP, and the
// formatting of numbers (OpenMetrics writes floats with a ".0" when they
// have no fraction, and counts as integers). Sample lines are otherwise the
// same; both follow what expfmt writes for the same dto.MetricFamily.

func writeTextFamily(b *buffer, f *collector.Family) error {
	return writeLines(b, f, false)
}

func writeOpenMetricsFamily(b *buffer, f *collector.Family) error {
	return writeLines(b, f, true)
}

func writeLines(b *buffer, f *collector.Family, om bool) error {
	writeHeader(b, f, om)
	if f.Kind == collector.KindHistogram {
		return writeHistogramLines(b, f, om)
	}
	for i := 0; i < f.Len(); i++ {
		b.values = f.AppendLabelValues(b.values[:0], i)
		b.labels = appendLabels(b.labels[:0], f.LabelNames, b.values)
		b.sampleName(f.Name, "")
		b.buf = appendValue(b.buf, f.Value(i), om)
		b.buf = append(b.buf, '\n')
		if err := b.check(); err != nil {
			return err
		}
	}
	return nil
}

// writeHeader writes the HELP and TYPE lines of f.
func writeHeader(b *buffer, f *collector.Family, om bool) {
	name, typ := f.Name, ""
	switch f.Kind {
	case collector.KindCounter:
		typ = "counter"
		if om {
			if n, ok := strings.CutSuffix(name, "_total"); ok {
				name = n
			} else {
				typ = "unknown"
			}
		}
	case collector.KindGauge:
		typ = "gauge"
	case collector.KindHistogram:
		typ = "histogram"
	}
	b.buf = append(b.buf, "# HELP "...)
	b.buf = append(b.buf, name...)
	b.buf = append(b.buf, ' ')
	b.buf = appendEscaped(b.buf, validUTF8(f.Help), om)
	b.buf = append(b.buf, "\n# TYPE "...)
	b.buf = append(b.buf, name...)
	b.buf = append(b.buf, ' ')
	b.buf = append(b.buf, typ...)
	b.buf = append(b.buf, '\n')
}

func writeHistogramLines(b *buffer, f *collector.Family, om bool) error {
	// The le="…" pairs of the bounds, formatted once for the family.
	b.le, b.leEnd = b.le[:0], b.leEnd[:0]
	for _, u := range f.Upper {
		b.le = append(b.le, `le="`...)
		b.le = appendValue(b.le, u, om)
		b.le = append(b.le, '"')
		b.leEnd = append(b.leEnd, len(b.le))
	}
	for i := 0; i < f.Len(); i++ {
		b.values = f.AppendLabelValues(b.values[:0], i)
		b.labels = appendLabels(b.labels[:0], f.LabelNames, b.values)
		cum, count, sum := f.Histogram(i)
		start := 0
		for k, c := range cum {
			b.bucketPrefix(f.Name)
			b.buf = append(b.buf, b.le[start:b.leEnd[k]]...)
			start = b.leEnd[k]
			b.buf = append(b.buf, "} "...)
			b.buf = appendCount(b.buf, c, om)
			b.buf = append(b.buf, '\n')
		}
		b.bucketPrefix(f.Name)
		b.buf = append(b.buf, `le="+Inf"} `...)
		b.buf = appendCount(b.buf, count, om)
		b.buf = append(b.buf, '\n')

		b.sampleName(f.Name, "_sum")
		b.buf = appendValue(b.buf, sum, om)
		b.buf = append(b.buf, '\n')
		b.sampleName(f.Name, "_count")
		b.buf = appendCount(b.buf, count, om)
		b.buf = append(b.buf, '\n')
		if err := b.check(); err != nil {
			return err
		}
	}
	return nil
}

// bucketPrefix appends `name_bucket{labels,` (the comma only after labels).
func (b *buffer) bucketPrefix(name string) {
	b.buf = append(b.buf, name...)
	b.buf = append(b.buf, "_bucket{"...)
	if len(b.labels) > 0 {
		b.buf = append(b.buf, b.labels...)
		b.buf = append(b.buf, ',')
	}
}

// sampleName appends `name+suffix{labels} ` (no braces without labels).
func (b *buffer) sampleName(name, suffix string) {
	b.buf = append(b.buf, name...)
	b.buf = append(b.buf, suffix...)
	if len(b.labels) > 0 {
		b.buf = append(b.buf, '{')
		b.buf = append(b.buf, b.labels...)
		b.buf = append(b.buf, '}')
	}
	b.buf = append(b.buf, ' ')
}

// appendLabels appends `n1="v1",n2="v2"`, values escaped and made valid
// UTF-8.
func appendLabels(dst []byte, names, values []string) []byte {
	for j, v := range values {
		if j > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, names[j]...)
		dst = append(dst, '=', '"')
		dst = appendEscaped(dst, validUTF8(v), true)
		dst = append(dst, '"')
	}
	return dst
}

// appendEscaped appends s with `\` and newline escaped, and `"` too when
// quote is set (label values, and OpenMetrics HELP).
func appendEscaped(dst []byte, s string, quote bool) []byte {
	start := 0
	for i := 0; i < len(s); i++ {
		var esc string
		switch s[i] {
		case '\\':
			esc = `\\`
		case '\n':
			esc = `\n`
		case '"':
			if !quote {
				continue
			}
			esc = `\"`
		default:
			continue
		}
		dst = append(dst, s[start:i]...)
		dst = append(dst, esc...)
		start = i + 1
	}
	return append(dst, s[start:]...)
}

// appendValue appends a sample value or bound as OpenMetrics (om) or the
// text format writes it.
func appendValue(dst []byte, f float64, om bool) []byte {
	if om {
		return appendOpenMetricsFloat(dst, f)
	}
	return appendFloat(dst, f)
}

// appendCount appends a bucket count or sample count: an integer in
// OpenMetrics, a float in the text format.
func appendCount(dst []byte, c uint64, om bool) []byte {
	if om {
		return strconv.AppendUint(dst, c, 10)
	}
	return appendFloat(dst, float64(c))
}

// appendFloat appends f as the text format writes it: the shortest 'g'
// representation, +Inf, -Inf or NaN. Integers below 1e6 in magnitude,
// which 'g' writes as plain digits, take a faster path.
func appendFloat(dst []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, "NaN"...)
	case math.IsInf(f, +1):
		return append(dst, "+Inf"...)
	case math.IsInf(f, -1):
		return append(dst, "-Inf"...)
	case f > -1e6 && f < 1e6 && f == math.Trunc(f):
		return strconv.AppendInt(dst, int64(f), 10)
	}
	return strconv.AppendFloat(dst, f, 'g', -1, 64)
}

// appendOpenMetricsFloat appends f as OpenMetrics writes it: like
// appendFloat, with ".0" added when the number has neither a fraction nor
// an exponent.
func appendOpenMetricsFloat(dst []byte, f float64) []byte {
	n := len(dst)
	dst = appendFloat(dst, f)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return dst
	}
	for _, c := range dst[n:] {
		if c == 'e' || c == '.' {
			return dst
		}
	}
	return append(dst, '.', '0')
}
