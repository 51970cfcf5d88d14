// SPDX-License-Identifier: Apache-2.0

package profile

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestFlameTree checks the JSON flame graph of the synthetic profile in
// each view: totals, the levels under the root, and pruning.
func TestFlameTree(t *testing.T) {
	p := synthetic(700)
	for _, c := range []struct {
		view  string
		first []string // names under the root
		depth int      // levels from the root to burn_a
	}{
		{"", []string{"burn", "other"}, 3},
		{ViewComm, []string{"burn", "other"}, 3},
		{ViewProcess, []string{"burn (42)", "other (43)"}, 3},
		{ViewCgroup, []string{"/seven", "cgroup 0", "cgroup 8"}, 4},
		{ViewStack, []string{"main"}, 2},
	} {
		g, err := FlameTree(p, c.view, func(id uint64) string {
			if id == 7 {
				return "/seven"
			}
			return ""
		})
		if err != nil {
			t.Fatal(err)
		}
		// The idle task's sample is in the profile: Tree keeps it.
		if g.Total != 1015 || g.Tree.Total != 1015 || g.Tree.Name != "all" {
			t.Errorf("%s: total %d, root %q %d", c.view, g.Total, g.Tree.Name, g.Tree.Total)
		}
		var names []string
		for _, ch := range g.Tree.Children {
			names = append(names, ch.Name)
		}
		if c.view != ViewStack && !strings.HasPrefix(strings.Join(names, ","), strings.Join(c.first, ",")) {
			t.Errorf("%s: first level %v, want %v first", c.view, names, c.first)
		}
		var find func(n *FlameNode, d int) int
		find = func(n *FlameNode, d int) int {
			if n.Name == "burn_a" {
				if n.Total != 700 || n.Self != 700 || n.Module != "/usr/bin/burn" {
					t.Errorf("%s: burn_a %+v", c.view, n)
				}
				return d
			}
			for _, ch := range n.Children {
				if r := find(ch, d+1); r >= 0 {
					return r
				}
			}
			return -1
		}
		if d := find(g.Tree, 0); d != c.depth {
			t.Errorf("%s: burn_a at depth %d, want %d", c.view, d, c.depth)
		}
	}
	if _, err := FlameTree(p, "bogus", nil); err == nil {
		t.Error("view bogus: no error")
	}

	// Pruning: 60,000 distinct one-sample stacks under a large one.
	in := newInterner()
	big := &Profile{Kind: CPU, Samples: []Sample{{PID: 1, Comm: "a", Stack: []*Frame{in.get(false, true, "", "hot", "")}, Value: 1e9}}}
	for i := range 60_000 {
		big.Samples = append(big.Samples, Sample{PID: 1, Comm: "a", Stack: []*Frame{in.get(false, true, "", fmt.Sprint("f", i), "")}, Value: 1})
	}
	g, err := FlameTree(big, ViewComm, nil)
	if err != nil {
		t.Fatal(err)
	}
	if g.Pruned != 60_000 || len(g.Tree.Children[0].Children) != 1 {
		t.Errorf("pruned %d, kept %d under the comm", g.Pruned, len(g.Tree.Children[0].Children))
	}
	// Equal small values beyond MaxTreeNodes: cut to at most that many.
	for i := range big.Samples {
		big.Samples[i].Value = 1
	}
	g, _ = FlameTree(big, ViewComm, nil)
	var count func(*FlameNode) int
	count = func(n *FlameNode) int {
		c := 1
		for _, ch := range n.Children {
			c += count(ch)
		}
		return c
	}
	if n := count(g.Tree); n > MaxTreeNodes || n+g.Pruned != 60_003 {
		t.Errorf("%d nodes sent, %d pruned, want at most %d sent and 60003 in all", n, g.Pruned, MaxTreeNodes)
	}
}

// TestFlameHandler drives the page's endpoints on kept profiles (no BPF):
// flame by id and view, the recent list, diffs of two kept profiles and of
// one and an upload (pprof, gzipped and folded), and what they refuse.
func TestFlameHandler(t *testing.T) {
	h := NewHandler(HandlerOptions{})
	base := h.recent.add(synthetic(700), Filter{PIDs: []uint32{42}})
	newer := h.recent.add(synthetic(300), Filter{})
	if base.ID != 1 || newer.ID != 2 || !strings.Contains(base.Label, "(pid=42)") {
		t.Fatalf("kept %+v %+v", base, newer)
	}
	do := func(method, target, ctype string, body []byte) (int, []byte) {
		req := httptest.NewRequest(method, target, bytes.NewReader(body))
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		b, _ := io.ReadAll(rec.Result().Body)
		return rec.Code, b
	}
	code, body := do("GET", "/profile/flame?id=1&view=process", "", nil)
	var g FlameGraph
	if code != 200 || json.Unmarshal(body, &g) != nil || g.ID != 1 || g.View != ViewProcess || g.Filter != "pid=42" || g.Tree.Children[0].Name != "burn (42)" {
		t.Errorf("flame: %d %.300s", code, body)
	}
	code, body = do("GET", "/profile/recent", "", nil)
	var rec []RecentProfile
	if code != 200 || json.Unmarshal(body, &rec) != nil || len(rec) != 2 || rec[0].ID != 2 {
		t.Errorf("recent: %d %s", code, body)
	}

	checkDiff := func(what string, code int, body []byte) {
		t.Helper()
		var d DiffGraph
		if code != 200 {
			t.Errorf("%s: %d %s", what, code, body)
			return
		}
		if err := json.Unmarshal(body, &d); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if len(d.Shrank) == 0 || d.Shrank[0].Function != "burn_a" || len(d.Grew) == 0 || d.Grew[0].Function != "burn_b" {
			t.Errorf("%s: grew %+v shrank %+v", what, d.Grew, d.Shrank)
			return
		}
		if s := d.Shrank[0]; abs(s.Delta-(0.3-0.7)*1000/1015) > 1e-3 {
			t.Errorf("%s: burn_a delta %v", what, s.Delta)
		}
		// burn_a's frame: new 30%, base 70% of each total.
		var find func(*DiffFlameNode) *DiffFlameNode
		find = func(n *DiffFlameNode) *DiffFlameNode {
			if n.Name == "burn_a" {
				return n
			}
			for _, c := range n.Children {
				if f := find(c); f != nil {
					return f
				}
			}
			return nil
		}
		if f := find(d.Tree); f == nil || abs(f.New-300.0/1015) > 1e-3 || abs(f.Base-700.0/1015) > 1e-3 {
			t.Errorf("%s: burn_a node %+v", what, f)
		}
	}
	code, body = do("GET", "/profile/diff?base=1&new=2", "", nil)
	checkDiff("diff of kept", code, body)

	var pb, gz bytes.Buffer
	_ = synthetic(700).WritePprof(&pb) // gzipped
	code, body = do("POST", "/profile/diff?new=2", "application/octet-stream", pb.Bytes())
	checkDiff("diff with pprof upload", code, body)
	var folded bytes.Buffer
	_ = synthetic(700).WriteFolded(&folded, FoldedOptions{})
	code, body = do("POST", "/profile/diff?new=2", "application/octet-stream", folded.Bytes())
	checkDiff("diff with folded upload", code, body)
	// The kept one as base, the upload as new.
	_ = synthetic(300).WriteFolded(&gz, FoldedOptions{})
	code, body = do("POST", "/profile/diff?base=1", "application/octet-stream", gz.Bytes())
	checkDiff("diff with the upload as new", code, body)

	// A gzip bomb: more than MaxUploadUncompressed once inflated.
	var bomb bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&bomb, gzip.BestCompression)
	zero := make([]byte, 1<<20)
	for range MaxUploadUncompressed>>20 + 1 {
		zw.Write(zero)
	}
	zw.Close()
	for _, c := range []struct {
		method, target, ctype string
		body                  []byte
		code                  int
		msg                   string
	}{
		{"GET", "/profile/flame?id=9", "", nil, 404, "profile 9 is not kept"},
		{"GET", "/profile/flame?id=x", "", nil, 400, `id "x"`},
		{"GET", "/profile/flame?id=1&view=bogus", "", nil, 400, "view"},
		{"GET", "/profile/flame?id=1&x=1", "", nil, 400, "unknown parameter"},
		{"POST", "/profile/flame?id=1", "", nil, 405, "use GET"},
		{"GET", "/profile/diff?base=1", "", nil, 400, "new: give one profile id"},
		{"POST", "/profile/diff?new=2", "text/plain", folded.Bytes(), 415, "application/octet-stream"},
		{"POST", "/profile/diff?new=2&base=1", "application/octet-stream", folded.Bytes(), 400, "not both"},
		{"POST", "/profile/diff?new=2", "application/octet-stream", []byte("\x00\x01garbage"), 400, "uploaded profile"},
		{"POST", "/profile/diff?new=2", "application/octet-stream", bomb.Bytes(), 400, "bytes uncompressed"},
		{"POST", "/profile/diff?new=2", "application/octet-stream", make([]byte, MaxUpload+1), 413, "larger than"},
		{"PUT", "/profile/diff?new=2", "", nil, 405, "GET or POST"},
		{"GET", "/profile/cpu?seconds=1&view=process", "", nil, 400, "view applies to format=tree"},
		{"GET", "/profile/cpu?seconds=1&format=svg", "", nil, 400, "pprof, folded or tree"},
		{"GET", "/profile/cpu?seconds=1&format=tree&view=x", "", nil, 400, "view"},
	} {
		code, body := do(c.method, c.target, c.ctype, c.body)
		if code != c.code || !strings.Contains(string(body), c.msg) {
			t.Errorf("%s %s: %d %.200q, want %d with %q", c.method, c.target, code, body, c.code, c.msg)
		}
	}

	// The oldest kept profiles go past MaxRecentProfiles.
	for range MaxRecentProfiles {
		h.recent.add(synthetic(500), Filter{})
	}
	if _, ok := h.recent.get(1); ok {
		t.Error("profile 1 still kept")
	}
	if n := len(h.recent.all()); n != MaxRecentProfiles {
		t.Errorf("%d kept, want %d", n, MaxRecentProfiles)
	}
}
