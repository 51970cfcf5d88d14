// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"
	"testing"

	"github.com/kernel-exporter/kernel_exporter/collector"
)

// TestPrintLayouts checks --config.check --verbose's lines: one per
// metric saying where its labels come from, one per label with its byte
// offset, size and decoders, the bucket last.
func TestPrintLayouts(t *testing.T) {
	var b strings.Builder
	printLayouts(&b, []collector.MetricLayout{
		{Name: "kernel_bio_latency_seconds", MapName: "bio_latency_seconds", KeySize: 12, Inferred: true, Labels: []collector.LabelLayout{
			{Name: "device", Off: 0, Size: 4, Decoders: []string{"majorminor"}},
			{Name: "operation", Off: 4, Size: 1, Decoders: []string{"uint", "static_map"}},
			{Name: "bucket", Off: 8, Size: 4},
		}},
		{Name: "kernel_x_total", MapName: "x_total", KeySize: 4, Labels: []collector.LabelLayout{{Name: "cpu", Size: 4, Decoders: []string{"uint"}}}},
	})
	want := `      kernel_bio_latency_seconds (map bio_latency_seconds, 12-byte key): labels inferred from BTF
        device    off   0 size   4  majorminor
        operation off   4 size   1  uint,static_map
        bucket    off   8 size   4  (bucket slot)
      kernel_x_total (map x_total, 4-byte key): labels from the config
        cpu off   0 size   4  uint
`
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
}
