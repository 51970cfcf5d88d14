// SPDX-License-Identifier: Apache-2.0

package profile

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	pprof "github.com/google/pprof/profile"
)

// synthetic builds a CPU profile of process "burn" (pid 42) with burn_a
// at a of 1000 samples and burn_b at the rest, plus a kernel stack.
func synthetic(a int64) *Profile {
	in := newInterner()
	main := in.get(false, true, "/usr/bin/burn", "main", "abcd")
	ba := in.get(false, true, "/usr/bin/burn", "burn_a", "abcd")
	bb := in.get(false, true, "/usr/bin/burn", "burn_b", "abcd")
	sys := in.get(true, true, "[kernel.kallsyms]", "__x64_sys_getpid", "")
	entry := in.get(true, true, "[kernel.kallsyms]", "entry_SYSCALL_64", "")
	return &Profile{Kind: CPU, Event: EventCPUClock, Frequency: 99, Start: time.Unix(1700000000, 0), Duration: 10 * time.Second,
		Samples: []Sample{
			{PID: 42, Comm: "burn", Cgroup: 7, Stack: []*Frame{ba, main}, Value: a, Count: a},
			{PID: 42, Comm: "burn", Cgroup: 7, Stack: []*Frame{bb, main}, Value: 1000 - a, Count: 1000 - a},
			{PID: 43, Comm: "other", Cgroup: 8, Stack: []*Frame{sys, entry, main}, Value: 10, Count: 10},
			{PID: 0, Comm: "swapper/0", Stack: nil, Value: 5, Count: 5},
		}}
}

func TestFolded(t *testing.T) {
	p := synthetic(700)
	in := newInterner()
	p.Samples = append(p.Samples, Sample{PID: 44, Comm: "we;ird\n", Stack: []*Frame{in.get(false, false, "", "a;b\x1bc", "")}, Value: 3, Count: 3})
	var b bytes.Buffer
	if err := p.WriteFolded(&b, FoldedOptions{}); err != nil {
		t.Fatal(err)
	}
	want := "burn;main;burn_a 700\nburn;main;burn_b 300\nother;main;entry_SYSCALL_64_[k];__x64_sys_getpid_[k] 10\nswapper/0 5\nwe:ird?;a:b?c 3\n"
	if b.String() != want {
		t.Errorf("folded:\n%s\nwant:\n%s", b.String(), want)
	}
	back, err := ParseFolded(strings.NewReader(b.String()), CPU)
	if err != nil {
		t.Fatal(err)
	}
	var b2 bytes.Buffer
	_ = back.WriteFolded(&b2, FoldedOptions{})
	if b2.String() != want {
		t.Errorf("folded round trip:\n%s", b2.String())
	}
	for _, bad := range []string{"", "noval\n", "a;b -3\n", "a;b x\n", " 12\n"} {
		if _, err := ParseFolded(strings.NewReader(bad), CPU); err == nil {
			t.Errorf("ParseFolded(%q): no error", bad)
		}
	}
	// difffolded.pl's two counts: the second is taken.
	d, err := ParseFolded(strings.NewReader("a;b 3 5\na;c 2.7\n"), CPU)
	if err != nil || d.Total() != 7 {
		t.Errorf("two counts and a decimal: %v, total %d, want 7", err, d.Total())
	}
}

func TestPprofRoundTrip(t *testing.T) {
	for _, p := range []*Profile{synthetic(700), {Kind: OffCPU, Event: EventSchedSwitch, Start: time.Unix(1, 0), Samples: synthetic(1).Samples}} {
		var b bytes.Buffer
		if err := p.WritePprof(&b); err != nil {
			t.Fatal(err)
		}
		pp, err := pprof.Parse(bytes.NewReader(b.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		back, err := FromPprof(pp)
		if err != nil {
			t.Fatal(err)
		}
		if back.Kind != p.Kind || back.Total() != p.Total() || back.Event != p.Event {
			t.Errorf("%s: read back %s %s total %d, want %d", p.Kind, back.Kind, back.Event, back.Total(), p.Total())
		}
		var f1, f2 bytes.Buffer
		_ = p.WriteFolded(&f1, FoldedOptions{})
		_ = back.WriteFolded(&f2, FoldedOptions{})
		if f1.String() != f2.String() {
			t.Errorf("%s: stacks differ after pprof:\n%s\nwant\n%s", p.Kind, f2.String(), f1.String())
		}
		if p.Kind == CPU && (back.Frequency != 99 || pp.Period != int64(time.Second/99)) {
			t.Errorf("frequency %d, period %d", back.Frequency, pp.Period)
		}
		q, err := Parse(b.Bytes(), CPU)
		if err != nil || q.Total() != p.Total() {
			t.Errorf("Parse of pprof: %v", err)
		}
	}
}

func TestDiff(t *testing.T) {
	d, err := Diff(synthetic(700), synthetic(300))
	if err != nil {
		t.Fatal(err)
	}
	shrank, grew := d.Shrank(3, ByTotal), d.Grew(3, BySelf)
	if len(shrank) == 0 || shrank[0].Function != "burn_a" || len(grew) == 0 || grew[0].Function != "burn_b" {
		t.Fatalf("shrank %+v, grew %+v: want burn_a, burn_b first", shrank, grew)
	}
	total := float64(1015)
	if got, want := shrank[0].Delta.Total, (300-700)/total; abs(got-want) > 1e-9 {
		t.Errorf("burn_a delta %v, want %v", got, want)
	}
	for _, r := range d.Rows {
		if r.Function == "main" && abs(r.Delta.Total) > 1e-9 {
			t.Errorf("main moved by %v", r.Delta.Total)
		}
	}
	var b bytes.Buffer
	if err := d.WriteTable(&b, 5, ByTotal); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "shrank most:") || !strings.Contains(b.String(), "-39.4 pp   69.0%   29.6%  -39.4 pp  burn_a") {
		t.Errorf("table:\n%s", b.String())
	}
	b.Reset()
	if err := d.WriteFolded(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "burn;main;burn_a 700 300\n") {
		t.Errorf("difffolded:\n%s", b.String())
	}
	var a *DiffNode
	for _, c := range d.Tree.Children {
		if c.Name == "burn" {
			a = c.Children[0].Children[0]
		}
	}
	if a == nil || a.Name != "burn_a" || abs(a.Base-700/total) > 1e-9 || abs(a.New-300/total) > 1e-9 {
		t.Errorf("tree node %+v", a)
	}
	if _, err := Diff(synthetic(1), &Profile{Kind: CPU}); err == nil {
		t.Error("diff with an empty profile: no error")
	}
	if _, err := Diff(synthetic(1), &Profile{Kind: OffCPU}); err == nil {
		t.Error("diff of cpu with offcpu: no error")
	}
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

func TestFilterAndTree(t *testing.T) {
	p := synthetic(700)
	if n := p.Filter(Filter{}).Total(); n != 1010 {
		t.Errorf("default filter (no idle): total %d, want 1010", n)
	}
	if n := p.Filter(Filter{IncludeIdle: true}).Total(); n != 1015 {
		t.Errorf("with idle: total %d, want 1015", n)
	}
	k := p.Filter(Filter{KernelOnly: true})
	if len(k.Samples) != 1 || len(k.Samples[0].Stack) != 2 || !k.Samples[0].Stack[0].Kernel {
		t.Errorf("kernel only: %+v", k.Samples)
	}
	u := p.Filter(Filter{UserOnly: true, Comms: []string{"other"}})
	if len(u.Samples) != 1 || len(u.Samples[0].Stack) != 1 || u.Samples[0].Stack[0].Function != "main" {
		t.Errorf("user only, comm other: %+v", u.Samples)
	}
	if n := p.Filter(Filter{PIDs: []uint32{43}, Cgroups: []uint64{8}}).Total(); n != 10 {
		t.Errorf("pid 43 cgroup 8: %d", n)
	}
	tr := p.Tree(TreeOptions{ByProcess: true})
	if tr.Total != 1015 || len(tr.Children) != 3 || tr.Children[0].Name != "burn (42)" || tr.Children[0].Children[0].Total != 1000 {
		t.Errorf("tree: %+v", tr)
	}
	fs := p.Functions()
	if fs[0].Function != "main" || fs[0].Total != 1010 || fs[0].Self != 0 {
		t.Errorf("functions: %+v", fs[0])
	}
	if err := (Filter{KernelOnly: true, UserOnly: true}).Check(); err == nil {
		t.Error("kernel-only and user-only: no error")
	}
}

// TestHandlerRefuses checks what the handler answers before it loads
// anything: bad parameters, methods and paths.
func TestHandlerRefuses(t *testing.T) {
	h := NewHandler(HandlerOptions{})
	for _, c := range []struct {
		method, url string
		code        int
	}{
		{"GET", "/profile/cpu?seconds=0", 400},
		{"GET", "/profile/cpu?seconds=301", 400},
		{"GET", "/profile/cpu?seconds=x", 400},
		{"GET", "/profile/cpu?frequency=1000", 400},
		{"GET", "/profile/cpu?min_block=1ms", 400},
		{"GET", "/profile/offcpu?frequency=99", 400},
		{"GET", "/profile/offcpu?min_block=2m", 400},
		{"GET", "/profile/cpu?format=svg", 400},
		{"GET", "/profile/cpu?pid=abc", 400},
		{"GET", "/profile/cpu?stacks=none", 400},
		{"GET", "/profile/cpu?seconds=1&seconds=2", 400},
		{"GET", "/profile/cpu?cgroup=../x", 400},
		{"GET", "/profile/cpu?bogus=1", 400},
		{"POST", "/profile/cpu", 405},
		{"GET", "/profile/other", 404},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(c.method, c.url, nil))
		if rec.Code != c.code {
			t.Errorf("%s %s: %d %q, want %d", c.method, c.url, rec.Code, rec.Body.String(), c.code)
		}
	}
	h.Detach("profile:cpu", "over the CPU budget")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/profile/cpu?seconds=1", nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "CPU budget") {
		t.Errorf("detached: %d %q, want 503 with the reason", rec.Code, rec.Body.String())
	}
}

// TestDisabledRoutes: without --profile.enable every profile path, and the
// extra ones, answer 403 naming the flag.
func TestDisabledRoutes(t *testing.T) {
	routes := DisabledRoutes("/ui/profile/")
	for _, p := range []string{PathCPU, PathOffCPU, PathFlame, PathDiff, PathRecent, "/ui/profile/"} {
		h := routes[p]
		if h == nil {
			t.Errorf("%s: no handler", p)
			continue
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", p, nil))
		if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "not enabled (--profile.enable)") {
			t.Errorf("%s: %d %q, want 403 naming --profile.enable", p, rec.Code, rec.Body.String())
		}
	}
}

func TestParseDetects(t *testing.T) {
	if _, err := Parse([]byte("\x00\x01binary"), CPU); err == nil {
		t.Error("binary garbage: no error")
	}
	if _, err := Parse([]byte{0x1f, 0x8b, 0, 0}, CPU); err == nil {
		t.Error("broken gzip: no error")
	}
	p, err := Parse([]byte("a;b 1\n"), OffCPU)
	if err != nil || p.Kind != OffCPU || p.Total() != 1 {
		t.Errorf("folded: %v %+v", err, p)
	}
}

func FuzzParseFolded(f *testing.F) {
	f.Add([]byte("burn;main;burn_a 700\nburn;main;burn_b 300\n"))
	f.Add([]byte("a;b_[k] 3 5\n\n a;c 2.7\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseFolded(bytes.NewReader(data), CPU)
		if err != nil {
			return
		}
		var b bytes.Buffer
		if err := p.WriteFolded(&b, FoldedOptions{}); err != nil {
			t.Fatal(err)
		}
		q, err := ParseFolded(&b, CPU)
		if err != nil {
			t.Fatalf("re-parse of our own output: %v\n%q", err, b.String())
		}
		if q.Total() != p.Total() {
			t.Fatalf("total %d after a round trip, want %d", q.Total(), p.Total())
		}
	})
}

// FuzzParse feeds Parse (pprof, gzipped or not, or folded) anything, and
// checks that what it accepts can be written and compared.
func FuzzParse(f *testing.F) {
	var b bytes.Buffer
	_ = synthetic(700).WritePprof(&b)
	f.Add(b.Bytes())
	pp, _ := synthetic(300).Pprof()
	var raw bytes.Buffer
	_ = pp.WriteUncompressed(&raw)
	f.Add(raw.Bytes())
	f.Add([]byte("a;b 1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse(data, CPU)
		if err != nil {
			return
		}
		var out bytes.Buffer
		_ = p.WritePprof(&out)
		_ = p.WriteFolded(&out, FoldedOptions{})
		_ = p.Tree(TreeOptions{ByProcess: true})
		if d, err := Diff(p, p); err == nil {
			_ = d.WriteTable(&out, 5, BySelf)
			_ = d.WriteFolded(&out)
		}
	})
}

// TestDiffUnknownFramesByCommand (issue 31): profile diff ranked
// "[unknown]+0x49f1e1" first, the frames of unrelated short-lived
// processes at one address added up as one function. A pprof whose frames
// are in no file, written by an earlier version with the address in the
// name or with no name at all, reads back named by each sample's command
// ("[unknown in go]", "[anon in java]"), so two commands' frames at the
// same address stay apart in a diff, and the table's changes are in
// percentage points.
func TestDiffUnknownFramesByCommand(t *testing.T) {
	in := newInterner()
	main := in.get(false, true, "/usr/bin/burn", "main", "")
	old := in.get(false, false, "[unknown]", "[unknown]+0x49f1e1", "")
	anon := in.get(false, false, "[anon]", "[anon]+0x7f3c0000a000", "")
	mk := func(goN, ccN int64) *Profile {
		return &Profile{Kind: CPU, Event: EventCPUClock, Frequency: 99, Duration: time.Second, Samples: []Sample{
			{PID: 1, Comm: "burn", Stack: []*Frame{main}, Value: 100, Count: 100},
			{PID: 2, Comm: "go", Stack: []*Frame{old}, Value: goN, Count: goN},
			{PID: 3, Comm: "cc1", Stack: []*Frame{old}, Value: ccN, Count: ccN},
			{PID: 4, Comm: "java", Stack: []*Frame{anon}, Value: 10, Count: 10},
		}}
	}
	read := func(p *Profile) *Profile {
		var b bytes.Buffer
		if err := p.WritePprof(&b); err != nil {
			t.Fatal(err)
		}
		back, err := Parse(b.Bytes(), CPU)
		if err != nil {
			t.Fatal(err)
		}
		return back
	}
	base, now := read(mk(50, 50)), read(mk(90, 10))
	names := map[string]bool{}
	for _, s := range now.Samples {
		for _, f := range s.Stack {
			names[f.Function] = true
		}
	}
	for _, want := range []string{"[unknown in go]", "[unknown in cc1]", "[anon in java]"} {
		if !names[want] {
			t.Errorf("frames %v: no %q", names, want)
		}
	}
	for n := range names {
		if strings.Contains(n, "+0x") {
			t.Errorf("frame %q: named by an address", n)
		}
	}
	d, err := Diff(base, now)
	if err != nil {
		t.Fatal(err)
	}
	grew, shrank := d.Grew(1, ByTotal), d.Shrank(1, ByTotal)
	if len(grew) != 1 || grew[0].Function != "[unknown in go]" || len(shrank) != 1 || shrank[0].Function != "[unknown in cc1]" {
		t.Errorf("grew %+v, shrank %+v: want [unknown in go] and [unknown in cc1] apart", grew, shrank)
	}
	var b bytes.Buffer
	if err := d.WriteTable(&b, 1, ByTotal); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "changes (Δ) in percentage points (pp)") || !strings.Contains(b.String(), "+19.0 pp   23.8%   42.9%  +19.0 pp  [unknown in go]") {
		t.Errorf("table:\n%s", b.String())
	}
}
