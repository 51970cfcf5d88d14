// SPDX-License-Identifier: Apache-2.0

package exposition

import (
	"bytes"
	"math"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/protobuf/proto"

	"github.com/kernel-exporter/kernel_exporter/collector"
)

func TestTextMatchesExpfmt(t *testing.T) {
	for _, f := range testFamilies() {
		got := write(t, expfmt.FmtText, nil, f)
		want := expfmtBytes(t, toText, f)
		if !bytes.Equal(got, want) {
			t.Errorf("%s: text differs from expfmt's\ngot:\n%s\nwant:\n%s", f.Name, got, want)
		}
	}
}

func TestOpenMetricsMatchesExpfmt(t *testing.T) {
	for _, f := range testFamilies() {
		got := write(t, expfmt.FmtOpenMetrics_1_0_0, nil, f)
		want := append(expfmtBytes(t, toOpenMetrics, f), "# EOF\n"...)
		if !bytes.Equal(got, want) {
			t.Errorf("%s: OpenMetrics differs from expfmt's\ngot:\n%s\nwant:\n%s", f.Name, got, want)
		}
	}
}

// parsedForm is what the text parser returns for toDTO(f): histograms
// gain their +Inf bucket.
func parsedForm(f *collector.Family) *dto.MetricFamily {
	mf := toDTO(f, false)
	for _, m := range mf.Metric {
		if h := m.Histogram; h != nil {
			h.Bucket = append(h.Bucket, &dto.Bucket{
				CumulativeCount: proto.Uint64(h.GetSampleCount()),
				UpperBound:      proto.Float64(math.Inf(1)),
			})
		}
	}
	return mf
}

func TestTextParsesBack(t *testing.T) {
	fams := testFamilies()
	out := write(t, expfmt.FmtText, nil, fams...)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	parsed, err := parser.TextToMetricFamilies(bytes.NewReader(out))
	if err != nil {
		t.Fatalf("parsing our text: %v\n%s", err, out)
	}
	if len(parsed) != len(fams) {
		t.Errorf("parsed %d families, want %d", len(parsed), len(fams))
	}
	for _, f := range fams {
		got, want := parsed[f.Name], parsedForm(f)
		if !proto.Equal(got, want) {
			t.Errorf("%s parsed back as\n%v\nwant\n%v", f.Name, got, want)
		}
	}
}

func TestFloatFormatting(t *testing.T) {
	for _, c := range []struct {
		f        float64
		text, om string
	}{
		{0, "0", "0.0"},
		{math.Copysign(0, -1), "0", "0.0"},
		{1, "1", "1.0"},
		{-1, "-1", "-1.0"},
		{42, "42", "42.0"},
		{999999, "999999", "999999.0"},
		{-999999, "-999999", "-999999.0"},
		{1e6, "1e+06", "1e+06"},
		{1234567, "1.234567e+06", "1.234567e+06"},
		{0.5, "0.5", "0.5"},
		{1e-7, "1e-07", "1e-07"},
		{math.NaN(), "NaN", "NaN"},
		{math.Inf(1), "+Inf", "+Inf"},
		{math.Inf(-1), "-Inf", "-Inf"},
	} {
		if got := string(appendFloat(nil, c.f)); got != c.text {
			t.Errorf("appendFloat(%v) = %q, want %q", c.f, got, c.text)
		}
		if got := string(appendOpenMetricsFloat(nil, c.f)); got != c.om {
			t.Errorf("appendOpenMetricsFloat(%v) = %q, want %q", c.f, got, c.om)
		}
	}
}

func TestEscaping(t *testing.T) {
	f := collector.NewFamily("esc_total", "h\\e\"l\np", collector.KindCounter, []string{"v"}, nil,
		[]collector.SeriesData{{Labels: []string{"a\"b\\c\nd\xffe"}, Value: 1}})
	text := string(write(t, expfmt.FmtText, nil, f))
	want := "# HELP esc_total h\\\\e\"l\\np\n# TYPE esc_total counter\n" +
		"esc_total{v=\"a\\\"b\\\\c\\nd\uFFFDe\"} 1\n"
	if text != want {
		t.Errorf("text:\n%q\nwant\n%q", text, want)
	}
	om := string(write(t, expfmt.FmtOpenMetrics_1_0_0, nil, f))
	want = "# HELP esc h\\\\e\\\"l\\np\n# TYPE esc counter\n" +
		"esc_total{v=\"a\\\"b\\\\c\\nd\uFFFDe\"} 1.0\n# EOF\n"
	if om != want {
		t.Errorf("OpenMetrics:\n%q\nwant\n%q", om, want)
	}
}

func TestSkipsFailedAndEmptyFamilies(t *testing.T) {
	failed := collector.NewFamily("failed_total", "Failed.", collector.KindCounter, nil, nil,
		[]collector.SeriesData{{Value: 1}})
	failed.Err = errTest
	empty := collector.NewFamily("empty_total", "Empty.", collector.KindCounter, nil, nil, nil)
	ok := collector.NewFamily("ok_total", "OK.", collector.KindCounter, nil, nil, []collector.SeriesData{{Value: 3}})
	for _, f := range []expfmt.Format{expfmt.FmtText, expfmt.FmtOpenMetrics_1_0_0} {
		out := string(write(t, f, nil, failed, empty, ok))
		if strings.Contains(out, "failed") || strings.Contains(out, "empty") || !strings.Contains(out, "ok_total") {
			t.Errorf("%s: output\n%s\nwant only ok_total", f, out)
		}
	}
	fams := decodeProto(t, write(t, expfmt.NewFormat(expfmt.TypeProtoDelim), nil, failed, empty, ok))
	if len(fams) != 1 || fams[0].GetName() != "ok_total" {
		t.Errorf("protobuf families %v, want only ok_total", fams)
	}
}
