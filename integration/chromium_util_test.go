// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/kernel-exporter/kernel_exporter/internal/testenv"
)

// findChromium returns the path of Debian's chromium, or ends the test:
// SKIP without it, a failure under CI=true (make test-deps installs it).
func findChromium(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/chromium", "chromium", "chromium-browser"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	testenv.SkipOrFail(t, "no chromium in /usr/bin or PATH (Debian package chromium)")
	return ""
}

// chromiumBrowser starts a headless chromium with a 1400x1000 window and
// returns its context, ended at test cleanup (or after 90 s).
func chromiumBrowser(t *testing.T, chromium string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.Headless,
		chromedp.NoSandbox, // root: chromium refuses its sandbox
		chromedp.DisableGPU,
		chromedp.WindowSize(1400, 1000),
		chromedp.UserDataDir(t.TempDir()),
	)
	// The timeout bounds the browser's whole life (chromedp ends the
	// browser with the context of its first action).
	tctx, cancelTimeout := context.WithTimeout(context.Background(), 90*time.Second)
	actx, cancelAlloc := chromedp.NewExecAllocator(tctx, opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc(); cancelTimeout() })
	return ctx
}

// recordRequests records the URL of every request the page in ctx makes
// from now on; the returned function gives those made so far.
func recordRequests(t *testing.T, ctx context.Context, chromium string) func() []string {
	t.Helper()
	var (
		mu       sync.Mutex
		requests []string
	)
	if err := chromedp.Listen(ctx, func(ev any) {
		if r, ok := ev.(*network.EventRequestWillBeSent); ok {
			mu.Lock()
			requests = append(requests, r.Request.URL)
			mu.Unlock()
		}
	}); err != nil {
		t.Fatalf("start chromium %s: %v", chromium, err)
	}
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(requests)
	}
}
