// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kernel-exporter/kernel_exporter/internal/testenv"
)

// TestHardening13WebConfigAfterDrop checks the web config against the
// capability drop: the server reads the web config and its key again at
// every request, so a key the process can read only with a capability it
// drops made every scrape fail, logged at debug level only. Now the
// exporter exits 1 at once with the reason; with a readable key it serves
// over TLS after the drop.
func TestHardening13WebConfigAfterDrop(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	key, _ := selfSigned(t, dir)
	webConfig := filepath.Join(dir, "web.yml")
	if err := os.WriteFile(webConfig, []byte("tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Root reads a file of another user only with CAP_DAC_OVERRIDE or
	// CAP_DAC_READ_SEARCH, both dropped after attach.
	if err := os.Chown(key, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(key, 0o600); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cmd := exec.Command(binary, "--programs=timers", "--web.listen-address="+addr, "--web.config.file="+webConfig)
	done := make(chan struct{})
	var out []byte
	go func() { out, _ = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("still running 30 s after start with an unreadable key\n%s", out)
	}
	if cmd.ProcessState.ExitCode() != 1 || !strings.Contains(string(out), "the web config is unreadable after the capability drop") ||
		!strings.Contains(string(out), key+": permission denied") {
		t.Fatalf("exit %d, want 1 with the reason naming the key\n%s", cmd.ProcessState.ExitCode(), out)
	}

	if err := os.Chmod(key, 0o644); err != nil {
		t.Fatal(err)
	}
	if msg := scrapeTLSAfterDrop(t, addr, webConfig); msg != "" {
		t.Fatal(msg)
	}
}

// selfSigned writes a self-signed certificate for localhost and its key
// with openssl as dir/cert.pem and dir/key.pem, and returns the key's and
// the certificate's paths.
func selfSigned(t *testing.T, dir string) (key, cert string) {
	t.Helper()
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		testenv.SkipOrFail(t, "no openssl in PATH: %v", err)
	}
	key, cert = filepath.Join(dir, "key.pem"), filepath.Join(dir, "cert.pem")
	gen := exec.Command(openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
		"-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=localhost")
	if out, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("openssl: %v\n%s", err, out)
	}
	return key, cert
}

// scrapeTLSAfterDrop runs the exporter with webConfig and scrapes it over
// HTTPS after the capability drop; it returns "" or what went wrong.
func scrapeTLSAfterDrop(t *testing.T, addr, webConfig string) string {
	cmd := exec.Command(binary, "--programs=timers", "--web.listen-address="+addr, "--web.config.file="+webConfig)
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if !strings.Contains(logs.String(), "capabilities dropped after attach") {
			continue
		}
		resp, err := client.Get("https://" + addr + "/metrics")
		if err != nil {
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == 200 {
			return ""
		}
	}
	return "no HTTPS scrape after the capability drop within 30 s\n" + logs.String()
}

// TestHardening25WebConfigFiles checks that a file the web config names
// (cert_file, key_file, client_ca_file) that is a FIFO or /dev/zero makes
// the exporter exit 2 within 5 s, naming the file and the field. Before,
// a FIFO cert_file hung start-up (no port, no log line, SIGTERM ignored)
// and /dev/zero ended in "fatal error: out of memory".
func TestHardening25WebConfigFiles(t *testing.T) {
	dir := t.TempDir()
	key, cert := selfSigned(t, dir)
	fifo := filepath.Join(dir, "fifo.pem")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		field, path string
	}{
		{"cert_file", fifo},
		{"cert_file", "/dev/zero"},
		{"key_file", fifo},
		{"client_ca_file", fifo},
		{"client_ca_file", "/dev/zero"},
	} {
		files := map[string]string{"cert_file": cert, "key_file": key}
		files[c.field] = c.path
		cfg := "tls_server_config:\n"
		for _, f := range []string{"cert_file", "key_file", "client_ca_file"} {
			if p, ok := files[f]; ok {
				cfg += fmt.Sprintf("  %s: %s\n", f, p)
			}
		}
		if c.field == "client_ca_file" {
			cfg += "  client_auth_type: RequireAndVerifyClientCert\n"
		}
		web := filepath.Join(dir, "web.yml")
		if err := os.WriteFile(web, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(binary, "--programs=timers", fmt.Sprintf("--web.listen-address=127.0.0.1:%d", freePort(t)), "--web.config.file="+web)
		out := &syncBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		d, _ := waitExit(cmd, 5*time.Second)
		if d < 0 {
			cmd.Process.Kill()
			cmd.Wait()
			t.Errorf("%s %s: still running 5 s after start\n%s", c.field, c.path, out)
			continue
		}
		t.Logf("%s %s: exit %d after %v", c.field, c.path, cmd.ProcessState.ExitCode(), d.Round(time.Millisecond))
		if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(out.String(), c.path) || !strings.Contains(out.String(), c.field) {
			t.Errorf("%s %s: exit %d, want 2 with an error naming the file and the field\n%s", c.field, c.path, code, out)
		}
	}
}
