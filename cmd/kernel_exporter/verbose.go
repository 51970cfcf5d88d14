// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/kernel-exporter/kernel_exporter/collector"
)

// printLayouts writes, for --config.check --verbose, each metric's key
// layout: one line per metric, then one per label field, e.g.
//
//	kernel_btfl_calls_total (map btfl_calls_total, 24-byte key): labels inferred from BTF
//	  comm     off  0 size 16  string
//	  pid      off 16 size  4  uint
//	  call     off 20 size  1  uint,static_map
//
// A histogram's bucket field is listed last, with no decoders; a
// histogram with slots_in_value says how many slots its values hold. Names come
// from the config or from the object's BTF, which the operator runs
// anyway, and are printed as they are.
func printLayouts(w io.Writer, layouts []collector.MetricLayout) {
	for _, m := range layouts {
		src := "labels from the config"
		if m.Inferred {
			src = "labels inferred from BTF"
		}
		fmt.Fprintf(w, "      %s (map %s, %d-byte key): %s\n", m.Name, m.MapName, m.KeySize, src)
		if m.ValueSlots > 0 {
			fmt.Fprintf(w, "        (slots in the value: %d u64 counts)\n", m.ValueSlots)
		}
		width := 0
		for _, l := range m.Labels {
			width = max(width, len(l.Name))
		}
		for _, l := range m.Labels {
			dec := strings.Join(l.Decoders, ",")
			if dec == "" {
				dec = "(bucket slot)"
			}
			fmt.Fprintf(w, "        %-*s off %3d size %3d  %s\n", width, l.Name, l.Off, l.Size, dec)
		}
	}
}
