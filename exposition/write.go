// SPDX-License-Identifier: Apache-2.0

package exposition

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/kernel-exporter/kernel_exporter/collector"
)

// Write writes one exposition in format f (text, OpenMetrics or delimited
// protobuf, as Negotiate returns) to w: first the gathered families,
// encoded by expfmt, then every family of every snapshot in order, then
// for OpenMetrics a single "# EOF" line. A family with Err set, or with no
// series, is skipped: the caller reports the error. Bytes reach w in
// chunks of about 32 KiB.
//
// It returns an error for an unsupported format, a gathered family that
// expfmt cannot encode, or the first error of w; the output is then cut
// short.
func Write(w io.Writer, f expfmt.Format, gathered []*dto.MetricFamily, snaps []*collector.Snapshot) error {
	var family func(*buffer, *collector.Family) error
	switch f.FormatType() {
	case expfmt.TypeTextPlain:
		family = writeTextFamily
	case expfmt.TypeOpenMetrics:
		family = writeOpenMetricsFamily
	case expfmt.TypeProtoDelim:
		family = writeProtoFamily
	default:
		return fmt.Errorf("exposition: unsupported format %q", f)
	}
	b := getBuffer(w)
	defer putBuffer(b)

	enc := expfmt.NewEncoder(b, f)
	for _, mf := range gathered {
		if err := enc.Encode(mf); err != nil {
			return fmt.Errorf("exposition: encoding gathered family %s: %w", mf.GetName(), err)
		}
	}
	for _, s := range snaps {
		for _, fam := range s.Families {
			if fam.Err != nil || fam.Len() == 0 {
				continue
			}
			if err := family(b, fam); err != nil {
				return fmt.Errorf("exposition: writing %s of config %s: %w", fam.Name, s.Config, err)
			}
		}
	}
	if f.FormatType() == expfmt.TypeOpenMetrics {
		b.buf = append(b.buf, "# EOF\n"...)
	}
	if err := b.flush(); err != nil {
		return fmt.Errorf("exposition: %w", err)
	}
	return nil
}

// validUTF8 returns s, or s with each run of invalid UTF-8 bytes replaced
// by U+FFFD (allocating only then).
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
