// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"

	"github.com/kernel-exporter/kernel_exporter/config"
	"github.com/kernel-exporter/kernel_exporter/decoder"
	"github.com/kernel-exporter/kernel_exporter/programs"
)

// fuzzEnv is one decoder environment shared by every input, as the
// exporter shares one across configs. Its /proc and /sys are empty
// directories, so decoders that read kernel state fail the same way every
// time instead of reading the machine.
var fuzzEnv = sync.OnceValue(func() *decoder.Env {
	env := decoder.NewEnv(1000)
	dir, err := os.MkdirTemp("", "fuzzenv")
	if err == nil {
		env.ProcRoot, env.SysRoot = dir, dir
	}
	return env
})

// checkConfigError asserts what every config error must be: valid UTF-8,
// and showing no line of the input longer than config.MaxToken bytes.
func checkConfigError(t *testing.T, data []byte, err error) {
	t.Helper()
	msg := err.Error()
	if !utf8.ValidString(msg) {
		t.Fatalf("error is not valid UTF-8: %q", msg)
	}
	for _, line := range bytes.Split(data, []byte("\n")) {
		line = bytes.TrimRight(line, "\r")
		if len(line) > config.MaxToken && strings.Contains(msg, string(line)) {
			t.Fatalf("error shows the input line %q: %s", line, msg)
		}
	}
}

// FuzzConfig runs what start-up runs on a config file: config.Parse, and
// for a config that parses, Compile against an object that has a hash map
// per metric. The maps' key size is the one the labels describe plus
// delta, so both matching and mismatching layouts are compiled; an odd
// delta also gives the object a stack-trace map. Nothing may panic, every
// error must pass checkConfigError, and a compiled plan must keep every
// label and bucket field inside its map key and within the bucket cap.
func FuzzConfig(f *testing.F) {
	names, _ := fs.Glob(programs.FS, "*.yaml")
	for _, n := range names {
		y, err := fs.ReadFile(programs.FS, n)
		if err == nil {
			f.Add(y, int16(0))
			f.Add(y, int16(1))
		}
	}
	for _, s := range []string{
		"",
		"root:$6$Zx9secretHash$abc:19000:0:99999:7:::\n",
		"metrics: {counters: [{name: a_total, help: h, labels: [{name: x, size: 9223372036854775807, decoders: [{name: hex}]}, {name: y, size: 9223372036854775807, padding: 10, decoders: [{name: hex}]}]}]}\n",
		"metrics: {histograms: [{name: h_seconds, help: h, bucket_type: linear, bucket_max: 1000000000000, labels: [{name: bucket, size: 8}]}]}\n",
		"metrics: {histograms: [{name: h_seconds, help: h, bucket_type: fixed, bucket_keys: [1, 1000000000000], labels: [{name: bucket, size: 4}]}]}\n",
		"metrics: {histograms: [{name: h_seconds, help: h, bucket_type: exp2, bucket_max: 8, bucket_multiplier: .nan, labels: [{name: le, size: 4, decoders: [{name: uint}]}, {name: bucket, size: 4}]}]}\n",
		"metrics: {counters: [{name: c_total, help: h, labels: [{name: s, size: 4, decoders: [{name: uint}, {name: regexp, regexps: ['(a', '[a-z]{1000}']}]}]}]}\n",
		"metrics: {counters: [{name: c_total, help: h, labels: [{name: s, size: 8, decoders: [{name: kstack}]}]}]}\n",
		"a0: &a [x, x, x]\na1: &b [*a, *a, *a]\nmetrics: *b\n",
		"metrics:\n  counters:\n  - name: c_total\n    help: h\n    labels:\n    - {name: s, size: 4, decoders: [{name: uint}, {name: static_map, static_map: {1: a, 2: b}}]}\nattach_to: {p: 'not a function'}\n",
		"\x7fELF\x02\x01\x01\x00\xff\xfe",
		"metrics: {gauges: [{name: g, help: h, signed: true, per_cpu: label, labels: [{name: k, size: 4, decoders: [{name: uint}]}]}]}\n",
		"metrics: {counters: [{name: flows, help: h, per_cpu: label, labels: [{name: k, size: 4, decoders: [{name: uint}]}], values: [{field: f0, name: a_total}, {field: f3, name: b_total}, {field: nope, name: c_total}]}]}\n",
		"metrics: {gauges: [{name: flows, help: h, values: [{field: f1, name: a}, {field: f2, name: b}]}], histograms: [{name: h_seconds, help: h, per_cpu: label, bucket_type: exp2, bucket_max: 3, labels: [{name: bucket, size: 4}]}]}\n",
		"metrics: {histograms: [{name: h_seconds, help: h, slots_in_value: true, per_cpu: label, bucket_type: exp2, bucket_max: 36, labels: [{name: v, size: 4, decoders: [{name: uint}]}]}], counters: [{name: c_total, help: h, skip_zero: true, labels: [{name: nr, size: 4, decoders: [{name: syscall}]}]}]}\n",
	} {
		f.Add([]byte(s), int16(0))
		f.Add([]byte(s), int16(16))
	}
	f.Fuzz(func(t *testing.T, data []byte, delta int16) {
		cfg, err := config.Parse("fuzz.yaml", data)
		if err != nil {
			checkConfigError(t, data, err)
			return
		}
		spec := &ebpf.CollectionSpec{Maps: map[string]*ebpf.MapSpec{}}
		add := func(name string, labels []config.Label) {
			ks := config.KeySize(labels) + int(delta)
			if ks < 0 {
				ks = -ks
			}
			// delta's bits 2 and 3 choose a per-CPU map and a value
			// struct (fields f0..f4 of 1, 2, 4, 8 and 3 bytes, packed, so
			// that some are unaligned or not integers).
			ms := &ebpf.MapSpec{Name: name, Type: ebpf.Hash, KeySize: uint32(ks), ValueSize: 8, MaxEntries: 1}
			if delta&4 != 0 {
				ms.Type = ebpf.PerCPUHash
			}
			if delta&8 != 0 {
				st := &btf.Struct{Name: "v"}
				off := 0
				for i, size := range []int{1, 2, 4, 8, 3} {
					var typ btf.Type = &btf.Int{Size: uint32(size)}
					if size == 3 {
						typ = &btf.Array{Type: &btf.Int{Size: 1}, Nelems: 3}
					}
					st.Members = append(st.Members, btf.Member{Name: fmt.Sprintf("f%d", i), Type: typ, Offset: btf.Bits(8 * off)})
					off += size
				}
				st.Size = uint32(off)
				ms.Value, ms.ValueSize = st, uint32(off)
			}
			spec.Maps[name] = ms
		}
		for _, c := range cfg.Metrics.Counters {
			add(c.Name, c.Labels)
		}
		for _, g := range cfg.Metrics.Gauges {
			add(g.Name, g.Labels)
		}
		for _, h := range cfg.Metrics.Histograms {
			add(h.Name, h.Labels)
			// delta's bit 4: a value of 38 u64 slots (slots_in_value).
			if delta&16 != 0 {
				spec.Maps[h.Name].Value, spec.Maps[h.Name].ValueSize = nil, 8*38
			}
		}
		if delta%2 != 0 {
			spec.Maps["stacks"] = &ebpf.MapSpec{Name: "stacks", Type: ebpf.StackTrace, KeySize: 4, ValueSize: 127 * 8, MaxEntries: 1}
		}
		plan, err := Compile(cfg, spec, fuzzEnv())
		if err != nil {
			checkConfigError(t, data, err)
			return
		}
		for _, mp := range plan.Metrics {
			v := mp.Value
			if v.Off < 0 || (v.Size != 1 && v.Size != 2 && v.Size != 4 && v.Size != 8) || v.Off+v.Size > mp.ValueSize {
				t.Fatalf("%s: value field %+v outside the %d-byte value", mp.Name, v, mp.ValueSize)
			}
			if mp.ValueSlots != 0 && (!mp.Histogram || mp.ValueSlots*8 != mp.ValueSize || mp.BucketSize != 0 || mp.BucketOff != mp.KeySize) {
				t.Fatalf("%s: %d value slots in a %d-byte value, bucket at [%d, %d) of a %d-byte key", mp.Name, mp.ValueSlots, mp.ValueSize, mp.BucketOff, mp.BucketOff+mp.BucketSize, mp.KeySize)
			}
			if mp.CPULabel && (!mp.PerCPU || mp.Labels[0].Name != config.CPULabel) {
				t.Fatalf("%s: cpu label on a %v map, labels %v", mp.Name, mp.PerCPU, mp.Labels)
			}
			key := make([]byte, mp.KeySize)
			for _, l := range mp.Labels {
				if l.Off < 0 || l.Size <= 0 || l.Off+l.Size > mp.KeySize {
					t.Fatalf("%s: label %s at [%d, %d) outside the %d-byte key", mp.Name, l.Name, l.Off, l.Off+l.Size, mp.KeySize)
				}
				// Decoding must not panic either (errors are fine here).
				_, _ = l.Chain.Decode(key[l.Off : l.Off+l.Size])
			}
			if mp.Histogram {
				if mp.BucketOff < 0 || mp.BucketOff+mp.BucketSize > mp.KeySize {
					t.Fatalf("%s: bucket at [%d, %d) outside the %d-byte key", mp.Name, mp.BucketOff, mp.BucketOff+mp.BucketSize, mp.KeySize)
				}
				if n := len(mp.Buckets.Upper); n == 0 || n > config.MaxBuckets {
					t.Fatalf("%s: %d buckets", mp.Name, n)
				}
				for _, slot := range []uint64{0, 1, 63, 64, 4096, 1 << 53, 1<<64 - 1} {
					if i := mp.Buckets.Slot(slot); i < -2 || i >= len(mp.Buckets.Upper) {
						t.Fatalf("%s: Slot(%d) = %d of %d buckets", mp.Name, slot, i, len(mp.Buckets.Upper))
					}
				}
			}
		}
	})
}
