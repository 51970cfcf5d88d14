// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHardening10SecretNotServed runs the exporter with a config name that
// points at a secret file (a shadow line) and with a histogram that uses
// the reserved label "le" (finding 12): both configs are down, neither the
// landing page nor /metrics shows any of the secret, the exposition still
// parses, and the bundled config beside them serves.
func TestHardening10SecretNotServed(t *testing.T) {
	dir := t.TempDir()
	const secret = "Zx9secretHash"
	shadow := filepath.Join(t.TempDir(), "shadow")
	if err := os.WriteFile(shadow, []byte("root:$6$"+secret+"$abc:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(shadow, filepath.Join(dir, "evil.yaml")); err != nil {
		t.Fatal(err)
	}
	le := `metrics:
  histograms:
    - name: lat_seconds
      help: latency
      bucket_type: exp2
      bucket_min: 0
      bucket_max: 4
      labels:
        - name: le
          size: 4
          decoders:
            - name: uint
        - name: bucket
          size: 4
`
	if err := os.WriteFile(filepath.Join(dir, "le.yaml"), []byte(le), 0o644); err != nil {
		t.Fatal(err)
	}
	e := Start(t, "--programs=timers", "--config.dir="+dir, "--config.names=evil,le")
	ms := e.Scrape() // fails the test if the exposition does not parse
	for _, c := range []string{"evil", "le"} {
		if v := ms.Value("kernel_exporter_config_up", L("config", c)); v != 0 {
			t.Errorf("config_up{%s} = %v, want 0", c, v)
		}
	}
	if v := ms.Value("kernel_exporter_config_up", L("config", "timers")); v != 1 {
		t.Errorf("config_up{timers} = %v, want 1", v)
	}
	if r := errorReason(ms, "evil"); !strings.HasPrefix(r, filepath.Join(dir, "evil.yaml")) {
		t.Errorf("reason of evil = %q, want one naming %s", r, filepath.Join(dir, "evil.yaml"))
	}
	if r := errorReason(ms, "le"); !strings.Contains(r, `"le" is reserved by Prometheus`) {
		t.Errorf("reason of le = %q, want the reserved label named", r)
	}
	for path, body := range map[string]string{"/": e.Get("/"), "/metrics": e.Get("/metrics"), "log": e.Logs()} {
		for _, leak := range []string{secret, "root:", "19000:0:99999"} {
			if strings.Contains(body, leak) {
				t.Errorf("%s shows %q of the secret file", path, leak)
			}
		}
	}
	t.Logf("reason served for evil: %s", errorReason(ms, "evil"))
}
