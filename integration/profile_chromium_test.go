// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// flameFrame is a frame the page drew (window.keFlame.frames()).
type flameFrame struct {
	Name   string  `json:"name"`
	Kernel bool    `json:"kernel"`
	X      float64 `json:"x"`
	Y      float64 `json:"y"`
	W      float64 `json:"w"`
	Fill   string  `json:"fill"`
	Depth  int     `json:"depth"`
}

// jsonTree is a node of /profile/flame's tree.
type jsonTree struct {
	N string      `json:"n"`
	K bool        `json:"k"`
	T int64       `json:"t"`
	S int64       `json:"s"`
	C []*jsonTree `json:"c"`
}

// TestProfileChromium opens the flame graph page (/ui/profile/) of an
// exporter run with --profile.enable in headless Chromium while a
// frame-pointer process spends 70% of its time in burn_a. It takes a 6 s
// profile of that process from the page (499 Hz, as TestProfileCLI), types
// burn_a in the search box, and measures in a screenshot of the canvas the
// columns of the highlight colour: their share of the width must match
// burn_a's share of the profile's samples (from /profile/flame's tree,
// within 2 points: pixel rounding) and the truth (within 10 points, the
// tolerance of the profile tests). A click on burn_a zooms it to the full
// width. Then the same process at 30% is profiled, compared with the 70%
// profile (kept by the page) and with that profile uploaded as folded
// stacks: burn_a's frame is drawn blue (shrinking) and heads the "shrank
// most" table. The page requests nothing but the exporter.
func TestProfileChromium(t *testing.T) {
	chromiumPath := findChromium(t)
	e := Start(t, "--programs=timers", "--profile.enable")
	self, err := url.Parse(e.URL)
	if err != nil {
		t.Fatal(err)
	}
	w70 := startProfWorkload(t, "burn", "0.7", "20")
	w70.Begin()
	ctx := chromiumBrowser(t, chromiumPath)
	requests := recordRequests(t, ctx, chromiumPath)
	if err := chromedp.Do(ctx, chromedp.Navigate(e.URL+"/ui/profile/")); err != nil {
		t.Fatalf("open %s/ui/profile/: %v", e.URL, err)
	}
	eval := func(js string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("evaluate %.80s: %v", js, err)
		}
		return s
	}
	// take profiles pid from the page and waits for its flame graph.
	take := func(pid uint32) int {
		t.Helper()
		eval(fmt.Sprintf(`(() => { const f = document.getElementById('take');
			f.pid.value = '%d'; f.seconds.value = '6'; f.frequency.value = '499';
			document.getElementById('search').value = '';
			document.getElementById('go').click(); return 'ok'; })()`, pid))
		deadline := time.Now().Add(40 * time.Second)
		for {
			state := eval(`document.body.dataset.state + ' ' + document.getElementById('status').textContent`)
			if strings.HasPrefix(state, "flame ") {
				break
			}
			if strings.HasPrefix(state, "error ") || time.Now().After(deadline) {
				t.Fatalf("page state %q\n%s", state, e.Logs())
			}
			time.Sleep(300 * time.Millisecond)
		}
		id, _ := strconv.Atoi(eval(`document.body.dataset.id`))
		return id
	}
	frames := func() []flameFrame {
		t.Helper()
		var out []flameFrame
		if err := json.Unmarshal([]byte(eval(`JSON.stringify(window.keFlame.frames())`)), &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	shot := func(name string) image.Image {
		t.Helper()
		eval(`(() => { document.getElementById('flame').scrollIntoView({block: 'start'}); return 'ok'; })()`)
		b, err := chromedp.Run(ctx, chromedp.Screenshot("#flame"))
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(t.TempDir(), name)
		_ = os.WriteFile(file, b, 0o644)
		if d := os.Getenv("KE_UI_SCREENSHOT_DIR"); d != "" {
			_ = os.WriteFile(filepath.Join(d, name), b, 0o644)
		}
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("decode %s: %v", file, err)
		}
		t.Logf("screenshot %s: %v", file, img.Bounds())
		return img
	}
	// highlighted returns the share of the image's columns with a pixel
	// of the highlight colour, rgb(230,0,230).
	highlighted := func(img image.Image) float64 {
		b := img.Bounds()
		cols := 0
		for x := b.Min.X; x < b.Max.X; x++ {
			for y := b.Min.Y; y < b.Max.Y; y++ {
				r, g, bl, _ := img.At(x, y).RGBA()
				if absDiff(r>>8, 230)+absDiff(g>>8, 0)+absDiff(bl>>8, 230) < 30 {
					cols++
					break
				}
			}
		}
		return float64(cols) / float64(b.Dx())
	}

	id70 := take(w70.PID)
	// burn_a's share of the profile, from the tree the page drew.
	var g struct {
		Total int64     `json:"total"`
		Tree  *jsonTree `json:"tree"`
	}
	if err := json.Unmarshal([]byte(e.Get(fmt.Sprintf("/profile/flame?id=%d", id70))), &g); err != nil {
		t.Fatal(err)
	}
	var burnA int64
	var walk func(n *jsonTree, in bool)
	walk = func(n *jsonTree, in bool) {
		if n.N == "burn_a" && !in {
			burnA += n.T
			in = true
		}
		for _, c := range n.C {
			walk(c, in)
		}
	}
	walk(g.Tree, false)
	share := float64(burnA) / float64(g.Total)

	if err := chromedp.Do(ctx, chromedp.SendKeys("#search", "burn_a")); err != nil {
		t.Fatal(err)
	}
	pageShare, _ := strconv.ParseFloat(eval(`document.getElementById('matched').dataset.share || ''`), 64)
	width := highlighted(shot("profile-search.png"))
	t.Logf("profile #%d of %d samples: burn_a %d samples (%.1f%%); the page says %.1f%%; highlighted columns %.1f%% of the width",
		id70, g.Total, burnA, 100*share, 100*pageShare, 100*width)
	// The process gets what the loaded machine leaves it: 648 samples
	// in one run (22% of a CPU).
	if g.Total < 300 {
		t.Errorf("%d samples in 6 s at 499 Hz, want at least 300", g.Total)
	}
	if math.Abs(width-share) > 0.02 || math.Abs(pageShare-share) > 0.001 {
		t.Errorf("highlighted width %.1f%%, page %.1f%%, burn_a's share %.1f%%: want the width within 2 points of the share", 100*width, 100*pageShare, 100*share)
	}
	if math.Abs(share-0.7) > 0.10 {
		t.Errorf("burn_a's share %.1f%%, want 60 to 80%%", 100*share)
	}

	// Zoom: a click on burn_a's frame makes it the full width.
	var a *flameFrame
	for _, f := range frames() {
		if f.Name == "burn_a" && (a == nil || f.W > a.W) {
			f := f
			a = &f
		}
	}
	if a == nil {
		t.Fatal("no burn_a frame drawn")
	}
	type box struct{ X, Y, W float64 }
	var cb box
	if err := json.Unmarshal([]byte(eval(`(() => { const b = document.getElementById('flame').getBoundingClientRect(); return JSON.stringify({X: b.x, Y: b.y, W: b.width}); })()`)), &cb); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.MouseClickXY(cb.X+a.X+a.W/2, cb.Y+a.Y+8)); err != nil {
		t.Fatal(err)
	}
	zoomed := 0.0
	for _, f := range frames() {
		if f.Name == "burn_a" {
			zoomed = f.W / cb.W
		}
	}
	zw := highlighted(shot("profile-zoom.png"))
	t.Logf("zoomed on burn_a: its frame is %.1f%% of the width, highlighted columns %.1f%%", 100*zoomed, 100*zw)
	if zoomed < 0.999 || zw < 0.98 {
		t.Errorf("after a click on burn_a: frame %.1f%%, highlighted %.1f%% of the width, want all of it", 100*zoomed, 100*zw)
	}

	// Compare: the same process at 30% against the 70% profile.
	w70.End()
	w30 := startProfWorkload(t, "burn", "0.3", "20")
	w30.Begin()
	id30 := take(w30.PID)
	checkDiff := func(how, name string) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for eval(`document.body.dataset.state`) != "diff" {
			if time.Now().After(deadline) {
				t.Fatalf("%s: no differential flame graph; status %q", how, eval(`document.getElementById('status').textContent`))
			}
			time.Sleep(200 * time.Millisecond)
		}
		img := shot(name)
		var fa *flameFrame
		for _, f := range frames() {
			if f.Name == "burn_a" && (fa == nil || f.W > fa.W) {
				f := f
				fa = &f
			}
		}
		if fa == nil {
			t.Fatalf("%s: no burn_a frame", how)
		}
		px := img.At(int(fa.X+fa.W/2), int(fa.Y+3))
		r, gg, b, _ := px.RGBA()
		first := eval(`(() => { const c = document.querySelector('table[data-table="shrank"] tbody td.fn'); return c ? c.textContent : ''; })()`)
		t.Logf("%s: burn_a frame %.0f px wide, fill %s, pixel rgb(%d,%d,%d); first in shrank most: %q", how, fa.W, fa.Fill, r>>8, gg>>8, b>>8, first)
		if !(b>>8 >= 200 && r>>8+60 < b>>8 && gg>>8+60 < b>>8) {
			t.Errorf("%s: burn_a drawn rgb(%d,%d,%d), want blue (shrinking)", how, r>>8, gg>>8, b>>8)
		}
		if first != "burn_a" {
			t.Errorf("%s: shrank most starts with %q, want burn_a", how, first)
		}
	}
	// The 70% profile, kept by the exporter, as the base.
	eval(fmt.Sprintf(`(() => { const c = document.getElementById('compare'); c.value = '%d'; c.dispatchEvent(new Event('change')); return c.value; })()`, id70))
	checkDiff(fmt.Sprintf("#%d against #%d", id30, id70), "profile-diff.png")

	// The 70% profile uploaded as folded stacks (from its tree).
	var lines []string
	var fold func(n *jsonTree, path []string)
	fold = func(n *jsonTree, path []string) {
		name := n.N
		if n.K {
			name += "_[k]"
		}
		path = append(path, name)
		if n.S > 0 && len(path) > 1 {
			lines = append(lines, strings.Join(path[1:], ";")+" "+strconv.FormatInt(n.S, 10))
		}
		for _, c := range n.C {
			fold(c, path)
		}
	}
	fold(g.Tree, nil)
	sort.Strings(lines)
	up := filepath.Join(t.TempDir(), "base.folded")
	if err := os.WriteFile(up, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	eval(`(() => { const c = document.getElementById('compare'); c.value = ''; c.dispatchEvent(new Event('change')); return 'ok'; })()`)
	deadline := time.Now().Add(10 * time.Second)
	for eval(`document.body.dataset.state`) != "flame" && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	if err := chromedp.Do(ctx, chromedp.SetUploadFiles("#file", []string{up})); err != nil {
		t.Fatal(err)
	}
	checkDiff(fmt.Sprintf("#%d against an upload of #%d (%d folded lines)", id30, id70, len(lines)), "profile-diff-upload.png")

	reqs := requests()
	for _, u := range reqs {
		p, err := url.Parse(u)
		if err != nil || p.Host != self.Host || p.Scheme != self.Scheme {
			t.Errorf("page requested %q, not the exporter at %s", u, self.Host)
		}
	}
}
