// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"encoding/binary"
	"reflect"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"

	"github.com/kernel-exporter/kernel_exporter/config"
)

// btflSpec is a collection with the maps of
// integration/testdata/btflabels/btflabels.bpf.c, their key types built in
// Go: btfl_calls_total keyed by struct { char comm[16]; __u32 pid; enum
// btfl_call call (1 byte); } (24 bytes, 3 of tail padding), and
// btfl_call_slots keyed by struct { enum btfl_call call; __u32 slot; }.
func btflSpec() *ebpf.CollectionSpec {
	u32 := &btf.Typedef{Name: "__u32", Type: &btf.Int{Name: "unsigned int", Size: 4}}
	char := &btf.Int{Name: "char", Size: 1, Encoding: btf.Signed}
	call := &btf.Enum{Name: "btfl_call", Size: 1, Values: []btf.EnumValue{{Name: "BTFL_GETPPID", Value: 1}, {Name: "BTFL_GETPGRP", Value: 2}, {Name: "BTFL_GETSID", Value: 5}}}
	key := &btf.Struct{Name: "btfl_key", Size: 24, Members: []btf.Member{
		{Name: "comm", Type: &btf.Array{Index: u32, Type: char, Nelems: 16}},
		{Name: "pid", Type: u32, Offset: 128},
		{Name: "call", Type: call, Offset: 160},
	}}
	hkey := &btf.Struct{Name: "btfl_slot_key", Size: 8, Members: []btf.Member{{Name: "call", Type: call}, {Name: "slot", Type: u32, Offset: 32}}}
	return &ebpf.CollectionSpec{Maps: map[string]*ebpf.MapSpec{
		"btfl_calls_total": {Name: "btfl_calls_total", Type: ebpf.Hash, KeySize: 24, ValueSize: 8, MaxEntries: 64, Key: key, Value: &btf.Int{Size: 8}},
		"btfl_call_slots":  {Name: "btfl_call_slots", Type: ebpf.Hash, KeySize: 8, ValueSize: 8, MaxEntries: 64, Key: hkey, Value: &btf.Int{Size: 8}},
		"plain_total":      {Name: "plain_total", Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 4, Key: u32},
	}}
}

const btflYAML = `metrics:
  counters:
    - name: btfl_calls_total
      help: Calls by process and call
    - name: plain_total
      help: Sum of an array
  histograms:
    - name: btfl_call_slots
      help: Slots by call
      bucket_type: exp2
      bucket_max: 8
`

// TestCompileBTFLabels compiles metrics without labels against key types
// in BTF and decodes keys through the inferred plan: field names become
// label names, padding is skipped, enum values print their BTF names (an
// unknown value its number), comm its string.
func TestCompileBTFLabels(t *testing.T) {
	p, err := parseCompile(btflYAML, btflSpec())
	if err != nil {
		t.Fatal(err)
	}
	c, plain, h := p.Metrics[0], p.Metrics[1], p.Metrics[2]
	if !c.Inferred || plain.Inferred || !h.Inferred {
		t.Fatalf("inferred: counter %v, plain %v, histogram %v; want true, false, true", c.Inferred, plain.Inferred, h.Inferred)
	}
	want := []LabelLayout{
		{Name: "comm", Off: 0, Size: 16, Decoders: []string{"string"}},
		{Name: "pid", Off: 16, Size: 4, Decoders: []string{"uint"}},
		{Name: "call", Off: 20, Size: 1, Decoders: []string{"uint", "static_map"}},
	}
	if got := c.Layout().Labels; !reflect.DeepEqual(got, want) {
		t.Fatalf("layout\n%+v\nwant\n%+v", got, want)
	}
	if len(plain.Labels) != 0 {
		t.Fatalf("a counter of a u32-keyed map got labels %+v, want none (one series)", plain.Labels)
	}
	if hl := h.Layout().Labels; len(hl) != 2 || hl[0].Name != "call" || !reflect.DeepEqual(hl[1], LabelLayout{Name: "bucket", Off: 4, Size: 4}) || h.BucketOff != 4 {
		t.Fatalf("histogram layout %+v", hl)
	}

	key := make([]byte, 24)
	copy(key, "worker")
	binary.NativeEndian.PutUint32(key[16:], 4242)
	for call, want := range map[byte]string{1: "BTFL_GETPPID", 2: "BTFL_GETPGRP", 5: "BTFL_GETSID", 9: "9"} {
		key[20] = call
		var got []string
		for _, l := range c.Labels {
			v, err := l.Chain.Decode(key[l.Off : l.Off+l.Size])
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, v)
		}
		if w := []string{"worker", "4242", want}; !reflect.DeepEqual(got, w) {
			t.Errorf("call %d: labels %q, want %q", call, got, w)
		}
	}
}

// A field set per name keeps the layout and takes the override's decoders.
func TestCompileBTFLabelOverride(t *testing.T) {
	y := strings.Replace(btflYAML, "      help: Calls by process and call\n", "      help: Calls by process and call\n      labels:\n        - name: pid\n          decoders: [{name: hex}]\n", 1)
	p, err := parseCompile(y, btflSpec())
	if err != nil {
		t.Fatal(err)
	}
	l := p.Metrics[0].Labels[1]
	if v, _ := l.Chain.Decode([]byte{0x92, 0x10, 0, 0}); l.Name != "pid" || l.Off != 16 || v != "0x1092" {
		t.Fatalf("pid: %s at %d decodes to %q, want pid at 16 → 0x1092", l.Name, l.Off, v)
	}
}

// Errors of inference are config errors naming file, metric, map and field.
func TestCompileBTFLabelErrors(t *testing.T) {
	spec := btflSpec()
	spec.Maps["btfl_calls_total"].Key.(*btf.Struct).Members[0].Type = &btf.Union{Name: "u", Size: 16}
	_, err := parseCompile(btflYAML, spec)
	want := `evil.yaml:3: metrics.counters[0]: metric "btfl_calls_total", map "btfl_calls_total": key field "comm" (union "u"): a union`
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("got %v\nwant %s...", err, want)
	}
	if _, ok := err.(*config.Error); !ok {
		t.Fatalf("%T, want *config.Error", err)
	}
	_, err = parseCompile(strings.Replace(btflYAML, "btfl_call_slots", "nope_seconds", 1), btflSpec())
	if err == nil || !strings.Contains(err.Error(), `map "nope_seconds" not found`) {
		t.Fatalf("missing map: %v", err)
	}
}
