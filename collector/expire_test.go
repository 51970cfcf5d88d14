// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"bytes"
	"errors"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kernel-exporter/kernel_exporter/config"
	"github.com/kernel-exporter/kernel_exporter/decoder"
	"github.com/kernel-exporter/kernel_exporter/programs"
)

// ttlYAML is counterYAML with a ttl of 10s.
var ttlYAML = strings.Replace(counterYAML, "      help: ops\n", "      help: ops\n      ttl: 10s\n", 1)

// ttlClock makes c's reads happen at the times set with the returned
// function (time since c's base).
func ttlClock(c *Config) func(time.Duration) {
	var at time.Duration
	c.clock = func() time.Time { return c.base.Add(at) }
	return func(d time.Duration) { at = d }
}

// ttlSet sets key k to v, on CPU 0 for a per-CPU map.
func ttlSet(t *testing.T, m *ebpf.Map, k []byte, v uint64) {
	t.Helper()
	var val any = u64(v)
	if m.Type() == ebpf.PerCPUHash || m.Type() == ebpf.LRUCPUHash {
		n, err := ebpf.PossibleCPU()
		if err != nil {
			t.Fatal(err)
		}
		vals := make([]uint64, n)
		vals[0] = v
		val = vals
	}
	if err := m.Put(k, val); err != nil {
		t.Fatal(err)
	}
}

// ttlInMap reports whether key k is in m.
func ttlInMap(t *testing.T, m *ebpf.Map, k []byte) bool {
	t.Helper()
	b, err := m.LookupBytes(k)
	if err != nil {
		t.Fatal(err)
	}
	return b != nil
}

// ttlSeries returns the series of the first family of a read, as
// "label=value,..." → value.
func ttlSeries(s *Snapshot) map[string]float64 {
	f := s.Families[0]
	out := map[string]float64{}
	for i := 0; i < f.Len(); i++ {
		var parts []string
		for j, n := range f.LabelNames {
			parts = append(parts, n+"="+f.LabelValues(i)[j])
		}
		out[strings.Join(parts, ",")] += f.Value(i)
	}
	return out
}

func ttlWant(t *testing.T, when string, got, want map[string]float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: series %v, want %v", when, got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("%s: series %v, want %v", when, got, want)
		}
	}
}

// TestTTLExpiresIdleKeys: a key idle for ttl is deleted from the map at the
// end of the read that finds it so (which still serves it), its series is
// gone from the next read, and it counts once in series_expired_total; a
// key that changed stays. For every map type that ttl accepts.
func TestTTLExpiresIdleKeys(t *testing.T) {
	for _, typ := range []ebpf.MapType{ebpf.Hash, ebpf.PerCPUHash, ebpf.LRUHash, ebpf.LRUCPUHash} {
		t.Run(typ.String(), func(t *testing.T) {
			c, maps := fixture(t, ttlYAML, &ebpf.MapSpec{Name: "ops_total", Type: typ, KeySize: 8, ValueSize: 8, MaxEntries: 64})
			m := maps["ops_total"]
			at := ttlClock(c)
			ttlSet(t, m, key(1, 1), 5)
			ttlSet(t, m, key(2, 2), 7)
			ttlWant(t, "t=0", ttlSeries(c.Read()), map[string]float64{"op=read,dev=1": 5, "op=write,dev=2": 7})
			at(5 * time.Second)
			ttlSet(t, m, key(1, 1), 6)
			ttlWant(t, "t=5s", ttlSeries(c.Read()), map[string]float64{"op=read,dev=1": 6, "op=write,dev=2": 7})
			at(9*time.Second + 999*time.Millisecond)
			c.Read()
			if !ttlInMap(t, m, key(2, 2)) || c.metrics[0].expired.Load() != 0 {
				t.Fatal("key deleted before its ttl")
			}
			at(10 * time.Second)
			// This read finds dev 2 idle for 10s: it serves it, then
			// deletes it.
			ttlWant(t, "t=10s", ttlSeries(c.Read()), map[string]float64{"op=read,dev=1": 6, "op=write,dev=2": 7})
			if ttlInMap(t, m, key(2, 2)) || !ttlInMap(t, m, key(1, 1)) {
				t.Fatal("t=10s: want dev 2 deleted from the map, dev 1 kept")
			}
			if n := c.metrics[0].expired.Load(); n != 1 {
				t.Fatalf("expired = %d, want 1", n)
			}
			at(11 * time.Second)
			ttlWant(t, "t=11s", ttlSeries(c.Read()), map[string]float64{"op=read,dev=1": 6})
			at(15 * time.Second)
			c.Read()
			at(16 * time.Second)
			ttlWant(t, "t=16s", ttlSeries(c.Read()), map[string]float64{})
			if n := c.metrics[0].expired.Load(); n != 2 || ttlInMap(t, m, key(1, 1)) {
				t.Fatalf("expired = %d, want 2, and dev 1 deleted", n)
			}
			// A key created again is a new series, from its new value.
			ttlSet(t, m, key(2, 2), 1)
			ttlWant(t, "t=16s again", ttlSeries(c.Read()), map[string]float64{"op=write,dev=2": 1})
			if got := ttlSelf(t, c, "kernel_exporter_series_expired_total"); got != 2 {
				t.Errorf("kernel_exporter_series_expired_total = %v, want 2", got)
			}
		})
	}
}

// ttlSelf returns the value of a self-metric of c (one series).
func ttlSelf(t *testing.T, c *Config, name string) float64 {
	t.Helper()
	st := &Status{}
	st.Add(&State{Name: c.name, Up: true, Collector: c})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(statusOnly{st})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			if len(mf.GetMetric()) != 1 {
				t.Fatalf("%s: %d series", name, len(mf.GetMetric()))
			}
			m := mf.GetMetric()[0]
			if got := labelsOf(m); got != "config=test,metric=kernel_ops_total" && got != "config=test,metric=kernel_lat_seconds" {
				t.Errorf("%s labels %s", name, got)
			}
			return m.GetCounter().GetValue()
		}
	}
	return -1
}

// TestTTLNoTTL: a config without ttl tracks nothing and has no
// series_expired_total series, and its idle keys stay.
func TestTTLNoTTL(t *testing.T) {
	c, maps := fixture(t, counterYAML, &ebpf.MapSpec{Name: "ops_total", Type: ebpf.Hash, KeySize: 8, ValueSize: 8, MaxEntries: 64})
	at := ttlClock(c)
	ttlSet(t, maps["ops_total"], key(1, 1), 5)
	c.Read()
	at(1000 * time.Hour)
	c.Read()
	if c.metrics[0].exp != nil || !ttlInMap(t, maps["ops_total"], key(1, 1)) {
		t.Error("a metric without ttl expired a key")
	}
	if c.ExpiryInterval() != 0 {
		t.Errorf("expiry interval %v, want 0", c.ExpiryInterval())
	}
	if got := ttlSelf(t, c, "kernel_exporter_series_expired_total"); got != -1 {
		t.Errorf("kernel_exporter_series_expired_total served without ttl: %v", got)
	}
}

// TestTTLCarry: a program that adds to an idle key between the read and
// its deletion loses nothing: the deleted element's whole value is carried
// and served with the key, the series stays (and is not counted expired),
// the program creating the key again adds to the carry, and the key
// expires once idle again. With lookup-and-delete, and with the lookup then
// delete of kernels before 5.14.
func TestTTLCarry(t *testing.T) {
	for _, noLAD := range []bool{false, true} {
		name := "lookup-and-delete"
		if noLAD {
			name = "lookup-then-delete"
		}
		t.Run(name, func(t *testing.T) {
			c, maps := fixture(t, ttlYAML, &ebpf.MapSpec{Name: "ops_total", Type: ebpf.Hash, KeySize: 8, ValueSize: 8, MaxEntries: 64})
			m := maps["ops_total"]
			x := c.metrics[0].exp
			x.noLookupDelete = noLAD
			at := ttlClock(c)
			ttlSet(t, m, key(1, 1), 5)
			c.Read()
			// Just before the deletion, the "program" adds 3.
			x.beforeDelete = func(k []byte) { ttlSet(t, m, k, 8) }
			at(10 * time.Second)
			ttlWant(t, "t=10s", ttlSeries(c.Read()), map[string]float64{"op=read,dev=1": 5})
			x.beforeDelete = nil
			if ttlInMap(t, m, key(1, 1)) {
				t.Fatal("key not deleted")
			}
			if n := c.metrics[0].expired.Load(); n != 0 {
				t.Fatalf("expired = %d, want 0: the key moved", n)
			}
			at(11 * time.Second)
			ttlWant(t, "t=11s", ttlSeries(c.Read()), map[string]float64{"op=read,dev=1": 8})
			// The program creates the key again and adds 2.
			ttlSet(t, m, key(1, 1), 2)
			at(12 * time.Second)
			ttlWant(t, "t=12s", ttlSeries(c.Read()), map[string]float64{"op=read,dev=1": 10})
			at(21 * time.Second)
			ttlWant(t, "t=21s", ttlSeries(c.Read()), map[string]float64{"op=read,dev=1": 10})
			if x.noLookupDelete != noLAD {
				t.Errorf("fell back to lookup then delete on this kernel")
			}
			at(22 * time.Second)
			c.Read() // idle since 12s: deleted, carry dropped
			at(23 * time.Second)
			ttlWant(t, "t=23s", ttlSeries(c.Read()), map[string]float64{})
			if n := c.metrics[0].expired.Load(); n != 1 || ttlInMap(t, m, key(1, 1)) || len(x.carried) != 0 || x.index.len() != 0 {
				t.Fatalf("expired = %d, carried %d, tracked %d; want 1, 0, 0 and the key deleted", n, len(x.carried), x.index.len())
			}
		})
	}
}

// TestTTLSeriesWaitsForAllKeys: keys of one series (op 1 and op 3 both
// decode to "read") are deleted only when all are idle, so that the
// series never goes down; and when one moved at the last moment, the
// others are carried with it (or kept in the map).
func TestTTLSeriesWaitsForAllKeys(t *testing.T) {
	c, maps := fixture(t, ttlYAML, &ebpf.MapSpec{Name: "ops_total", Type: ebpf.Hash, KeySize: 8, ValueSize: 8, MaxEntries: 64})
	m := maps["ops_total"]
	x := c.metrics[0].exp
	at := ttlClock(c)
	ttlSet(t, m, key(1, 1), 5)
	ttlSet(t, m, key(3, 1), 4)
	c.Read()
	at(5 * time.Second)
	ttlSet(t, m, key(3, 1), 6)
	c.Read()
	at(10 * time.Second)
	c.Read()
	if !ttlInMap(t, m, key(1, 1)) || !ttlInMap(t, m, key(3, 1)) {
		t.Fatal("an idle key of a busy series was deleted")
	}
	// At 15s both are idle; op 3 moves just before its deletion.
	x.beforeDelete = func(k []byte) {
		if string(k) == string(key(3, 1)) {
			ttlSet(t, m, k, 9)
		}
	}
	at(15 * time.Second)
	ttlWant(t, "t=15s", ttlSeries(c.Read()), map[string]float64{"op=read,dev=1": 11})
	x.beforeDelete = nil
	// op 1 is deleted and carried, or kept when op 3 came first (its
	// series then turned busy): either way the series keeps its total.
	if ttlInMap(t, m, key(3, 1)) || c.metrics[0].expired.Load() != 0 {
		t.Fatal("want op 3 deleted from the map, and no series expired")
	}
	at(16 * time.Second)
	ttlWant(t, "t=16s", ttlSeries(c.Read()), map[string]float64{"op=read,dev=1": 14})
	at(26 * time.Second)
	c.Read()
	at(27 * time.Second)
	ttlWant(t, "t=27s", ttlSeries(c.Read()), map[string]float64{})
	if n := c.metrics[0].expired.Load(); n != 1 {
		t.Fatalf("expired = %d, want 1 (one series of two keys)", n)
	}
}

// TestTTLHistogram: each bucket key is tracked apart; an idle bucket of a
// histogram that still moves stays (its cumulative counts never go
// down), and the series expires, once, when all its buckets are idle.
func TestTTLHistogram(t *testing.T) {
	y := histYAML("linear", "      bucket_max: 3\n      ttl: 4s\n")
	c, maps := fixture(t, y, &ebpf.MapSpec{Name: "lat_seconds", Type: ebpf.PerCPUHash, KeySize: 8, ValueSize: 8, MaxEntries: 64})
	m := maps["lat_seconds"]
	at := ttlClock(c)
	ttlSet(t, m, key(7, 1), 2)
	ttlSet(t, m, key(7, 3), 1)
	ttlSet(t, m, key(7, 4), 30) // sum slot
	c.Read()
	for s := 1; s <= 6; s++ {
		at(time.Duration(s) * time.Second)
		ttlSet(t, m, key(7, 1), uint64(2+s))
		ttlSet(t, m, key(7, 4), uint64(30+s))
		f := c.Read().Families[0]
		cum, count, _ := f.Histogram(0)
		if f.Len() != 1 || count != uint64(3+s) || cum[3] != uint64(3+s) || cum[1] != uint64(2+s) {
			t.Fatalf("t=%ds: %d series, count %d, buckets %v", s, f.Len(), count, cum)
		}
	}
	if !ttlInMap(t, m, key(7, 3)) {
		t.Fatal("the idle bucket of a busy histogram was deleted")
	}
	at(10 * time.Second)
	c.Read()
	at(11 * time.Second)
	if f := c.Read().Families[0]; f.Len() != 0 {
		t.Fatalf("%d series after all buckets idle for ttl", f.Len())
	}
	for _, k := range [][]byte{key(7, 1), key(7, 3), key(7, 4)} {
		if ttlInMap(t, m, k) {
			t.Errorf("bucket key %v still in the map", k)
		}
	}
	if n := c.metrics[0].expired.Load(); n != 1 {
		t.Errorf("expired = %d, want 1 series (not 3 bucket keys)", n)
	}
}

// TestTTLSkippedKeys: keys no series exports (a decoder failed on them)
// are deleted when idle, and counted as no series.
func TestTTLSkippedKeys(t *testing.T) {
	c, maps := fixture(t, ttlYAML, &ebpf.MapSpec{Name: "ops_total", Type: ebpf.Hash, KeySize: 8, ValueSize: 8, MaxEntries: 64})
	m := maps["ops_total"]
	at := ttlClock(c)
	ttlSet(t, m, key(9, 1), 5) // op 9: unknown:9 fails in errno, a decoder error
	c.Read()
	at(10 * time.Second)
	c.Read()
	if ttlInMap(t, m, key(9, 1)) || c.metrics[0].expired.Load() != 0 {
		t.Fatal("want the failed key deleted and no series counted")
	}
}

// TestTTLCompileRefusesArrays: ttl on a map whose entries cannot be
// deleted is refused at compile time.
func TestTTLCompileRefusesArrays(t *testing.T) {
	needBPF(t)
	for _, typ := range []ebpf.MapType{ebpf.Array, ebpf.PerCPUArray} {
		cfg := ttlParse(t, ttlYAML)
		cs := &ebpf.CollectionSpec{Maps: map[string]*ebpf.MapSpec{"ops_total": {Name: "ops_total", Type: typ, KeySize: 8, ValueSize: 8, MaxEntries: 4}}}
		_, err := Compile(cfg, cs, decoder.NewEnv(10))
		want := `test.yaml:5: metrics.counters[0].ttl: metric "ops_total": map "ops_total" is a ` + mapTypeName(typ) +
			` map, whose entries cannot be deleted: ttl needs a hash, percpu_hash, lru_hash or lru_percpu_hash map`
		if err == nil || err.Error() != want {
			t.Errorf("%v: error\n got: %v\nwant: %s", typ, err, want)
		}
	}
}

// TestTTLExpiryInterval: half the shortest ttl, at least a second.
func TestTTLExpiryInterval(t *testing.T) {
	for _, tc := range []struct {
		ttl  string
		want time.Duration
	}{{"10s", 5 * time.Second}, {"1s", time.Second}, {"1h", 30 * time.Minute}} {
		y := strings.Replace(ttlYAML, "ttl: 10s", "ttl: "+tc.ttl, 1)
		c, _ := fixture(t, y, &ebpf.MapSpec{Name: "ops_total", Type: ebpf.Hash, KeySize: 8, ValueSize: 8, MaxEntries: 4})
		if got := c.ExpiryInterval(); got != tc.want {
			t.Errorf("ttl %s: interval %v, want %v", tc.ttl, got, tc.want)
		}
	}
}

// TestTTLBackground: with no scrape at all, StartExpiry's reads delete an
// idle key (ttl 1s: a read every second), and stop ends them.
func TestTTLBackground(t *testing.T) {
	y := strings.Replace(ttlYAML, "ttl: 10s", "ttl: 1s", 1)
	c, maps := fixture(t, y, &ebpf.MapSpec{Name: "ops_total", Type: ebpf.Hash, KeySize: 8, ValueSize: 8, MaxEntries: 4})
	m := maps["ops_total"]
	ttlSet(t, m, key(1, 1), 5)
	stop := c.StartExpiry()
	deadline := time.Now().Add(10 * time.Second)
	for ttlInMap(t, m, key(1, 1)) {
		if time.Now().After(deadline) {
			stop()
			t.Fatal("idle key not deleted by background reads within 10s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	stop()
	stop() // idempotent
	if n := c.metrics[0].expired.Load(); n != 1 {
		t.Errorf("expired = %d, want 1", n)
	}
	last := c.lastStart.Load()
	time.Sleep(1500 * time.Millisecond)
	if c.lastStart.Load() != last {
		t.Error("a background read after stop")
	}
}

// TestTTLLookupAndDeleteSupported: this kernel has lookup-and-delete for
// hash maps (Linux 5.14+), so the exact path is the one tested above.
func TestTTLLookupAndDeleteSupported(t *testing.T) {
	needBPF(t)
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Hash, KeySize: 4, ValueSize: 8, MaxEntries: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Put(uint32(1), uint64(3)); err != nil {
		t.Fatal(err)
	}
	var v uint64
	err = m.LookupAndDelete(uint32(1), &v)
	if errors.Is(err, ebpf.ErrNotSupported) {
		t.Skip("kernel lacks BPF_MAP_LOOKUP_AND_DELETE_ELEM for hash maps (before 5.14): the lookup-then-delete path is used")
	}
	if err != nil || v != 3 {
		t.Fatalf("lookup and delete = %d, %v", v, err)
	}
}

func ttlParse(t *testing.T, y string) *config.Config {
	t.Helper()
	cfg, err := config.Parse("test.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestTTLBundledDefaults pins the default ttl of the bundled programs
// (docs/configuration.md gives them and why): metrics keyed by cgroup, by
// a listening port that may be ephemeral, or by comm and kernel address
// (cpu_profile) have one, no other metric does.
func TestTTLBundledDefaults(t *testing.T) {
	want := map[string]time.Duration{
		"kernel_oom_kills_total":                24 * time.Hour,
		"kernel_accept_queue_wait_seconds":      time.Hour,
		"kernel_tcp_syn_backlog":                time.Hour,
		"kernel_tcp_syncookies_sent_total":      24 * time.Hour,
		"kernel_tcp_syncookies_validated_total": 24 * time.Hour,
		// Library part 2 (issue 14).
		"kernel_accepted_connections_total":   10 * time.Minute,
		"kernel_connect_addr_not_avail_total": 24 * time.Hour,
		// Profiles (issue 26): keyed by kernel address and comm.
		"kernel_cpu_profile_samples_total": time.Hour,
	}
	env := decoder.NewEnv(10)
	seen := 0
	for _, name := range programs.Names() {
		y, err := fs.ReadFile(programs.FS, name+".yaml")
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Parse("programs/"+name+".yaml", y)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		obj, err := fs.ReadFile(programs.FS, name+".bpf.o")
		if err != nil {
			t.Fatal(err)
		}
		spec, err := ebpf.LoadCollectionSpecFromReader(bytes.NewReader(obj))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		plan, err := Compile(cfg, spec, env)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, mp := range plan.Metrics {
			if mp.TTL != want[mp.Name] {
				t.Errorf("%s: %s has ttl %v, want %v", name, mp.Name, mp.TTL, want[mp.Name])
			}
			if mp.TTL > 0 {
				seen++
			}
		}
	}
	if seen != len(want) {
		t.Errorf("%d metrics with a ttl, want %d", seen, len(want))
	}
}

// TestTTLCompact: after most of a large map expired, the tracking state
// is rebuilt small, and a carried key keeps its carry across the rebuild.
func TestTTLCompact(t *testing.T) {
	const n = 5000
	c, maps := fixture(t, ttlYAML, &ebpf.MapSpec{Name: "ops_total", Type: ebpf.Hash, KeySize: 8, ValueSize: 8, MaxEntries: n})
	m := maps["ops_total"]
	x := c.metrics[0].exp
	at := ttlClock(c)
	for dev := uint32(0); dev < n; dev++ {
		ttlSet(t, m, key(2, dev), 1)
	}
	c.Read()
	at(5 * time.Second)
	ttlSet(t, m, key(2, 0), 2) // dev 0 stays
	c.Read()
	x.beforeDelete = func(k []byte) {
		if string(k) == string(key(2, 1)) {
			ttlSet(t, m, k, 4) // dev 1 moves at the last moment: carried
		}
	}
	at(10 * time.Second)
	c.Read()
	x.beforeDelete = nil
	if len(x.ents) != 2 || x.index.len() != 2 || len(x.carried) != 1 {
		t.Fatalf("after expiry: %d slots, %d keys, %d carried; want 2, 2, 1", len(x.ents), x.index.len(), len(x.carried))
	}
	at(11 * time.Second)
	ttlWant(t, "t=11s", ttlSeries(c.Read()), map[string]float64{"op=write,dev=0": 2, "op=write,dev=1": 4})
	if n := c.metrics[0].expired.Load(); n != 4998 {
		t.Errorf("expired = %d, want 4998", n)
	}
}
