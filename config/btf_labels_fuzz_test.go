// SPDX-License-Identifier: Apache-2.0

package config

import (
	"bytes"
	"strings"
	"testing"

	"github.com/cilium/ebpf/btf"
)

// FuzzLabelsFromBTF feeds raw BTF (the .BTF section of an object, which
// comes from outside like the YAML) to LabelsFromBTF and CheckKeyLabels: every type the
// parser accepts, as a counter's key and as a histogram's, with the key
// size the type claims and one byte more. It must never panic; labels
// returned lie inside the key and cover it exactly, and errors name the
// file. The ELF-level fuzz target (loader.FuzzParseObject) stops at the
// parsed spec, so this is what covers inference.
func FuzzLabelsFromBTF(f *testing.F) {
	for _, types := range [][]btf.Type{{btflKey}, {btflHist}, {btfCall}, {btfU32T}} {
		b, err := btf.NewBuilder(types, nil)
		if err != nil {
			f.Fatal(err)
		}
		raw, err := b.Marshal(nil, nil)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		spec, err := btf.LoadSpecFromReader(bytes.NewReader(data))
		if err != nil {
			return
		}
		c := &Config{File: "fuzz.yaml"}
		n := 0
		for typ, err := range spec.All() {
			if err != nil || n > 64 {
				break
			}
			n++
			size, err := btf.Sizeof(typ)
			if err != nil || size > MaxKeySize {
				size = 8
			}
			for _, ks := range []int{size, size + 1} {
				for _, hist := range []bool{false, true} {
					labels, err := c.LabelsFromBTF("metrics.counters[0]", "m", "m", typ, ks, nil, hist)
					if err != nil {
						if !strings.HasPrefix(err.Error(), "fuzz.yaml: ") {
							t.Fatalf("error %q does not name the file", err)
						}
						continue
					}
					if labels != nil && KeySize(labels) != ks {
						t.Fatalf("labels %+v cover %d bytes of a %d-byte key", labels, KeySize(labels), ks)
					}
					// Listed labels checked against the same type: the
					// inferred ones, one label over the whole key, and
					// a fixed u32 + char[16] layout.
					for _, listed := range [][]Label{labels, {{Name: "m", Size: ks, Decoders: []Decoder{{Name: "string"}}}},
						{{Name: "a", Size: 4, Decoders: []Decoder{{Name: "uint"}}}, {Name: "comm", Size: 16, Decoders: []Decoder{{Name: "string"}}}}} {
						if err := c.CheckKeyLabels("metrics.counters[0]", "m", typ, ks, listed, hist); err != nil && !strings.HasPrefix(err.Error(), "fuzz.yaml: ") {
							t.Fatalf("error %q does not name the file", err)
						}
					}
				}
			}
		}
	})
}
