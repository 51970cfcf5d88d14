// SPDX-License-Identifier: Apache-2.0

package exposition

import (
	"bytes"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/kernel-exporter/kernel_exporter/collector"
)

var errTest = errors.New("test error")

// gather returns the families of a registry holding one counter and one
// histogram, as the exporter's own metrics would be.
func gather(t *testing.T) []*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "self_scrapes_total", Help: "Scrapes."}, []string{"code"})
	c.WithLabelValues("200").Add(3)
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "self_read_seconds", Help: "Reads.", Buckets: []float64{0.1, 1}})
	h.Observe(0.5)
	reg.MustRegister(c, h)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}

func snapshots() []*collector.Snapshot {
	fams := testFamilies()
	return []*collector.Snapshot{
		{Config: "one", Families: fams[:3]},
		{Config: "two", Families: fams[3:]},
	}
}

func TestWriteTextWhole(t *testing.T) {
	var buf bytes.Buffer
	if err := Write(&buf, expfmt.FmtText, gather(t), snapshots()); err != nil {
		t.Fatal(err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	parsed, err := parser.TextToMetricFamilies(&buf)
	if err != nil {
		t.Fatalf("parsing Write's text: %v", err)
	}
	want := []string{"self_scrapes_total", "self_read_seconds"}
	for _, f := range testFamilies() {
		want = append(want, f.Name)
	}
	if len(parsed) != len(want) {
		t.Errorf("parsed %d families, want %d", len(parsed), len(want))
	}
	for _, name := range want {
		if parsed[name] == nil {
			t.Errorf("family %s missing", name)
		}
	}
	if v := parsed["self_scrapes_total"].Metric[0].Counter.GetValue(); v != 3 {
		t.Errorf("self_scrapes_total = %v, want 3", v)
	}
}

func TestWriteOpenMetricsWhole(t *testing.T) {
	var buf bytes.Buffer
	if err := Write(&buf, expfmt.FmtOpenMetrics_1_0_0, gather(t), snapshots()); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if n := strings.Count(out, "# EOF"); n != 1 {
		t.Errorf("%d # EOF lines, want 1", n)
	}
	if !strings.HasSuffix(out, "\n# EOF\n") {
		t.Errorf("output does not end with # EOF:\n%s", out[max(0, len(out)-200):])
	}
	if !strings.HasPrefix(out, "# HELP self_read_seconds Reads.\n# TYPE self_read_seconds histogram\n") {
		t.Errorf("output does not start with the gathered histogram (Gather sorts):\n%s", out[:min(len(out), 200)])
	}
}

func TestWriteProtobufWhole(t *testing.T) {
	var buf bytes.Buffer
	gathered := gather(t)
	if err := Write(&buf, expfmt.NewFormat(expfmt.TypeProtoDelim), gathered, snapshots()); err != nil {
		t.Fatal(err)
	}
	fams := decodeProto(t, buf.Bytes())
	want := []string{"self_read_seconds", "self_scrapes_total"} // Gather sorts
	for _, f := range testFamilies() {
		want = append(want, f.Name)
	}
	if len(fams) != len(want) {
		t.Fatalf("decoded %d families, want %d", len(fams), len(want))
	}
	for i, mf := range fams {
		if mf.GetName() != want[i] {
			t.Errorf("family %d is %s, want %s", i, mf.GetName(), want[i])
		}
	}
}

func TestWriteUnsupportedFormat(t *testing.T) {
	err := Write(&bytes.Buffer{}, expfmt.NewFormat(expfmt.TypeProtoText), nil, snapshots())
	if err == nil {
		t.Fatal("Write in the protobuf text format succeeded, want an error")
	}
}

// failWriter accepts n bytes, then fails.
type failWriter struct {
	n, written, calls int
}

func (w *failWriter) Write(p []byte) (int, error) {
	w.calls++
	if w.written+len(p) > w.n {
		return 0, errTest
	}
	w.written += len(p)
	return len(p), nil
}

func TestWriteStopsOnWriterError(t *testing.T) {
	data := make([]collector.SeriesData, 100000)
	for i := range data {
		data[i] = collector.SeriesData{Labels: []string{"x"}, Value: float64(i)}
	}
	big := collector.NewFamily("big_total", "Big.", collector.KindCounter, []string{"l"}, nil, data)
	for _, f := range []expfmt.Format{expfmt.FmtText, expfmt.FmtOpenMetrics_1_0_0, expfmt.NewFormat(expfmt.TypeProtoDelim)} {
		w := &failWriter{n: 100 << 10}
		err := Write(w, f, nil, []*collector.Snapshot{{Config: "c", Families: []*collector.Family{big, big}}})
		if !errors.Is(err, errTest) {
			t.Errorf("%s: Write returned %v, want the writer's error", f, err)
		}
		if w.calls > 5 {
			t.Errorf("%s: %d writes after the writer failed, want Write to stop", f, w.calls)
		}
	}
}

func TestWriteChunks(t *testing.T) {
	data := make([]collector.SeriesData, 50000)
	for i := range data {
		data[i] = collector.SeriesData{Labels: []string{"some-label-value"}, Value: float64(i)}
	}
	big := collector.NewFamily("big_total", "Big.", collector.KindCounter, []string{"l"}, nil, data)
	w := &chunkWriter{}
	if err := Write(w, expfmt.FmtText, nil, []*collector.Snapshot{{Config: "c", Families: []*collector.Family{big}}}); err != nil {
		t.Fatal(err)
	}
	if w.max > 64<<10 || w.calls < 10 {
		t.Errorf("%d writes, the largest %d bytes: want many chunks of at most 64 KiB", w.calls, w.max)
	}
}

type chunkWriter struct{ calls, max int }

func (w *chunkWriter) Write(p []byte) (int, error) {
	w.calls++
	w.max = max(w.max, len(p))
	return len(p), nil
}

func TestNegotiate(t *testing.T) {
	for _, c := range []struct {
		accept string
		want   expfmt.FormatType
	}{
		{"", expfmt.TypeTextPlain},
		{"text/plain;version=0.0.4", expfmt.TypeTextPlain},
		{"application/openmetrics-text;version=1.0.0;q=0.9,text/plain;q=0.5", expfmt.TypeOpenMetrics},
		{"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.7,text/plain;version=0.0.4;q=0.3", expfmt.TypeProtoDelim},
		{"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=text", expfmt.TypeTextPlain},
	} {
		h := http.Header{}
		if c.accept != "" {
			h.Set("Accept", c.accept)
		}
		if got := Negotiate(h).FormatType(); got != c.want {
			t.Errorf("Negotiate(Accept: %q) = %v, want %v", c.accept, got, c.want)
		}
	}
	h := http.Header{"Accept": {"application/openmetrics-text;version=1.0.0"}}
	if got := Negotiate(h); !strings.HasPrefix(string(got), string(expfmt.FmtOpenMetrics_1_0_0)) {
		t.Errorf("Negotiate(OpenMetrics 1.0.0) = %q", got)
	}
}
