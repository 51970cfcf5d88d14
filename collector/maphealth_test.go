// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	dto "github.com/prometheus/client_model/go"
	"golang.org/x/sys/unix"
)

// mapSeries returns the value of the map health series of map name, and
// whether there is one.
func mapSeries(mfs map[string]*dto.MetricFamily, family, name string) (float64, bool) {
	for _, m := range mfs[family].GetMetric() {
		if !strings.HasSuffix(labelsOf(m), ",map="+name) {
			continue
		}
		if g := m.GetGauge(); g != nil {
			return g.GetValue(), true
		}
		return m.GetCounter().GetValue(), true
	}
	return 0, false
}

// kernelMemlock is the map's memlock as cilium/ebpf reads it from fdinfo,
// to check MapMemlock against.
func kernelMemlock(t *testing.T, m *ebpf.Map) uint64 {
	t.Helper()
	info, err := m.Info()
	if err != nil {
		t.Fatal(err)
	}
	v, ok := info.Memlock()
	if !ok {
		t.Fatal("no memlock in fdinfo")
	}
	return v
}

// opsYAML is one counter, ops_total, keyed by a u32 op.
const opsYAML = `metrics:
  counters:
    - name: ops_total
      help: ops
      labels:
        - name: op
          size: 4
          decoders:
            - name: uint
`

// TestMapHealth checks entries, max_entries and memory of a hash map a
// metric reads (counted by that read, not by a pass of its own), of an
// array (no entries series: it never fills), of hash maps no metric reads
// (counted by batch lookups and by keys), of an LRU hash, of a ring buffer
// (no entries), the type of each in kernel_exporter_map_info, and that
// internal maps are left out; and that a map at 90% is logged once and
// listed by FullMaps.
func TestMapHealth(t *testing.T) {
	c, maps := fixture(t, opsYAML,
		&ebpf.MapSpec{Name: "ops_total", Type: ebpf.Hash, KeySize: 4, ValueSize: 8, MaxEntries: 100},
		&ebpf.MapSpec{Name: "slots", Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 37},
		&ebpf.MapSpec{Name: "starts", Type: ebpf.Hash, KeySize: 8, ValueSize: 16, MaxEntries: 1000, Flags: unix.BPF_F_NO_PREALLOC}, // memory grows with entries (6.4+)
		&ebpf.MapSpec{Name: "pcpu_starts", Type: ebpf.PerCPUHash, KeySize: 4, ValueSize: 12, MaxEntries: 50},
		&ebpf.MapSpec{Name: "events", Type: ebpf.RingBuf, MaxEntries: 4096},
		&ebpf.MapSpec{Name: "lru", Type: ebpf.LRUHash, KeySize: 4, ValueSize: 8, MaxEntries: 64},
		&ebpf.MapSpec{Name: ".rodata", Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 1},
	)
	for i := uint32(0); i < 95; i++ {
		put(t, maps["ops_total"], key(i), 1)
	}
	for i := uint64(0); i < 321; i++ {
		if err := maps["starts"].Put(u64(i), make([]byte, 16)); err != nil {
			t.Fatal(err)
		}
	}
	for i := uint32(0); i < 5; i++ {
		put(t, maps["lru"], key(i), 1)
	}
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		t.Fatal(err)
	}
	for i := uint32(0); i < 7; i++ {
		if err := maps["pcpu_starts"].Put(key(i), make([][12]byte, ncpu)); err != nil {
			t.Fatal(err)
		}
	}
	var logged []string
	defer func(f func(string, string, int, int)) { fullLog = f }(fullLog)
	fullLog = func(config, name string, entries, max int) {
		logged = append(logged, fmt.Sprintf("%s %s %d/%d", config, name, entries, max))
	}

	mfs := collect(t, c) // two reads
	want := []struct {
		name, typ        string
		entries, max     float64
		hasEntries, full bool
	}{
		{"ops_total", "hash", 95, 100, true, true},
		{"slots", "percpu_array", 0, 37, false, false},
		{"starts", "hash", 321, 1000, true, false},
		{"pcpu_starts", "percpu_hash", 7, 50, true, false},
		{"events", "ringbuf", 0, 4096, false, false},
		{"lru", "lru_hash", 5, 64, true, false},
	}
	infos := map[string]string{}
	for _, m := range mfs["kernel_exporter_map_info"].GetMetric() {
		l := map[string]string{}
		for _, p := range m.GetLabel() {
			l[p.GetName()] = p.GetValue()
		}
		if m.GetGauge().GetValue() != 1 {
			t.Errorf("map_info %v = %v, want 1", l, m.GetGauge().GetValue())
		}
		infos[l["map"]] = l["type"]
	}
	if len(infos) != len(want) {
		t.Errorf("map_info series for %v, want one per map of %d", infos, len(want))
	}
	for _, w := range want {
		if infos[w.name] != w.typ {
			t.Errorf("%s: map_info type = %q, want %q", w.name, infos[w.name], w.typ)
		}
		got, ok := mapSeries(mfs, "kernel_exporter_map_entries", w.name)
		if ok != w.hasEntries || got != w.entries {
			t.Errorf("%s: entries = %v (series %v), want %v (series %v)", w.name, got, ok, w.entries, w.hasEntries)
		}
		if got, _ := mapSeries(mfs, "kernel_exporter_map_max_entries", w.name); got != w.max {
			t.Errorf("%s: max_entries = %v, want %v", w.name, got, w.max)
		}
		mem, _ := mapSeries(mfs, "kernel_exporter_map_memory_bytes", w.name)
		if k := kernelMemlock(t, maps[w.name]); mem <= 0 || mem != float64(k) {
			t.Errorf("%s: memory_bytes = %v, want the fdinfo memlock %d", w.name, mem, k)
		}
	}
	if _, ok := mapSeries(mfs, "kernel_exporter_map_max_entries", ".rodata"); ok {
		t.Error("internal map .rodata has a series")
	}
	if _, ok := mfs["kernel_exporter_map_update_errors_total"]; ok {
		t.Error("update errors served without a ke_map_update_errors map")
	}
	// The read map was counted by its metric's read: no counter of its own.
	for _, h := range c.maps {
		if h.name == "ops_total" && h.counter != nil {
			t.Error("ops_total got a counting pass of its own")
		}
	}
	if want := []string{"test ops_total 95/100"}; fmt.Sprint(logged) != fmt.Sprint(want) {
		t.Errorf("logged %q, want %q (once for two reads)", logged, want)
	}
	if got := c.FullMaps(); len(got) != 1 || got[0] != "ops_total (95/100)" {
		t.Errorf("FullMaps = %q", got)
	}
	// A map no metric reads is counted at most every UnreadCountEvery:
	// keys added since show at the first read after that.
	for i := uint64(321); i < 400; i++ {
		if err := maps["starts"].Put(u64(i), make([]byte, 16)); err != nil {
			t.Fatal(err)
		}
	}
	var now time.Time
	c.clock = func() time.Time { return now }
	now = c.base.Add(time.Hour)
	c.Read() // due: counted
	for i := uint64(400); i < 450; i++ {
		if err := maps["starts"].Put(u64(i), make([]byte, 16)); err != nil {
			t.Fatal(err)
		}
	}
	now = now.Add(UnreadCountEvery - time.Second)
	c.Read()
	if got, _ := mapSeries(collect(t, c), "kernel_exporter_map_entries", "starts"); got != 400 {
		t.Errorf("starts within %v of its last count: entries = %v, want 400 (not counted again)", UnreadCountEvery, got)
	}
	now = now.Add(UnreadCountEvery)
	if got, _ := mapSeries(collect(t, c), "kernel_exporter_map_entries", "starts"); got != 450 {
		t.Errorf("starts after %v: entries = %v, want 450", UnreadCountEvery, got)
	}

	// Below 90% again: no longer marked, and not logged again when it
	// fills up once more.
	for i := uint32(0); i < 10; i++ {
		if err := maps["ops_total"].Delete(key(i)); err != nil {
			t.Fatal(err)
		}
	}
	c.Read()
	if got := c.FullMaps(); len(got) != 0 {
		t.Errorf("FullMaps at 85%% = %q", got)
	}
	for i := uint32(0); i < 10; i++ {
		put(t, maps["ops_total"], key(i), 1)
	}
	c.Read()
	if len(logged) != 1 || len(c.FullMaps()) != 1 {
		t.Errorf("refilled: logged %q, FullMaps %q", logged, c.FullMaps())
	}
}

// TestEntryCounterKeys checks the key-by-key fallback and its bound.
func TestEntryCounterKeys(t *testing.T) {
	needBPF(t)
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Hash, KeySize: 4, ValueSize: 4, MaxEntries: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for i := uint32(0); i < 40; i++ {
		if err := m.Put(key(i), key(i)); err != nil {
			t.Fatal(err)
		}
	}
	c := newEntryCounter(m)
	c.noBatch = true
	if n, err := c.count(); err != nil || n != 40 {
		t.Errorf("count by keys = %d, %v; want 40", n, err)
	}
	c = newEntryCounter(m)
	c.size = 3 // several batches
	if n, err := c.count(); err != nil || n != 40 || c.noBatch {
		t.Errorf("count by batches = %d, %v (noBatch %v); want 40", n, err, c.noBatch)
	}
}

// TestMapUpdateErrors checks that the per-CPU counts in ke_map_update_errors
// are summed and served under the name of the map with that id, that ids
// of other maps are ignored, and that every hash-like map gets a series.
func TestMapUpdateErrors(t *testing.T) {
	c, maps := fixture(t, opsYAML,
		&ebpf.MapSpec{Name: "ops_total", Type: ebpf.Hash, KeySize: 4, ValueSize: 8, MaxEntries: 10},
		&ebpf.MapSpec{Name: "starts", Type: ebpf.LRUHash, KeySize: 4, ValueSize: 8, MaxEntries: 10},
		&ebpf.MapSpec{Name: "slots", Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 10},
		&ebpf.MapSpec{Name: UpdateErrorsMap, Type: ebpf.PerCPUHash, KeySize: 4, ValueSize: 8, MaxEntries: 64},
	)
	info, err := maps["ops_total"].Info()
	if err != nil {
		t.Fatal(err)
	}
	id, _ := info.ID()
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		t.Fatal(err)
	}
	vals := make([]uint64, ncpu)
	want := 0.0
	for i := range vals {
		vals[i] = uint64(3 + i)
		want += float64(3 + i)
	}
	if err := maps[UpdateErrorsMap].Put(uint32(id), vals); err != nil {
		t.Fatal(err)
	}
	if err := maps[UpdateErrorsMap].Put(uint32(0xffffff), vals); err != nil { // no map of ours
		t.Fatal(err)
	}
	mfs := collect(t, c)
	if got, ok := mapSeries(mfs, "kernel_exporter_map_update_errors_total", "ops_total"); !ok || got != want {
		t.Errorf("update errors of ops_total = %v (%v), want %v", got, ok, want)
	}
	if got, ok := mapSeries(mfs, "kernel_exporter_map_update_errors_total", "starts"); !ok || got != 0 {
		t.Errorf("update errors of starts = %v (%v), want 0", got, ok)
	}
	for _, name := range []string{"slots", UpdateErrorsMap} {
		if _, ok := mapSeries(mfs, "kernel_exporter_map_update_errors_total", name); ok {
			t.Errorf("%s has an update errors series", name)
		}
	}
	if n := len(mfs["kernel_exporter_map_update_errors_total"].GetMetric()); n != 2 {
		t.Errorf("%d update error series, want 2", n)
	}
}

func TestParseMemlock(t *testing.T) {
	in := "pos:\t0\nflags:\t02000002\nmnt_id:\t16\nino:\t1069\nmap_type:\t1\nkey_size:\t4\nvalue_size:\t8\nmax_entries:\t64\nmap_flags:\t0x0\nmap_extra:\t0x0\nmemlock:\t7376\nmap_id:\t52\nfrozen:\t0\n"
	if v, err := parseMemlock([]byte(in)); err != nil || v != 7376 {
		t.Errorf("parseMemlock = %d, %v", v, err)
	}
	for _, bad := range []string{"", "memlock:\tx\n", "memlock:\t-1\n", "memlock:\t99999999999999999999999\n", "xmemlock:\t5\n"} {
		if _, err := parseMemlock([]byte(bad)); err == nil {
			t.Errorf("parseMemlock(%q) did not fail", bad)
		}
	}
}

// BenchmarkMapHealth measures what map health adds to a read of a config
// with one hash map read by its metric (100 entries), one array and one
// hash map no metric reads (321 entries): the fdinfo reads of all three and
// the count of the unread map.
func BenchmarkMapHealth(b *testing.B) {
	needBPF(b)
	specs := []*ebpf.MapSpec{
		{Name: "ops_total", Type: ebpf.Hash, KeySize: 4, ValueSize: 8, MaxEntries: 1000},
		{Name: "slots", Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 37},
		{Name: "starts", Type: ebpf.Hash, KeySize: 8, ValueSize: 16, MaxEntries: 10240},
	}
	coll := &ebpf.Collection{Maps: map[string]*ebpf.Map{}}
	for _, ms := range specs {
		m, err := ebpf.NewMap(ms)
		if err != nil {
			b.Fatal(err)
		}
		defer m.Close()
		coll.Maps[ms.Name] = m
	}
	for i := uint32(0); i < 100; i++ {
		if err := coll.Maps["ops_total"].Put(i, uint64(1)); err != nil {
			b.Fatal(err)
		}
	}
	for i := uint64(0); i < 321; i++ {
		if err := coll.Maps["starts"].Put(i, [16]byte{}); err != nil {
			b.Fatal(err)
		}
	}
	c := &Config{name: "bench", metrics: []*metric{{MetricPlan: &MetricPlan{MapName: "ops_total"}}}}
	var err error
	if c.maps, c.updateErrs, err = newMapHealth(coll, c.metrics); err != nil {
		b.Fatal(err)
	}
	counted := []int{100}
	// "count": every read is due to count the unread map (a read at least
	// UnreadCountEvery after the last); "skip": reads in between.
	b.Run("count", func(b *testing.B) {
		b.ReportAllocs()
		now := time.Duration(0)
		for b.Loop() {
			now += UnreadCountEvery
			c.readMapHealth(counted, now)
		}
	})
	b.Run("skip", func(b *testing.B) {
		b.ReportAllocs()
		now := 1000 * UnreadCountEvery
		c.readMapHealth(counted, now)
		for b.Loop() {
			c.readMapHealth(counted, now+time.Second)
		}
	})
}

// BenchmarkMapMemlock measures one read of a map's memlock from fdinfo.
func BenchmarkMapMemlock(b *testing.B) {
	needBPF(b)
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Hash, KeySize: 4, ValueSize: 8, MaxEntries: 64})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	buf := make([]byte, fdinfoLimit)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := mapMemlock(m, buf); err != nil {
			b.Fatal(err)
		}
	}
}
