// SPDX-License-Identifier: Apache-2.0

package config

import (
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/cilium/ebpf/btf"
)

// BTF types as clang emits them for
//
//	enum __attribute__((packed)) btfl_call { BTFL_GETPPID = 1, BTFL_GETPGRP = 2, BTFL_GETSID = 5 };
//	struct btfl_key { char comm[16]; __u32 pid; enum btfl_call call; };  // 3 bytes tail padding
var (
	btfU32   = &btf.Int{Name: "unsigned int", Size: 4}
	btfU32T  = &btf.Typedef{Name: "__u32", Type: btfU32}
	btfU8    = &btf.Int{Name: "unsigned char", Size: 1}
	btfChar  = &btf.Int{Name: "char", Size: 1, Encoding: btf.Signed}
	btfComm  = &btf.Array{Index: btfU32, Type: btfChar, Nelems: 16}
	btfCall  = &btf.Enum{Name: "btfl_call", Size: 1, Values: []btf.EnumValue{{Name: "BTFL_GETPPID", Value: 1}, {Name: "BTFL_GETPGRP", Value: 2}, {Name: "BTFL_GETSID", Value: 5}}}
	btflKey  = &btf.Struct{Name: "btfl_key", Size: 24, Members: []btf.Member{{Name: "comm", Type: btfComm}, {Name: "pid", Type: btfU32T, Offset: 128}, {Name: "call", Type: &btf.Const{Type: btfCall}, Offset: 160}}}
	btflHist = &btf.Struct{Name: "btfl_hist_key", Size: 8, Members: []btf.Member{{Name: "call", Type: btfCall}, {Name: "slot", Type: btfU32T, Offset: 32}}}
)

// The labels explicit YAML gives for btfl_key: inference must give the
// same list.
const btflExplicit = `metrics:
  counters:
    - name: btfl_calls_total
      help: Calls
      labels:
        - name: comm
          size: 16
          decoders: [{name: string}]
        - name: pid
          size: 4
          decoders: [{name: uint}]
        - name: call
          size: 1
          padding: 3
          decoders:
            - name: uint
            - name: static_map
              allow_unknown: true
              static_map: {1: BTFL_GETPPID, 2: BTFL_GETPGRP, 5: BTFL_GETSID}
`

func btflConfig(t *testing.T, yaml string) *Config {
	t.Helper()
	c, err := Parse("btfl.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestLabelsFromBTFStruct(t *testing.T) {
	explicit := btflConfig(t, btflExplicit)
	c := btflConfig(t, "metrics:\n  counters:\n    - name: btfl_calls_total\n      help: Calls\n")
	got, err := c.LabelsFromBTF("metrics.counters[0]", "btfl_calls_total", "btfl_calls_total", btflKey, 24, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if want := explicit.Metrics.Counters[0].Labels; !reflect.DeepEqual(got, want) {
		t.Fatalf("inferred labels\n%+v\nwant what the explicit YAML gives\n%+v", got, want)
	}
}

func TestLabelsFromBTFHistogram(t *testing.T) {
	c := btflConfig(t, "metrics:\n  histograms:\n    - name: btfl_seconds\n      help: Calls\n      bucket_type: exp2\n      bucket_max: 10\n")
	got, err := c.LabelsFromBTF("metrics.histograms[0]", "btfl_seconds", "btfl_seconds", btflHist, 8, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != "call" || got[0].Size != 1 || got[0].Padding != 3 || len(got[0].Decoders) != 2 ||
		got[1].Name != BucketLabel || got[1].Size != 4 || got[1].Padding != 0 || got[1].Decoders != nil {
		t.Fatalf("got %+v, want call (1 byte, 3 padding, uint+static_map) then bucket (4 bytes, the last field slot)", got)
	}
	// A plain integer key is the bucket alone.
	got, err = c.LabelsFromBTF("metrics.histograms[0]", "btfl_seconds", "btfl_seconds", btfU32T, 4, nil, true)
	if err != nil || !reflect.DeepEqual(got, []Label{{Name: BucketLabel, Size: 4}}) {
		t.Fatalf("u32 key: got %+v, %v; want the bucket alone", got, err)
	}
}

// A counter whose key is a plain integer, or has no BTF, keeps what a
// counter without labels always was: one series.
func TestLabelsFromBTFNoStruct(t *testing.T) {
	c := btflConfig(t, "metrics:\n  counters:\n    - name: x_total\n      help: X\n")
	for _, key := range []btf.Type{nil, &btf.Void{}, btfU32T, btfCall} {
		got, err := c.LabelsFromBTF("metrics.counters[0]", "x_total", "x_total", key, 4, nil, false)
		if err != nil || got != nil {
			t.Errorf("key %v: got %+v, %v; want no labels", key, got, err)
		}
	}
	if _, err := c.LabelsFromBTF("metrics.counters[0]", "x", "x", nil, 4, []Label{{Name: "a", Decoders: []Decoder{{Name: "uint"}}}}, false); err == nil || !strings.Contains(err.Error(), "no BTF type") {
		t.Errorf("overrides without BTF: got %v", err)
	}
}

func TestLabelsFromBTFOverrides(t *testing.T) {
	c := btflConfig(t, `metrics:
  counters:
    - name: btfl_calls_total
      help: Calls
      labels:
        - name: pid
          decoders: [{name: hex}]
`)
	ctr := c.Metrics.Counters[0]
	if !InferLabels(ctr.Labels) {
		t.Fatal("a labels list of names and decoders only is not an override list")
	}
	got, err := c.LabelsFromBTF("metrics.counters[0]", ctr.Name, ctr.Name, btflKey, 24, ctr.Labels, false)
	if err != nil {
		t.Fatal(err)
	}
	if got[1].Name != "pid" || got[1].Size != 4 || !reflect.DeepEqual(got[1].Decoders, []Decoder{{Name: "hex"}}) {
		t.Fatalf("pid: got %+v, want the hex override at 4 bytes", got[1])
	}
	if got[0].Decoders[0].Name != "string" || got[2].Decoders[1].Name != "static_map" {
		t.Fatalf("the fields not overridden are not inferred: %+v", got)
	}
	// An override makes a field of any type usable: a nested struct.
	addr := &btf.Struct{Name: "in6_addr", Size: 16, Members: []btf.Member{{Name: "u6_addr8", Type: &btf.Array{Index: btfU32, Type: btfU8, Nelems: 16}}}}
	key := &btf.Struct{Name: "k", Size: 20, Members: []btf.Member{{Name: "addr", Type: addr}, {Name: "pid", Type: btfU32, Offset: 128}}}
	ov := []Label{{Name: "addr", Decoders: []Decoder{{Name: "inet_ip"}}}}
	got, err = c.LabelsFromBTF("metrics.counters[0]", "x", "x", key, 20, ov, false)
	if err != nil || got[0].Size != 16 || got[0].Decoders[0].Name != "inet_ip" {
		t.Fatalf("nested struct with an override: got %+v, %v", got, err)
	}
}

func TestLabelsFromBTFErrors(t *testing.T) {
	c := btflConfig(t, "metrics:\n  counters:\n    - name: x_total\n      help: X\n")
	addr := &btf.Struct{Name: "in6_addr", Size: 16, Members: []btf.Member{{Name: "a", Type: btfComm}}}
	union := &btf.Union{Name: "u", Size: 4, Members: []btf.Member{{Name: "a", Type: btfU32}}}
	u64arr := &btf.Array{Index: btfU32, Type: &btf.Int{Name: "u64", Size: 8}, Nelems: 2}
	st := func(size uint32, ms ...btf.Member) *btf.Struct {
		return &btf.Struct{Name: "k", Size: size, Members: ms}
	}
	many := st(4 * (MaxLabels + 1))
	for i := range MaxLabels + 1 {
		many.Members = append(many.Members, btf.Member{Name: "f" + string(rune('a'+i%26)) + string(rune('a'+i/26)), Type: btfU32, Offset: btf.Bits(32 * i)})
	}
	for _, tc := range []struct {
		name      string
		key       btf.Type
		keySize   int
		histogram bool
		over      []Label
		want      string
	}{
		{"nested struct", st(20, btf.Member{Name: "addr", Type: addr}, btf.Member{Name: "pid", Type: btfU32, Offset: 128}), 20, false, nil, `key field "addr" (struct "in6_addr"): nested struct: set its decoders`},
		{"union", st(4, btf.Member{Name: "v", Type: union}), 4, false, nil, `key field "v" (union "u"): a union`},
		{"array", st(16, btf.Member{Name: "v", Type: u64arr}), 16, false, nil, `key field "v" ("u64"[2]): an array whose elements are not chars`},
		{"pointer", st(8, btf.Member{Name: "p", Type: &btf.Pointer{Target: btfU32}}), 8, false, nil, `a pointer`},
		{"bitfield", st(4, btf.Member{Name: "b", Type: btfU32, BitfieldSize: 3}), 4, false, nil, `a bitfield`},
		{"anonymous", st(4, btf.Member{Type: btfU32}), 4, false, nil, `key field 0 of struct "k" has no name`},
		{"key size", btflKey, 32, false, nil, `is 24 bytes, but the map has 32-byte keys`},
		{"overlap", st(8, btf.Member{Name: "a", Type: btfU32}, btf.Member{Name: "b", Type: btfU32, Offset: 16}), 8, false, nil, `overlap the previous field`},
		{"too many", many, 4 * (MaxLabels + 1), false, nil, `fields, more than the limit of 32 labels`},
		{"unknown override", btflKey, 24, false, []Label{{Name: "tgid", Decoders: []Decoder{{Name: "uint"}}}}, `the key has no field "tgid"`},
		{"override of the bucket", btflHist, 8, true, []Label{{Name: "slot", Decoders: []Decoder{{Name: "uint"}}}}, `is the bucket slot`},
		{"bucket not an integer", st(20, btf.Member{Name: "pid", Type: btfU32}, btf.Member{Name: "comm", Type: btfComm, Offset: 32}), 20, true, nil, `must be an integer of 1, 2, 4 or 8 bytes`},
		{"reserved name", st(8, btf.Member{Name: "le", Type: btfU32}, btf.Member{Name: "slot", Type: btfU32, Offset: 32}), 8, true, nil, `"le" is reserved by Prometheus`},
		{"a second bucket", st(8, btf.Member{Name: "bucket", Type: btfU32}, btf.Member{Name: "slot", Type: btfU32, Offset: 32}), 8, true, nil, `duplicate label "bucket"`},
		{"override of a plain integer", btfU32, 4, false, []Label{{Name: "pid", Decoders: []Decoder{{Name: "uint"}}}}, `plain 4-byte integer`},
		{"wide integer", st(16, btf.Member{Name: "v", Type: &btf.Int{Name: "__int128", Size: 16}}), 16, false, nil, `a 16-byte integer`},
	} {
		_, err := c.LabelsFromBTF("metrics.counters[0]", "x_total", "x_map", tc.key, tc.keySize, tc.over, tc.histogram)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %s", tc.name, err, tc.want)
			continue
		}
		// The file, the metric and the map are named (an override's error
		// names the override's own path instead of the metric's).
		if msg := err.Error(); !strings.HasPrefix(msg, "btfl.yaml:") || !strings.Contains(msg, `"x_total"`) || !strings.Contains(msg, `"x_map"`) {
			t.Errorf("%s: %q does not name the file, the metric and the map", tc.name, msg)
		}
	}
}

// Enum values are keyed by the text uint gives the field's bytes: a
// negative value of a signed enum is its two's complement at the enum's
// size, and the first name of a value wins.
func TestLabelsFromBTFEnumValues(t *testing.T) {
	e := &btf.Enum{Name: "e", Size: 2, Signed: true, Values: []btf.EnumValue{{Name: "MINUS_ONE", Value: ^uint64(0)}, {Name: "ONE", Value: 1}, {Name: "UNO", Value: 1}}}
	d, err := fieldDecoders(e)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"65535": "MINUS_ONE", "1": "ONE"}
	if len(d) != 2 || d[0].Name != "uint" || !reflect.DeepEqual(d[1].StaticMap, want) || !d[1].AllowUnknown {
		t.Fatalf("got %+v, want uint then static_map %v with allow_unknown", d, want)
	}
}

// Labels given as names and decoders only validate as overrides; a list
// that mixes sized and unsized labels is refused as before.
func TestValidateLabelOverrides(t *testing.T) {
	for _, ok := range []string{
		"metrics:\n  histograms:\n    - name: h_seconds\n      help: H\n      bucket_type: exp2\n      bucket_max: 3\n",
		"metrics:\n  histograms:\n    - name: h_seconds\n      help: H\n      bucket_type: exp2\n      bucket_max: 3\n      labels: [{name: dev, decoders: [{name: majorminor}]}]\n",
	} {
		if _, err := Parse("h.yaml", []byte(ok)); err != nil {
			t.Errorf("%v", err)
		}
	}
	for yaml, want := range map[string]string{
		"metrics:\n  counters:\n    - name: c_total\n      help: C\n      labels: [{name: a, decoders: [{name: uint}]}, {name: b, size: 4, decoders: [{name: uint}]}]\n": "labels[0].size: must be 1 to",
		"metrics:\n  counters:\n    - name: c_total\n      help: C\n      labels: [{name: a}]\n":                                                                         "sets neither a size nor decoders",
	} {
		if _, err := Parse("c.yaml", []byte(yaml)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want %q", err, want)
		}
	}
}

// An enum shared by the keys of several maps counts for each: the
// config's inferred static_map entries stay within MaxStaticMapTotal.
func TestLabelsFromBTFEnumBudget(t *testing.T) {
	big := &btf.Enum{Name: "big", Size: 4}
	for i := range MaxStaticMap {
		big.Values = append(big.Values, btf.EnumValue{Name: "V" + strconv.Itoa(i), Value: uint64(i)})
	}
	key := &btf.Struct{Name: "k", Size: 4, Members: []btf.Member{{Name: "v", Type: big}}}
	c := btflConfig(t, "metrics:\n  counters:\n    - name: x_total\n      help: X\n")
	var err error
	n := 0
	for ; n < 3 && err == nil; n++ {
		_, err = c.LabelsFromBTF("metrics.counters[0]", "x_total", "x_total", key, 4, nil, false)
	}
	if err == nil || n != 3 || !strings.Contains(err.Error(), "more than 131072 static_map entries in the config") {
		t.Fatalf("after %d keys: %v; want the third refused over the config's static_map budget", n, err)
	}
}
