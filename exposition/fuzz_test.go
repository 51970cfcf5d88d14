// SPDX-License-Identifier: Apache-2.0

package exposition

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/kernel-exporter/kernel_exporter/collector"
)

// FuzzExpositionLabels writes a gauge and a histogram whose label value and
// value are arbitrary, in the text and protobuf formats, and parses them
// back with expfmt: the label value must come back as the input made valid
// UTF-8, and the values unchanged. The OpenMetrics output must end with its
// one "# EOF".
func FuzzExpositionLabels(f *testing.F) {
	f.Add([]byte("plain"), 1.5)
	f.Add([]byte(`q"uo\te`+"\n"), -0.0)
	f.Add([]byte("\xff\xfe bad \xc3"), math.Inf(1))
	f.Add([]byte("unicodé ☃"), math.NaN())
	f.Add([]byte{}, 1e21)
	f.Fuzz(func(t *testing.T, label []byte, value float64) {
		want := strings.ToValidUTF8(string(label), "\uFFFD")
		gauge := collector.NewFamily("fuzz_value", "Fuzzed.", collector.KindGauge, []string{"l", "m"}, nil,
			[]collector.SeriesData{{Labels: []string{string(label), "x"}, Value: value}})
		hist := collector.NewFamily("fuzz_seconds", "Fuzzed.", collector.KindHistogram, []string{"l"}, []float64{1, 2},
			[]collector.SeriesData{{Labels: []string{string(label)}, Cum: []uint64{1, 2}, Count: 3, Sum: value}})
		snaps := []*collector.Snapshot{{Config: "fuzz", Families: []*collector.Family{gauge, hist}}}
		same := func(got float64) bool { return got == value || math.IsNaN(got) && math.IsNaN(value) }

		var text bytes.Buffer
		if err := Write(&text, expfmt.FmtText, nil, snaps); err != nil {
			t.Fatal(err)
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		parsed, err := parser.TextToMetricFamilies(&text)
		if err != nil {
			t.Fatalf("parsing text: %v", err)
		}
		g := parsed["fuzz_value"]
		if g == nil || len(g.Metric) != 1 {
			t.Fatalf("text: gauge family %v, want one metric", g)
		}
		if lv := g.Metric[0].Label[0].GetValue(); lv != want {
			t.Errorf("text: label value %q, want %q", lv, want)
		}
		if v := g.Metric[0].GetGauge().GetValue(); !same(v) {
			t.Errorf("text: value %v, want %v", v, value)
		}
		h := parsed["fuzz_seconds"]
		if h == nil || len(h.Metric) != 1 || h.Metric[0].Label[0].GetValue() != want || !same(h.Metric[0].GetHistogram().GetSampleSum()) {
			t.Errorf("text: histogram %v, want label %q and sum %v", h, want, value)
		}

		var pb bytes.Buffer
		if err := Write(&pb, fmtProtoDelim, nil, snaps); err != nil {
			t.Fatal(err)
		}
		fams := decodeProto(t, pb.Bytes())
		if len(fams) != 2 || len(fams[0].Metric) != 1 || len(fams[1].Metric) != 1 {
			t.Fatalf("protobuf: decoded %v, want two families of one metric", fams)
		}
		if lv := fams[0].Metric[0].Label[0].GetValue(); lv != want {
			t.Errorf("protobuf: label value %q, want %q", lv, want)
		}
		if v := fams[0].Metric[0].GetGauge().GetValue(); !same(v) && !(v == 0 && value == 0) {
			t.Errorf("protobuf: value %v, want %v", v, value)
		}
		if lv := fams[1].Metric[0].Label[0].GetValue(); lv != want {
			t.Errorf("protobuf: histogram label value %q, want %q", lv, want)
		}

		var om bytes.Buffer
		if err := Write(&om, expfmt.FmtOpenMetrics_1_0_0, nil, snaps); err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(om.String(), "\n# EOF"); n != 1 || !strings.HasSuffix(om.String(), "\n# EOF\n") {
			t.Errorf("OpenMetrics: %d # EOF lines, want one, last", n)
		}
	})
}
