// SPDX-License-Identifier: Apache-2.0

package exposition

import (
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/proto"

	"github.com/kernel-exporter/kernel_exporter/collector"
)

var fmtProtoDelim = expfmt.NewFormat(expfmt.TypeProtoDelim)

func TestProtobufDecodesToExpected(t *testing.T) {
	fams := testFamilies()
	got := decodeProto(t, write(t, fmtProtoDelim, nil, fams...))
	if len(got) != len(fams) {
		t.Fatalf("decoded %d families, want %d", len(got), len(fams))
	}
	for i, f := range fams {
		if want := toDTO(f, true); !proto.Equal(got[i], want) {
			t.Errorf("%s decoded as\n%v\nwant\n%v", f.Name, got[i], want)
		}
	}
}

// TestProtobufNativeHistogram checks the native fields of a power-of-two
// layout against values worked out by hand.
func TestProtobufNativeHistogram(t *testing.T) {
	upper := []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}
	// Per bucket: 3 in [0,1], then 0, 5, 5, 1, 0, 0, 0, 0, 0, 2; 4 above 1024.
	cum := []uint64{3, 3, 8, 13, 14, 14, 14, 14, 14, 14, 16}
	f := collector.NewFamily("io_latency_seconds", "Latency.", collector.KindHistogram, []string{"dev"}, upper,
		[]collector.SeriesData{{Labels: []string{"sda"}, Cum: cum, Count: 20, Sum: 3000.5}})
	if f.Native == nil {
		t.Fatal("no native layout for power-of-two bounds")
	}
	got := decodeProto(t, write(t, fmtProtoDelim, nil, f))
	if len(got) != 1 || len(got[0].Metric) != 1 {
		t.Fatalf("decoded %v, want one family of one metric", got)
	}
	h := got[0].Metric[0].GetHistogram()
	if h.GetSchema() != 0 || h.Schema == nil {
		t.Errorf("schema %v, want 0 (set)", h.Schema)
	}
	if h.GetZeroThreshold() != 1 || h.GetZeroCount() != 3 {
		t.Errorf("zero bucket threshold %v count %d, want 1 and 3", h.GetZeroThreshold(), h.GetZeroCount())
	}
	// 2 = 2^1 is the upper bound of schema 0 index 1; 1024 of index 10;
	// the 4 above 1024 are index 11, so that the buckets add up to the
	// count, as Prometheus requires.
	wantSpan := []*dto.BucketSpan{{Offset: proto.Int32(1), Length: proto.Uint32(11)}}
	if len(h.PositiveSpan) != 1 || !proto.Equal(h.PositiveSpan[0], wantSpan[0]) {
		t.Errorf("positive spans %v, want %v", h.PositiveSpan, wantSpan)
	}
	wantDelta := []int64{0, 5, 0, -4, -1, 0, 0, 0, 0, 2, 2}
	var sum uint64 = h.GetZeroCount()
	var run int64
	for _, d := range h.PositiveDelta {
		run += d
		sum += uint64(run)
	}
	if sum != h.GetSampleCount() {
		t.Errorf("native buckets add up to %d, want the count %d", sum, h.GetSampleCount())
	}
	if len(h.PositiveDelta) != len(wantDelta) {
		t.Fatalf("positive deltas %v, want %v", h.PositiveDelta, wantDelta)
	}
	for i := range wantDelta {
		if h.PositiveDelta[i] != wantDelta[i] {
			t.Errorf("positive deltas %v, want %v", h.PositiveDelta, wantDelta)
			break
		}
	}
	if h.GetSampleCount() != 20 || h.GetSampleSum() != 3000.5 || len(h.Bucket) != len(upper) {
		t.Errorf("count %d sum %v buckets %d, want 20, 3000.5, %d", h.GetSampleCount(), h.GetSampleSum(), len(h.Bucket), len(upper))
	}
	if len(h.NegativeSpan) != 0 || len(h.NegativeDelta) != 0 {
		t.Errorf("negative buckets %v %v, want none", h.NegativeSpan, h.NegativeDelta)
	}
}

// TestProtobufLargeFamily checks that a family whose message needs a
// multi-byte length (and series sizes that vary) decodes as one message.
func TestProtobufLargeFamily(t *testing.T) {
	data := make([]collector.SeriesData, 20000)
	for i := range data {
		data[i] = collector.SeriesData{Labels: []string{string(make([]byte, i%300)), "b"}, Value: float64(i)}
	}
	f := collector.NewFamily("large_total", "Large.", collector.KindCounter, []string{"a", "b"}, nil, data)
	got := decodeProto(t, write(t, fmtProtoDelim, nil, f))
	if len(got) != 1 || !proto.Equal(got[0], toDTO(f, true)) {
		t.Errorf("large family did not decode to one equal message (%d families)", len(got))
	}
}
