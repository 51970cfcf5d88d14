// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"bytes"
	"io/fs"
	"runtime"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/kernel-exporter/kernel_exporter/config"
	"github.com/kernel-exporter/kernel_exporter/decoder"
	"github.com/kernel-exporter/kernel_exporter/programs"
)

// hashSpec is a collection with one hash map of u64 values.
func hashSpec(name string, keySize uint32) *ebpf.CollectionSpec {
	return &ebpf.CollectionSpec{Maps: map[string]*ebpf.MapSpec{
		name: {Name: name, Type: ebpf.Hash, KeySize: keySize, ValueSize: 8, MaxEntries: 16},
	}}
}

// parseCompile runs what start-up runs on a config: Parse, then Compile.
func parseCompile(yaml string, spec *ebpf.CollectionSpec) (*Plan, error) {
	cfg, err := config.Parse("evil.yaml", []byte(yaml))
	if err != nil {
		return nil, err
	}
	return Compile(cfg, spec, decoder.NewEnv(10))
}

// TestHardening01KeyOffsetOverflow: label sizes and paddings whose sum
// wraps around to the map's key size used to pass --config.check and
// Compile, and the first scrape then sliced the key out of range
// (collector/series.go) and took the exporter down. They are refused, by
// Parse and by Compile alone (for configs built in code), with an error
// naming the file, the field and the value.
func TestHardening01KeyOffsetOverflow(t *testing.T) {
	const wrap = `metrics:
  counters:
    - name: ops_total
      help: Operations
      labels:
        - name: a
          size: 9223372036854775807
          decoders: [{name: hex}]
        - name: b
          size: 9223372036854775807
          padding: 10
          decoders: [{name: hex}]
`
	const wrapHist = `metrics:
  histograms:
    - name: lat_seconds
      help: Latency
      bucket_type: exp2
      bucket_max: 10
      labels:
        - name: a
          size: 4
          padding: 9223372036854775807
          decoders: [{name: hex}]
        - name: bucket
          size: 4
          padding: 9223372036854775807
`
	for _, tc := range []struct{ name, yaml, mapName, want string }{
		{"counter", wrap, "ops_total", "evil.yaml:7: metrics.counters[0].labels[0].size: must be 1 to 4096 bytes, got 9223372036854775807"},
		{"histogram", wrapHist, "lat_seconds", "evil.yaml:10: metrics.histograms[0].labels[0].padding: must be 0 to 4096 bytes, got 9223372036854775807"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := parseCompile(tc.yaml, hashSpec(tc.mapName, 8))
			if err == nil {
				t.Fatalf("accepted: labels %+v", p.Metrics[0].Labels)
			}
			if err.Error() != tc.want {
				t.Errorf("error\n got: %s\nwant: %s", err, tc.want)
			}
		})
	}

	// Compile checks on its own: a config built in code, never validated.
	hex := []config.Decoder{{Name: "hex"}}
	for _, tc := range []struct {
		name   string
		cfg    *config.Config
		keyLen uint32
		want   string
	}{
		{"wrapping sizes", &config.Config{File: "code.yaml", Metrics: config.Metrics{Counters: []config.Counter{{
			Name: "ops_total", Help: "h", Labels: []config.Label{
				{Name: "a", Size: 1<<63 - 1, Decoders: hex}, {Name: "b", Size: 1<<63 - 1, Padding: 10, Decoders: hex}}}}}},
			8, "code.yaml: metrics.counters[0].labels[0].size: must be 1 to 4096 bytes, got 9223372036854775807"},
		{"label past the key", &config.Config{File: "code.yaml", Metrics: config.Metrics{Counters: []config.Counter{{
			Name: "ops_total", Help: "h", Labels: []config.Label{{Name: "a", Size: 16, Decoders: hex}}}}}},
			8, `code.yaml: metrics.counters[0].labels: label sizes add up to 16 bytes, but map "ops_total" has 8-byte keys (labels: "a" 0-16)`},
		{"negative padding", &config.Config{File: "code.yaml", Metrics: config.Metrics{Counters: []config.Counter{{
			Name: "ops_total", Help: "h", Labels: []config.Label{
				{Name: "a", Size: 8, Padding: -8, Decoders: hex}, {Name: "b", Size: 8, Decoders: hex}}}}}},
			8, "code.yaml: metrics.counters[0].labels[0].padding: must be 0 to 4096 bytes, got -8"},
		{"bucket past the key", &config.Config{File: "code.yaml", Metrics: config.Metrics{Histograms: []config.Histogram{{
			Name: "ops_total", Help: "h", BucketType: config.BucketExp2, BucketMax: 3, Labels: []config.Label{
				{Name: "a", Size: 4, Padding: 4, Decoders: hex}, {Name: "bucket", Size: 8}}}}}},
			8, `code.yaml: metrics.histograms[0].labels: label sizes add up to 16 bytes, but map "ops_total" has 8-byte keys (labels: "a" 0-4 +4 padding, "bucket" 8-16)`},
		{"huge bucket label", &config.Config{File: "code.yaml", Metrics: config.Metrics{Histograms: []config.Histogram{{
			Name: "ops_total", Help: "h", BucketType: config.BucketExp2, BucketMax: 3, Labels: []config.Label{
				{Name: "bucket", Size: 1 << 62, Padding: 1 << 62}}}}}},
			8, "code.yaml: metrics.histograms[0].labels[0].size: must be 1 to 4096 bytes, got 4611686018427387904"},
		{"histogram without labels", &config.Config{File: "code.yaml", Metrics: config.Metrics{Histograms: []config.Histogram{{
			Name: "ops_total", Help: "h", BucketType: config.BucketExp2, BucketMax: 3}}}},
			8, `code.yaml: metrics.histograms[0].labels: histogram has no "bucket" label`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Compile(tc.cfg, hashSpec("ops_total", tc.keyLen), decoder.NewEnv(10))
			if err == nil {
				t.Fatalf("accepted: %+v", p.Metrics[0])
			}
			if err.Error() != tc.want {
				t.Errorf("error\n got: %s\nwant: %s", err, tc.want)
			}
		})
	}
}

// TestHardening02HugeBuckets: a linear histogram with bucket_max 1e12 made
// Compile panic in makeslice (1e8 ran out of memory), and so did a fixed
// one whose largest bucket_keys is 1e12. Bucket counts are capped at
// config.MaxBuckets, and slot numbers no longer size any allocation.
func TestHardening02HugeBuckets(t *testing.T) {
	hist := func(fields string) string {
		return `metrics:
  histograms:
    - name: lat_seconds
      help: Latency
` + fields + `      labels:
        - name: bucket
          size: 8
`
	}
	spec := hashSpec("lat_seconds", 8)
	for _, tc := range []struct{ name, fields, want string }{
		{"linear 1e12", "      bucket_type: linear\n      bucket_max: 1000000000000\n",
			"evil.yaml:6: metrics.histograms[0].bucket_max: 1000000000001 buckets (bucket_min 0 to bucket_max 1000000000000), more than the limit of 4096"},
		{"linear 1e8", "      bucket_type: linear\n      bucket_max: 100000000\n",
			"evil.yaml:6: metrics.histograms[0].bucket_max: 100000001 buckets (bucket_min 0 to bucket_max 100000000), more than the limit of 4096"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseCompile(hist(tc.fields), spec)
			if err == nil || err.Error() != tc.want {
				t.Errorf("error\n got: %v\nwant: %s", err, tc.want)
			}
		})
	}

	// Unvalidated, Compile refuses it too, and NewBuckets caps what it makes.
	h := config.Histogram{Name: "lat_seconds", Help: "h", BucketType: config.BucketLinear, BucketMax: 1e12,
		Labels: []config.Label{{Name: "bucket", Size: 8}}}
	_, err := Compile(&config.Config{File: "code.yaml", Metrics: config.Metrics{Histograms: []config.Histogram{h}}}, spec, decoder.NewEnv(10))
	if want := "code.yaml: metrics.histograms[0].bucket_max: 4097 buckets, more than the limit of 4096"; err == nil || err.Error() != want {
		t.Errorf("Compile: got %v, want %s", err, want)
	}
	if b := NewBuckets(&h); len(b.Upper) != config.MaxBuckets {
		t.Errorf("NewBuckets made %d buckets, want the cap %d", len(b.Upper), config.MaxBuckets)
	}

	// Valid configs with large slot numbers allocate by bucket count only.
	for _, tc := range []struct {
		name   string
		fields string
		slots  map[uint64]int
	}{
		{"fixed 1e12", "      bucket_type: fixed\n      bucket_keys: [1, 1000000000000]\n",
			map[uint64]int{0: -1, 1: 0, 2: -1, 999999999999: -1, 1000000000000: 1, 1000000000001: -2, 1000000000002: -1}},
		{"fixed equal keys", "      bucket_type: fixed\n      bucket_keys: [1, 5000, 5000, 1000000000000]\n",
			map[uint64]int{5000: 2, 4999: -1, 1000000000000: 3}},
		{"linear near 1e12", "      bucket_type: linear\n      bucket_min: 1000000000000\n      bucket_max: 1000000004095\n",
			map[uint64]int{0: 0, 1000000000000: 0, 1000000000001: 1, 1000000004095: 4095, 1000000004096: -2, 1000000004097: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			p, err := parseCompile(hist(tc.fields), spec)
			runtime.ReadMemStats(&after)
			if err != nil {
				t.Fatal(err)
			}
			if n := after.TotalAlloc - before.TotalAlloc; n > 4<<20 {
				t.Errorf("Parse and Compile allocated %d bytes", n)
			}
			b := &p.Metrics[0].Buckets
			for slot, want := range tc.slots {
				if got := b.Slot(slot); got != want {
					t.Errorf("Slot(%d) = %d, want %d", slot, got, want)
				}
			}
		})
	}
}

// TestSlotFixedSearch checks the search path of fixed buckets (keys past
// config.MaxBuckets) against the index path.
func TestSlotFixedSearch(t *testing.T) {
	small := NewBuckets(&config.Histogram{BucketType: config.BucketFixed, BucketKeys: []float64{0, 3, 3, 7, 100}})
	big := NewBuckets(&config.Histogram{BucketType: config.BucketFixed, BucketKeys: []float64{0, 3, 3, 7, 100, 1 << 40}})
	for slot := uint64(0); slot <= 100; slot++ { // 101 is small's sum slot
		if a, b := small.Slot(slot), big.Slot(slot); a != b {
			t.Errorf("Slot(%d): index %d, search %d", slot, a, b)
		}
	}
	if got := big.Slot(1 << 40); got != 5 {
		t.Errorf("Slot(2^40) = %d, want 5", got)
	}
}

// TestBundledProgramsCompile: every bundled config passes the new limits
// and compiles against its own object.
func TestBundledProgramsCompile(t *testing.T) {
	env := decoder.NewEnv(10)
	for _, name := range programs.Names() {
		y, err := fs.ReadFile(programs.FS, name+".yaml")
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Parse("programs/"+name+".yaml", y)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		obj, err := fs.ReadFile(programs.FS, name+".bpf.o")
		if err != nil {
			t.Fatal(err)
		}
		spec, err := ebpf.LoadCollectionSpecFromReader(bytes.NewReader(obj))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := Compile(cfg, spec, env); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
