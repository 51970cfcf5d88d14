// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"bytes"
	"encoding/json"
	"image"
	"image/png"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestUIChromium opens /ui/ in headless Chromium on an exporter running the
// default programs while O_DIRECT I/O runs, takes a screenshot and checks
// from its pixels that the biolatency heatmap is not empty, and that the
// page requested nothing but the exporter; and that each config's section
// shows its self-audit (audited every second) as the landing page does:
// biolatency's ratios, runqlat's pair not available on a kernel without
// /proc/schedstat. The screenshot is written under
// the test's temp dir and, when KE_UI_SCREENSHOT_DIR is set, copied there
// as ui-heatmap.png.
func TestUIChromium(t *testing.T) {
	chromiumPath := findChromium(t)
	dir := ioTempDir(t)
	e := Start(t, "--audit.interval=1s") // the default programs: timers, biolatency, runqlat
	self, err := url.Parse(e.URL)
	if err != nil {
		t.Fatal(err)
	}

	// O_DIRECT I/O in the background until the screenshot is taken.
	stop := make(chan struct{})
	ioDone := make(chan error, 1)
	var ioCalls int
	go func() {
		for {
			select {
			case <-stop:
				ioDone <- nil
				return
			default:
			}
			w, r, err := runDirectIO(dir, 32, 64<<10)
			ioCalls += w + r
			if err != nil {
				ioDone <- err
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
			<-ioDone
		}
	}()

	ctx := chromiumBrowser(t, chromiumPath)

	requests := recordRequests(t, ctx, chromiumPath)
	if err := chromedp.Do(ctx, chromedp.Navigate(e.URL+"/ui/#biolatency")); err != nil {
		t.Fatalf("open %s/ui/: %v", e.URL, err)
	}

	// Wait for the heatmap and for 8 samples of I/O (KE_UI_SAMPLES more,
	// up to the ring's 600, for a screenshot with more history).
	const selector = `canvas.heatmap[data-config="biolatency"]`
	samples := 8
	if n, err := strconv.Atoi(os.Getenv("KE_UI_SAMPLES")); err == nil && n > samples && n <= 600 {
		samples = n
	}
	deadline := time.Now().Add(45*time.Second + time.Duration(samples)*time.Second)
	var status string
	for {
		status, err = chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('`+selector+`') ? document.getElementById('status').textContent : 'no heatmap yet'`))
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := strconv.Atoi(strings.Fields(status + " x")[0]); n >= samples {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no biolatency heatmap with %d samples in time; page status %q\n%s", samples, status, e.Logs())
		}
		time.Sleep(500 * time.Millisecond)
	}

	// A poll that finds no new sample (since = the page's last one) must
	// merge as the page's own polls do: it got "deltas":null, and the page
	// showed "error: h.deltas is not iterable".
	empty, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(async () => {
		for (let i = 0; i < 20; i++) {
			const d = await (await fetch('data?since=' + st.seq, { cache: 'no-store' })).json();
			if (d.first <= d.seq) { merge(d); continue; } // samples the page had not merged yet (its own polls lag under load): take them, then ask again
			merge(d);
			render();
			return d.histograms.length + ' histograms, deltas ' + JSON.stringify(d.histograms.map(h => h.deltas));
		}
		return 'every poll found a new sample';
	})()`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("merging a poll with no new sample: %v", err)
	}
	t.Logf("poll with no new sample: %s", empty)
	if !strings.Contains(empty, "deltas [[]") {
		t.Errorf("poll with no new sample: %s, want histograms with empty deltas", empty)
	}

	// The audit line of each section, and each pair's state and mark.
	type auditView struct {
		Text  map[string]string
		Spans []struct{ Source, State, Class, Text string }
	}
	av, err := chromedp.Run(ctx, chromedp.Evaluate[auditView](`(() => {
		const out = {Text: {}, Spans: []};
		for (const s of document.querySelectorAll('section.config')) {
			const p = s.querySelector('p.audit');
			out.Text[s.id] = p ? p.textContent : '';
			if (p) for (const sp of p.querySelectorAll('span')) out.Spans.push({Source: sp.dataset.source || '', State: sp.dataset.state, Class: sp.className, Text: sp.textContent});
		}
		return out;
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("audit lines: %q", av.Text)
	if !regexp.MustCompile(`^audit:.* block_reads \d+\.\d{3}( |$)`).MatchString(av.Text["biolatency"]) {
		t.Errorf("biolatency's audit line %q: want block_reads with a ratio (O_DIRECT reads ran)", av.Text["biolatency"])
	}
	if _, err := os.Stat("/proc/schedstat"); err != nil {
		const want = "audit: schedstat_switch_ins not available on this kernel: /proc/schedstat is absent (CONFIG_SCHEDSTATS off)"
		if av.Text["runqlat"] != want {
			t.Errorf("runqlat's audit line %q, want %q", av.Text["runqlat"], want)
		}
	}
	if av.Text["timers"] != "" {
		t.Errorf("timers has no audit section, yet its section shows %q", av.Text["timers"])
	}
	for _, sp := range av.Spans {
		if mark := sp.State == "out_of_band" || sp.State == "error"; mark != (sp.Class == "mark") {
			t.Errorf("audit %s (%s) %q has class %q", sp.Source, sp.State, sp.Text, sp.Class)
		}
	}

	type rect struct{ X, Y, W, H, PX, PY, PW, PH, VW float64 }
	r, err := chromedp.Run(ctx, chromedp.Evaluate[rect](`(() => {
		const c = document.querySelector('`+selector+`');
		c.scrollIntoView({block: 'center'});
		const b = c.getBoundingClientRect();
		const p = c.dataset.plot.split(',').map(Number);
		return {X: b.x, Y: b.y, W: b.width, H: b.height, PX: p[0], PY: p[1], PW: p[2], PH: p[3], VW: window.innerWidth};
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	close(stop)
	if err := <-ioDone; err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "ui-heatmap.png")
	if err := os.WriteFile(file, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	if d := os.Getenv("KE_UI_SCREENSHOT_DIR"); d != "" {
		if err := os.WriteFile(filepath.Join(d, "ui-heatmap.png"), shot, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("decode screenshot %s: %v", file, err)
	}

	// Pixels of the plot area that are not the heatmap's background
	// (#10131a): cells drawn for counted buckets, and quantile dots.
	scale := float64(img.Bounds().Dx()) / r.VW
	area := image.Rect(int((r.X+r.PX)*scale), int((r.Y+r.PY)*scale), int((r.X+r.PX+r.PW)*scale), int((r.Y+r.PY+r.PH)*scale)).Intersect(img.Bounds())
	if area.Empty() {
		t.Fatalf("heatmap plot area %+v is outside the %v screenshot %s", r, img.Bounds(), file)
	}
	drawn := 0
	for y := area.Min.Y; y < area.Max.Y; y++ {
		for x := area.Min.X; x < area.Max.X; x++ {
			cr, cg, cb, _ := img.At(x, y).RGBA()
			if absDiff(cr>>8, 0x10)+absDiff(cg>>8, 0x13)+absDiff(cb>>8, 0x1a) > 24 {
				drawn++
			}
		}
	}
	t.Logf("screenshot %s: biolatency heatmap plot area %v, %d of %d pixels drawn; page status %q; %d O_DIRECT syscalls", file, area, drawn, area.Dx()*area.Dy(), status, ioCalls)
	if drawn < 8 {
		t.Errorf("biolatency heatmap is empty: %d non-background pixels in its plot area %v of %s", drawn, area, file)
	}

	// The data behind it: the ring counted I/O.
	var data struct {
		Histograms []struct {
			Config string     `json:"config"`
			Deltas [][]uint64 `json:"deltas"`
		} `json:"histograms"`
	}
	if err := json.Unmarshal([]byte(e.Get("/ui/data?since=0")), &data); err != nil {
		t.Fatal(err)
	}
	var total uint64
	for _, h := range data.Histograms {
		if h.Config == "biolatency" {
			for _, d := range h.Deltas {
				for _, c := range d {
					total += c
				}
			}
		}
	}
	if total == 0 {
		t.Errorf("/ui/data: no biolatency observation in the ring after %d O_DIRECT syscalls", ioCalls)
	}

	reqs := requests()
	if len(reqs) < 3 {
		t.Errorf("page made %d requests (%v), want the page, its assets and data", len(reqs), reqs)
	}
	for _, u := range reqs {
		p, err := url.Parse(u)
		if err != nil || p.Host != self.Host || p.Scheme != self.Scheme {
			t.Errorf("page requested %q, not the exporter at %s", u, self.Host)
		}
	}
}

func absDiff(a, b uint32) uint32 {
	if a > b {
		return a - b
	}
	return b - a
}
