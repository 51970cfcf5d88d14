// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cilium/ebpf"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/kernel-exporter/kernel_exporter/config"
	"github.com/kernel-exporter/kernel_exporter/decoder"
)

// The key of the fuzzed map: a 24-byte C string, a u32 printed in hex and a
// u32 printed in decimal. The label names sort in another order than the
// key's (addr, comm, id), so the label pairs are reordered on the way out.
const (
	fuzzCommSize = 24
	fuzzKeySize  = fuzzCommSize + 4 + 4
	fuzzMetric   = "kernel_fuzz_total"
)

const fuzzYAML = `metrics:
  counters:
    - name: fuzz_total
      help: fuzzed label bytes
      labels:
        - name: comm
          size: 24
          decoders:
            - name: string
        - name: addr
          size: 4
          decoders:
            - name: hex
        - name: id
          size: 4
          decoders:
            - name: uint
`

// fuzzKey builds a map key: comm truncated or NUL-padded to its field.
func fuzzKey(comm []byte, addr, id uint32) []byte {
	k := make([]byte, fuzzKeySize)
	copy(k[:fuzzCommSize], comm)
	binary.NativeEndian.PutUint32(k[fuzzCommSize:], addr)
	binary.NativeEndian.PutUint32(k[fuzzCommSize+4:], id)
	return k
}

// fuzzLabels is what the documented decoders make of a key, independently
// of the decoder code: string stops at the first NUL and replaces invalid
// UTF-8 with U+FFFD; hex prints a u32 as 0x plus lowercase hex without
// leading zeros; uint prints decimal. Returned as "addr,comm,id" values
// joined by NUL (which none of them can contain).
func fuzzLabels(k []byte) string {
	comm := k[:fuzzCommSize]
	if i := bytes.IndexByte(comm, 0); i >= 0 {
		comm = comm[:i]
	}
	addr := binary.NativeEndian.Uint32(k[fuzzCommSize:])
	id := binary.NativeEndian.Uint32(k[fuzzCommSize+4:])
	return "0x" + strconv.FormatUint(uint64(addr), 16) + "\x00" +
		string(bytes.ToValidUTF8(comm, []byte("\uFFFD"))) + "\x00" +
		strconv.FormatUint(uint64(id), 10)
}

// fuzzWant sums the values of keys by their label set, as the collector
// does (u64 arithmetic, then converted to a float).
func fuzzWant(entries map[string]uint64) map[string]float64 {
	sums := map[string]uint64{}
	for k, v := range entries {
		sums[fuzzLabels([]byte(k))] += v
	}
	want := map[string]float64{}
	for l, v := range sums {
		want[l] = float64(v)
	}
	return want
}

// fuzzSeries returns the counter values of the fuzzed metric by label set
// (as fuzzLabels joins them), failing on anything unexpected in its shape.
func fuzzSeries(t *testing.T, where string, mfs map[string]*dto.MetricFamily, name string) map[string]float64 {
	t.Helper()
	got := map[string]float64{}
	mf := mfs[name]
	if mf == nil {
		return got
	}
	for _, m := range mf.GetMetric() {
		var vals []string
		for i, lp := range m.GetLabel() {
			want := []string{"addr", "comm", "id"}
			if len(m.GetLabel()) != 3 || lp.GetName() != want[i] {
				t.Fatalf("%s: labels %v, want names %v", where, m.GetLabel(), want)
			}
			if !utf8.ValidString(lp.GetValue()) {
				t.Fatalf("%s: label %s=%q is not UTF-8", where, lp.GetName(), lp.GetValue())
			}
			vals = append(vals, lp.GetValue())
		}
		l := strings.Join(vals, "\x00")
		if _, dup := got[l]; dup {
			t.Fatalf("%s: label set %q twice", where, vals)
		}
		if m.GetCounter() == nil {
			t.Fatalf("%s: %q is not a counter: %v", where, vals, m)
		}
		got[l] = m.GetCounter().GetValue()
	}
	return got
}

// showSeries prints series sorted, with label values quoted.
func showSeries(s map[string]float64) string {
	var out []string
	for l, v := range s {
		out = append(out, fmt.Sprintf("{%q}=%v", strings.Split(l, "\x00"), v))
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

func sameSeries(got, want map[string]float64) bool {
	if len(got) != len(want) {
		return false
	}
	for l, v := range want {
		g, ok := got[l]
		if !ok || g != v {
			return false
		}
	}
	return true
}

// exposeAndParse writes mfs in the text format and parses it back; it also
// writes OpenMetrics and, since the two formats escape label values alike,
// parses its samples back with the text parser once what differs is
// rewritten (the # EOF line, the counter's TYPE name without _total).
func exposeAndParse(t *testing.T, mfs []*dto.MetricFamily) (text, om map[string]*dto.MetricFamily) {
	t.Helper()
	encode := func(ft expfmt.FormatType, fname string) string {
		var buf bytes.Buffer
		enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(ft))
		for _, mf := range mfs {
			if err := enc.Encode(mf); err != nil {
				t.Fatalf("encode %s: %v", fname, err)
			}
		}
		if c, ok := enc.(expfmt.Closer); ok {
			if err := c.Close(); err != nil {
				t.Fatalf("close %s: %v", fname, err)
			}
		}
		return buf.String()
	}
	parse := func(fname, s string) map[string]*dto.MetricFamily {
		p := expfmt.NewTextParser(model.UTF8Validation)
		out, err := p.TextToMetricFamilies(strings.NewReader(s))
		if err != nil {
			t.Fatalf("parse %s back: %v\n%s", fname, err, s)
		}
		return out
	}
	text = parse("text", encode(expfmt.TypeTextPlain, "text"))
	o := encode(expfmt.TypeOpenMetrics, "OpenMetrics")
	body, ok := strings.CutSuffix(o, "# EOF\n")
	if !ok {
		t.Fatalf("OpenMetrics output does not end in # EOF:\n%s", o)
	}
	// An OpenMetrics counter family is named without _total on its HELP
	// and TYPE lines; the text format names it as its samples. Label
	// values cannot break a line (a newline is escaped), so lines can be
	// rewritten one by one.
	var kept []string
	for _, line := range strings.SplitAfter(body, "\n") {
		if n, ok := strings.CutPrefix(line, "# TYPE "); ok {
			if name, ok := strings.CutSuffix(n, " counter\n"); ok {
				line = "# TYPE " + name + "_total counter\n"
			}
		} else if strings.HasPrefix(line, "# ") {
			continue
		}
		kept = append(kept, line)
	}
	om = parse("OpenMetrics", strings.Join(kept, ""))
	return text, om
}

// fuzzRead gathers c with a fresh registry, checks that the metric holds
// exactly want, and that the text and OpenMetrics expositions parse back to
// the same label values and counter values.
func fuzzRead(t *testing.T, where string, c *Config, want map[string]float64) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(asCollector{c})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("%s: gather: %v", where, err)
	}
	byName := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		byName[mf.GetName()] = mf
	}
	got := fuzzSeries(t, where+": gathered", byName, fuzzMetric)
	if !sameSeries(got, want) {
		t.Fatalf("%s: gathered %s, want %s", where, showSeries(got), showSeries(want))
	}
	text, om := exposeAndParse(t, mfs)
	if back := fuzzSeries(t, where+": text parsed back", text, fuzzMetric); !sameSeries(back, got) {
		t.Fatalf("%s: text format parsed back %s, gathered %s", where, showSeries(back), showSeries(got))
	}
	if back := fuzzSeries(t, where+": OpenMetrics parsed back", om, fuzzMetric); !sameSeries(back, got) {
		t.Fatalf("%s: OpenMetrics parsed back %s, gathered %s", where, showSeries(back), showSeries(got))
	}
}

// FuzzExposition pushes arbitrary label bytes through the whole path from a
// BPF map key to the served text: a real hash map, the string, hex and uint
// decoders, the collector, a registry's Gather, the text and OpenMetrics
// encoders, and the text parser. Two keys share addr and id, so that two
// comm fields that decode alike (same bytes before a NUL, or invalid UTF-8
// replaced alike) must sum into one series. A second read, after deleting
// the first key and changing the second, checks that the decode cache
// follows the map. The map is created once per process and emptied by each
// input.
func FuzzExposition(f *testing.F) {
	needBPF(f)
	cfg, err := config.Parse("fuzz.yaml", []byte(fuzzYAML))
	if err != nil {
		f.Fatal(err)
	}
	spec := &ebpf.MapSpec{Name: "fuzz_total", Type: ebpf.Hash, KeySize: fuzzKeySize, ValueSize: 8, MaxEntries: 4}
	m, err := ebpf.NewMap(spec)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { m.Close() })
	coll := &ebpf.Collection{Maps: map[string]*ebpf.Map{spec.Name: m}}
	plan, err := Compile(cfg, &ebpf.CollectionSpec{Maps: map[string]*ebpf.MapSpec{spec.Name: spec}}, decoder.NewEnv(100))
	if err != nil {
		f.Fatal(err)
	}

	f.Add([]byte("bash"), []byte("sshd"), uint32(0xffffffff), uint32(0), uint64(1), uint64(2))
	f.Add([]byte("a\x00x"), []byte("a\x00y"), uint32(0x1f), uint32(42), uint64(3), uint64(4))
	f.Add([]byte("\xff\xfe"), []byte("\xc0"), uint32(0), uint32(7), uint64(5), uint64(6))
	f.Add([]byte("back\\slash \"quoted\"\nline"), []byte("{le=\"1\"} 7"), uint32(1), uint32(1), uint64(1<<53+1), uint64(1<<63))
	f.Add([]byte("\u00e9t\u00e9 \U0001F600 \u2028\t\r"), []byte("0123456789abcdefghijklmnop"), uint32(16), uint32(1<<31), uint64(0), uint64(0))
	f.Add([]byte(""), []byte("\x00"), uint32(2), uint32(3), uint64(18446744073709551615), uint64(1))
	f.Add([]byte("# EOF\n# TYPE x gauge"), []byte("\xed\xa0\x80 surrogate"), uint32(0xdeadbeef), uint32(9), uint64(10), uint64(11))

	f.Fuzz(func(t *testing.T, comm1, comm2 []byte, addr, id uint32, v1, v2 uint64) {
		c, err := New(plan, coll, Limits{CacheSize: 100})
		if err != nil {
			t.Fatal(err)
		}
		k1, k2 := fuzzKey(comm1, addr, id), fuzzKey(comm2, addr, id)
		entries := map[string]uint64{}
		t.Cleanup(func() {
			for k := range entries {
				if err := m.Delete([]byte(k)); err != nil {
					t.Errorf("emptying the map: %v", err)
				}
			}
		})
		putKey := func(k []byte, v uint64) {
			if err := m.Put(k, v); err != nil {
				t.Fatal(err)
			}
			entries[string(k)] = v
		}
		putKey(k1, v1)
		putKey(k2, v2) // the same key as k1 if the comm fields are equal
		fuzzRead(t, "first read", c, fuzzWant(entries))

		if err := m.Delete(k1); err != nil {
			t.Fatal(err)
		}
		delete(entries, string(k1))
		if !bytes.Equal(k1, k2) {
			putKey(k2, v2+v1)
		}
		fuzzRead(t, "second read", c, fuzzWant(entries))
	})
}

// TestFuzzLabels checks the oracle of FuzzExposition on known keys.
func TestFuzzLabels(t *testing.T) {
	for _, tc := range []struct {
		comm     string
		addr, id uint32
		want     string
	}{
		{"bash", 0x1f, 42, "0x1f,bash,42"},
		{"a\x00b", 0, 0, "0x0,a,0"},
		{"x\xffy", 0xffffffff, 4294967295, "0xffffffff,x\uFFFDy,4294967295"},
		{strings.Repeat("z", 30), 16, 1, "0x10," + strings.Repeat("z", fuzzCommSize) + ",1"},
	} {
		got := strings.ReplaceAll(fuzzLabels(fuzzKey([]byte(tc.comm), tc.addr, tc.id)), "\x00", ",")
		if got != tc.want {
			t.Errorf("fuzzLabels(%q, %#x, %d) = %q, want %q", tc.comm, tc.addr, tc.id, got, tc.want)
		}
	}
	// Two keys that decode alike sum; a key without a NUL fills the field.
	want := fuzzWant(map[string]uint64{
		string(fuzzKey([]byte("a\x00x"), 1, 2)): 3,
		string(fuzzKey([]byte("a\x00y"), 1, 2)): 4,
	})
	if len(want) != 1 || want["0x1\x00a\x002"] != 7 {
		t.Errorf("fuzzWant = %s, want one series of 7", showSeries(want))
	}
}
