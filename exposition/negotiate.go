// SPDX-License-Identifier: Apache-2.0

package exposition

import (
	"net/http"

	"github.com/prometheus/common/expfmt"
)

// Negotiate returns the format to answer a request with headers h, chosen
// from its Accept header as expfmt.NegotiateIncludingOpenMetrics chooses
// (text 0.0.4, OpenMetrics or delimited protobuf, with the name escaping
// scheme asked for). The protobuf text encodings, which Write does not
// produce, fall back to the text format. The result is also the response's
// Content-Type.
func Negotiate(h http.Header) expfmt.Format {
	f := expfmt.NegotiateIncludingOpenMetrics(h)
	switch f.FormatType() {
	case expfmt.TypeTextPlain, expfmt.TypeOpenMetrics, expfmt.TypeProtoDelim:
		return f
	}
	return expfmt.FmtText.WithEscapingScheme(f.ToEscapingScheme())
}
