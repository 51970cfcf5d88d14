// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// landingLayout is what the test measures of the page in the browser.
type landingLayout struct {
	ScrollWidth int `json:"scrollWidth"`
	InnerWidth  int `json:"innerWidth"`
	Tables      []struct {
		ID          string  `json:"id"`
		ScrollWidth int     `json:"scrollWidth"`
		Right       float64 `json:"right"`
	} `json:"tables"`
	Up, Down, Loading string
	// Text is the page's text (textContent: folded reasons included),
	// Shown its rendered text (innerText: folded reasons left out).
	Text, Shown string
}

const landingMeasure = `({
	scrollWidth: document.documentElement.scrollWidth,
	innerWidth: window.innerWidth,
	tables: [...document.querySelectorAll('table')].map(t => ({id: t.id, scrollWidth: t.scrollWidth, right: t.getBoundingClientRect().right})),
	Up: document.getElementById('n-up').textContent,
	Down: document.getElementById('n-down').textContent,
	Loading: document.getElementById('n-loading').textContent,
	Text: document.body.textContent,
	Shown: document.body.innerText,
})`

// TestLandingChromium opens the landing page of an exporter asked for every
// bundled program (many are down on this kernel: their reasons are long) in
// headless Chromium at 1400x1000, and checks that nothing overflows
// horizontally, with the reasons folded and unfolded; that the summary
// counts the configs up and down as kernel_exporter_config_up does; and
// that each down config's reason appears exactly once. It leaves a
// screenshot in the test's temporary directory, copied to
// $KE_UI_SCREENSHOT_DIR when set.
func TestLandingChromium(t *testing.T) {
	chromium := findChromium(t)
	e := Start(t, "--programs=all")
	deadline := time.Now().Add(60 * time.Second)
	for stillLoading(e.Get("/metrics")) {
		if time.Now().After(deadline) {
			t.Fatalf("configs still loading after 60s")
		}
		time.Sleep(200 * time.Millisecond)
	}
	ms := e.Scrape() // also reads every config: the series are known
	var up, down int
	reasons := map[string]string{}
	for _, m := range ms["kernel_exporter_config_up"].GetMetric() {
		name := ""
		for _, lp := range m.GetLabel() {
			if lp.GetName() == "config" {
				name = lp.GetValue()
			}
		}
		if m.GetGauge().GetValue() == 1 {
			up++
		} else {
			down++
			reasons[name] = errorReason(ms, name)
		}
	}
	if up == 0 || down == 0 {
		t.Fatalf("%d configs up and %d down: the test wants both (every bundled program, on a kernel without kprobes or fentry)", up, down)
	}

	ctx := chromiumBrowser(t, chromium)
	if err := chromedp.Do(ctx, chromedp.Navigate(e.URL+"/"), chromedp.WaitVisible(chromedp.ID("configs-table"))); err != nil {
		t.Fatalf("chromium: open %s/: %v", e.URL, err)
	}
	closed, err := chromedp.Run(ctx, chromedp.Evaluate[landingLayout](landingMeasure))
	if err != nil {
		t.Fatalf("chromium: measure the page: %v", err)
	}
	shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("chromium: screenshot: %v", err)
	}
	// Unfold every reason and alternative: still no overflow.
	open, err := chromedp.Run(ctx, chromedp.Evaluate[landingLayout](`document.querySelectorAll('details').forEach(d => d.open = true), `+landingMeasure))
	if err != nil {
		t.Fatalf("chromium: unfold and measure the page: %v", err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "landing.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	if d := os.Getenv("KE_UI_SCREENSHOT_DIR"); d != "" {
		if err := os.WriteFile(filepath.Join(d, "landing.png"), shot, 0o644); err != nil {
			t.Errorf("copy the screenshot to KE_UI_SCREENSHOT_DIR: %v", err)
		}
	}
	t.Logf("screenshot: %s (%d bytes); %d configs up, %d down", path, len(shot), up, down)

	for name, l := range map[string]landingLayout{"folded": closed, "unfolded": open} {
		t.Logf("%s: scrollWidth %d, innerWidth %d, tables %+v", name, l.ScrollWidth, l.InnerWidth, l.Tables)
		if l.InnerWidth != 1400 {
			t.Errorf("%s: window.innerWidth %d, want 1400", name, l.InnerWidth)
		}
		if l.ScrollWidth > l.InnerWidth {
			t.Errorf("%s: page overflows horizontally: scrollWidth %d > innerWidth %d", name, l.ScrollWidth, l.InnerWidth)
		}
		if len(l.Tables) == 0 {
			t.Errorf("%s: no table on the page", name)
		}
		for _, tb := range l.Tables {
			if tb.ScrollWidth > l.InnerWidth || tb.Right > float64(l.InnerWidth) {
				t.Errorf("%s: table %q overflows: scrollWidth %d, right edge %.0f, innerWidth %d", name, tb.ID, tb.ScrollWidth, tb.Right, l.InnerWidth)
			}
		}
	}
	if closed.Up != strconv.Itoa(up) || closed.Down != strconv.Itoa(down) || closed.Loading != "0" {
		t.Errorf("summary: %s up, %s down, %s loading; kernel_exporter_config_up says %d up, %d down, none loading", closed.Up, closed.Down, closed.Loading, up, down)
	}
	for name, reason := range reasons {
		if reason == "" {
			t.Errorf("config %s is down without a reason in kernel_exporter_config_error_info", name)
			continue
		}
		if n := strings.Count(closed.Text, reason); n != 1 {
			t.Errorf("reason of %s appears %d times on the page, want once: %q", name, n, reason)
		}
		if strings.Contains(closed.Shown, reason) {
			t.Errorf("reason of %s shown while folded: %q", name, reason)
		}
		if n := strings.Count(open.Shown, reason); n != 1 {
			t.Errorf("reason of %s shown %d times unfolded, want once: %q", name, n, reason)
		}
	}
}
