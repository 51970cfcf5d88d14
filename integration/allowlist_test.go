// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestAllowedDigests runs two user programs built from the same source
// (testdata/ttl/getppid.bpf.c, counting getppid calls by process) under
// --config.allowed-digests-file listing one object's SHA-256 (as
// sha256sum prints it): the listed one loads and counts 100 getppid calls,
// the other is down with a reason naming its object and digest and the
// flag, and the bundled timers (not checked) run. Then the listed object is
// rebuilt (another digest) and a reload refused: /-/reload answers 500,
// last_reload_successful is 0, the refusal is logged with the new digest,
// and the old version still counts. The exporter runs with the default
// flags, so the reload goes through the privileged helper.
func TestAllowedDigests(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join("integration", "testdata", "ttl", "getppid.bpf.c")
	compileBPF(t, src, filepath.Join(dir, "listed.bpf.o"), "-Dttl_calls_total=allow_listed_calls_total")
	compileBPF(t, src, filepath.Join(dir, "unlisted.bpf.o"), "-Dttl_calls_total=allow_unlisted_calls_total")
	writeProbeConfig(t, dir, "listed", reloadYAML("allow_listed_calls_total", "getppid calls (allow-list test, listed)"))
	writeProbeConfig(t, dir, "unlisted", reloadYAML("allow_unlisted_calls_total", "getppid calls (allow-list test, unlisted)"))
	listed := fileSHA256(t, filepath.Join(dir, "listed.bpf.o"))
	unlisted := fileSHA256(t, filepath.Join(dir, "unlisted.bpf.o"))
	allowFile := filepath.Join(t.TempDir(), "allowed-digests")
	if err := os.WriteFile(allowFile, []byte("# sha256sum listed.bpf.o\n"+listed+"  listed.bpf.o\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := Start(t, "--config.dir="+dir, "--config.names=listed,unlisted", "--programs=timers",
		"--config.allowed-digests-file="+allowFile, "--web.enable-lifecycle")
	Eventually(t, 30*time.Second, func() bool { return status(t, http.MethodGet, e.URL+"/-/ready") == 200 }, "not ready\n%s", e.Logs)
	ms := e.Scrape()
	for c, want := range map[string]float64{"listed": 1, "unlisted": 0, "timers": 1} {
		if v := ms.Value("kernel_exporter_config_up", L("config", c)); v != want {
			t.Fatalf("config_up{config=%s} = %v, want %v\n%s", c, v, want, e.Logs())
		}
	}
	wantReason := "BPF object " + filepath.Join(dir, "unlisted.bpf.o") + ": sha256:" + unlisted +
		" is not an allowed digest (--config.allowed-digests-file " + allowFile + "): refused"
	if got := errorReason(ms, "unlisted"); got != wantReason {
		t.Fatalf("config_error_info{config=unlisted} reason = %q, want %q", got, wantReason)
	}
	t.Logf("unlisted refused: %s", wantReason)

	const calls = 100
	self := L("pid", strconv.Itoa(os.Getpid()))
	for range calls {
		syscall.Getppid()
	}
	Eventually(t, 5*time.Second, func() bool {
		return e.Scrape().Value("kernel_allow_listed_calls_total", self) >= calls
	}, "the listed program did not count %d getppid calls", calls)
	if n := e.Scrape().Series("kernel_allow_unlisted_calls_total", nil); n != 0 {
		t.Fatalf("the refused program serves %d series", n)
	}

	// A changed object (another digest) is refused at reload too.
	compileBPF(t, src, filepath.Join(dir, "listed.bpf.o"), "-Dttl_calls_total=allow_listed_calls_total", "-Dttl_sys_enter=allow_sys_enter_v2")
	changed := fileSHA256(t, filepath.Join(dir, "listed.bpf.o"))
	if changed == listed {
		t.Fatal("the rebuilt object has the same digest")
	}
	if c := status(t, http.MethodPost, e.URL+"/-/reload"); c != http.StatusInternalServerError {
		t.Fatalf("POST /-/reload with an unlisted object: %d, want 500\n%s", c, e.Logs())
	}
	n0 := e.Scrape().Value("kernel_allow_listed_calls_total", self)
	for range calls {
		syscall.Getppid()
	}
	ms = e.Scrape()
	if v := ms.Value("kernel_exporter_config_last_reload_successful", nil); v != 0 {
		t.Fatalf("last_reload_successful %v after a refused reload, want 0", v)
	}
	if v := ms.Value("kernel_exporter_config_up", L("config", "listed")); v != 1 {
		t.Fatalf("listed is down after a refused reload, want its old version up\n%s", e.Logs())
	}
	if v := ms.Value("kernel_allow_listed_calls_total", self); v < n0+calls {
		t.Fatalf("listed's running version counted %v after %d more calls from %v: it should still count", v, calls, n0)
	}
	if !strings.Contains(e.Logs(), "sha256:"+changed+" is not an allowed digest") {
		t.Fatalf("the refused reload is not logged with the new digest %s\n%s", changed, e.Logs())
	}
}
