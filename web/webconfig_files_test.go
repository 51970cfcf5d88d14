// SPDX-License-Identifier: Apache-2.0

package web

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	toolkit "github.com/prometheus/exporter-toolkit/web"
	"golang.org/x/crypto/bcrypt"

	"github.com/kernel-exporter/kernel_exporter/bounded"
)

// writeCert writes a self-signed ECDSA certificate for 127.0.0.1 and its
// key as PEM files in dir, named by prefix, and returns their paths.
func writeCert(t *testing.T, dir, prefix string) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: prefix},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	cert, key = filepath.Join(dir, prefix+".crt"), filepath.Join(dir, prefix+".key")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// TestWebConfigFileFields checks that every field of exporter-toolkit's
// web config that names a file (its YAML name ends in _file) is one that
// loadWebConfig reads through package bounded.
func TestWebConfigFileFields(t *testing.T) {
	ours := map[string]bool{}
	for _, f := range fileFields {
		ours[f.name] = true
	}
	var walk func(reflect.Type, string)
	walk = func(ty reflect.Type, at string) {
		for f := range ty.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if f.Type.Kind() == reflect.Struct {
				walk(f.Type, at+name+".")
			}
			if strings.HasSuffix(name, "_file") && !ours[name] {
				t.Errorf("exporter-toolkit's web config field %s%s names a file that loadWebConfig does not read through package bounded", at, name)
			}
		}
	}
	walk(reflect.TypeFor[toolkit.Config](), "")
	if len(ours) != 3 {
		t.Errorf("file fields %v", ours)
	}
}

// TestHardening25WebConfigNamedFiles checks that each file the web config
// names that is a FIFO, /dev/zero or larger than 1 MiB is refused at once,
// with an error naming the web config, the field and the file (the FIFO
// hung start-up, /dev/zero ran out of memory), and that a relative path
// is taken from the config's directory.
func TestHardening25WebConfigNamedFiles(t *testing.T) {
	dir := t.TempDir()
	cert, key := writeCert(t, dir, "tls")
	fifo := filepath.Join(dir, "fifo.pem")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.pem")
	if err := os.WriteFile(big, []byte(strings.Repeat("x", MaxWebFile+1)), 0o600); err != nil {
		t.Fatal(err)
	}
	web := filepath.Join(dir, "web.yml")
	for _, c := range []struct {
		field, path string
		want        error
	}{
		{"cert_file", fifo, bounded.ErrNotRegular},
		{"cert_file", "/dev/zero", bounded.ErrNotRegular},
		{"key_file", fifo, bounded.ErrNotRegular},
		{"key_file", big, bounded.ErrTooLarge},
		{"client_ca_file", "/dev/zero", bounded.ErrNotRegular},
		{"client_ca_file", dir, bounded.ErrNotRegular},
	} {
		files := map[string]string{"cert_file": cert, "key_file": key, c.field: c.path}
		cfg := "tls_server_config:\n  client_auth_type: VerifyClientCertIfGiven\n"
		for k, v := range files {
			cfg += "  " + k + ": " + v + "\n"
		}
		if err := os.WriteFile(web, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- CheckConfigFile(web) }()
		select {
		case err := <-done:
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), web) || !strings.Contains(err.Error(), "tls_server_config."+c.field+" "+c.path) {
				t.Errorf("%s %s: %v, want %v naming %s, the field and the file", c.field, c.path, err, c.want, web)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s %s: no answer within 5 s", c.field, c.path)
		}
	}
	rel := "tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\n"
	if err := os.WriteFile(web, []byte(rel), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := CheckConfigFile(web); err != nil {
		t.Errorf("relative paths: %v", err)
	}
	for cfg, want := range map[string]string{
		"tls_server_config:\n  key_file: tls.key\n":                       "missing one of cert or cert_file",
		"tls_server_config:\n  cert_file: tls.key\n  key_file: tls.key\n": "X509KeyPair",
		"basic_auth_users:\n  u: plain\n":                                 "basic_auth_users: user \"u\"",
		"http_server_config:\n  headers:\n    Server: x\n":                `header "Server" cannot be set`,
		"http_server_config:\n  headers:\n    X-Frame-Options: all\n":     "X-Frame-Options must be one of",
		"tls_server_confg: {}\n":                                          "field tls_server_confg not found",
	} {
		if err := os.WriteFile(web, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := CheckConfigFile(web); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error with %q", cfg, err, want)
		}
	}
}

// TestWebConfigServe serves over TLS with basic auth and a header from a
// web config, then changes the files in place: a new password and a new
// certificate are used without a restart, and a broken config gets 500
// until it is fixed.
func TestWebConfigServe(t *testing.T) {
	dir := t.TempDir()
	cert, key := writeCert(t, dir, "one")
	hash, err := bcrypt.GenerateFromPassword([]byte("first"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	web := filepath.Join(dir, "web.yml")
	write := func(cfg string) {
		t.Helper()
		// A new file renamed over the old one, as tools rotate files.
		tmp := web + ".new"
		if err := os.WriteFile(tmp, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, web); err != nil {
			t.Fatal(err)
		}
	}
	base := "tls_server_config:\n  cert_file: " + cert + "\n  key_file: " + key + "\n" +
		"http_server_config:\n  headers:\n    X-Frame-Options: deny\n"
	write(base + "basic_auth_users:\n  prom: " + string(hash) + "\n")
	_, addr := serveLocal(t, opts("/metrics"), web)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: true}}
	get := func(pass string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", "https://"+addr+"/-/healthy", nil)
		if pass != "" {
			req.SetBasicAuth("prom", pass)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		return resp, resp.TLS.PeerCertificates[0].Subject.CommonName
	}
	resp, cn := get("first")
	if resp.StatusCode != 200 || cn != "one" || resp.Header.Get("X-Frame-Options") != "deny" || resp.Proto != "HTTP/2.0" {
		t.Errorf("first: %s %s, certificate %q, X-Frame-Options %q; want 200 over HTTP/2, one, deny", resp.Status, resp.Proto, cn, resp.Header.Get("X-Frame-Options"))
	}
	if resp, _ := get(""); resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") != "Basic" {
		t.Errorf("no credentials: %s, WWW-Authenticate %q", resp.Status, resp.Header.Get("WWW-Authenticate"))
	}
	if resp, _ := get("wrong"); resp.StatusCode != 401 {
		t.Errorf("wrong password: %s", resp.Status)
	}

	// A new password and certificate.
	hash2, _ := bcrypt.GenerateFromPassword([]byte("second"), bcrypt.MinCost)
	cert2, key2 := writeCert(t, dir, "two")
	write(strings.ReplaceAll(strings.ReplaceAll(base, cert, cert2), key, key2) + "basic_auth_users:\n  prom: " + string(hash2) + "\n")
	client.CloseIdleConnections()
	if resp, cn := get("second"); resp.StatusCode != 200 || cn != "two" {
		t.Errorf("after the change: %s, certificate %q; want 200, two", resp.Status, cn)
	}
	if resp, _ := get("first"); resp.StatusCode != 401 {
		t.Errorf("the old password after the change: %s", resp.Status)
	}

	// Broken, then fixed (on the kept connection: a new one would fail
	// its TLS handshake meanwhile).
	write("basic_auth_users: [\n")
	if resp, _ := get("second"); resp.StatusCode != 500 {
		t.Errorf("broken web config: %s, want 500", resp.Status)
	}
	write(strings.ReplaceAll(strings.ReplaceAll(base, cert, cert2), key, key2) + "basic_auth_users:\n  prom: " + string(hash2) + "\n" + "http_server_config:\n  http2: false\n")
	// http_server_config given twice is refused by the strict parser.
	if resp, _ := get("second"); resp.StatusCode != 500 {
		t.Errorf("web config with a key twice: %s, want 500", resp.Status)
	}
	write(strings.ReplaceAll(strings.ReplaceAll(base, cert, cert2), key, key2) + "basic_auth_users:\n  prom: " + string(hash2) + "\n")
	if resp, _ := get("second"); resp.StatusCode != 200 {
		t.Errorf("fixed web config: %s, want 200", resp.Status)
	}
}

// TestWebConfigHTTP2Off checks http_server_config.http2: false: HTTP/1.1
// only.
func TestWebConfigHTTP2Off(t *testing.T) {
	dir := t.TempDir()
	cert, key := writeCert(t, dir, "one")
	web := filepath.Join(dir, "web.yml")
	if err := os.WriteFile(web, []byte("tls_server_config:\n  cert_file: "+cert+"\n  key_file: "+key+"\nhttp_server_config:\n  http2: false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, addr := serveLocal(t, opts("/metrics"), web)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: true}}
	resp, err := client.Get("https://" + addr + "/-/healthy")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Proto != "HTTP/1.1" {
		t.Errorf("%s %s, want 200 over HTTP/1.1", resp.Status, resp.Proto)
	}
}

// FuzzWebConfig loads arbitrary web configs: no panic, and no error
// quotes a value of the file (yaml.v2 quotes them between backquotes).
// The seeds' values hold the marker SE!CRET: a key of a real key's shape
// is named on purpose (config.Quote, the snake_case rule), and the '!'
// keeps any such key from being the marker.
func FuzzWebConfig(f *testing.F) {
	for _, s := range []string{
		"basic_auth_users:\n  prom: $2a$04$pTw5EL25C.21Aow0c4M4P.pfdYVElpeSYqJKYJJPHC0DITlINfyIK\n",
		"tls_server_config:\n  cert_file: a.crt\n  key_file: a.key\n  client_auth_type: RequireAndVerifyClientCert\n",
		"tls_server_config:\n  min_version: TLS13\n  cipher_suites: [TLS_AES_128_GCM_SHA256]\n  key: SE!CRET\n",
		"http_server_config:\n  http2: false\n  headers:\n    X-Frame-Options: deny\n",
		"tls_server_config:\n  min_version: [SE!CRET]\n",
		"basic_auth_users: SE!CRET\n",
		"basic_auth_users:\n  prom: SE!CRET\n",
		"http_server_config:\n  headers:\n    X-Frame-Options: SE!CRET\n",
	} {
		f.Add([]byte(s))
	}
	path := filepath.Join(f.TempDir(), "web.yml")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		_, _, err := loadWebConfig(path)
		if err != nil && (strings.Contains(err.Error(), "`") || strings.Contains(err.Error(), "SE!CRET")) {
			t.Errorf("error quotes the file: %v", err)
		}
	})
}

// TestWebConfigErrorsRedacted puts a secret in every place whose parse
// error would quote it: each error names the file and line or field, and
// never the value.
func TestWebConfigErrorsRedacted(t *testing.T) {
	dir := t.TempDir()
	writeCert(t, dir, "tls")
	for _, tc := range []struct{ yml, want string }{
		{"SECRET-----BEGIN\n", "line 1: cannot unmarshal !!str into web.Config"},
		{"a`SECRET`b into x\n", "line 1: cannot unmarshal !!str into web.Config"},
		{"basic_auth_users: SEC`RET\n", "line 1: cannot unmarshal !!str into map[string]config.Secret"},
		{"SECRET: 1\n", "line 1: a field not found in type web.Config"},
		{"tls_server_confg: {}\nSECRET: 1\n", "line 1: field tls_server_confg not found in type web.Config"},
		{"basic_auth_users:\n  a: x\n  a: SECRET\n", "line 3: key set twice"},
		{"http_server_config:\n  headers:\n    X-?rame-Opt`SECRET: deny\n", "http_server_config.headers: header (a string of 18 bytes) cannot be set"},
		{"http_server_config:\n  headers:\n    X-Secret: deny\n", `http_server_config.headers: header "X-Secret" cannot be set`},
		{"basic_auth_users:\n  SECRET`: x\n", "basic_auth_users: user (a string of 7 bytes): crypto/bcrypt: hashedSecret too short"},
		{"basic_auth_users:\n  prom: '`SECRETSECRETSECRETSECRETSECRETSECRETSECRETSECRETSECRETSECRETSECRET'\n", `basic_auth_users: user "prom": not a bcrypt hash (it must start with $)`},
		{"basic_auth_users:\n  prom: $9$04$SECRETSECRETSECRETSECRETSECRETSECRETSECRETSECRETSECRETSECRET\n", `basic_auth_users: user "prom": not a bcrypt hash version`},
		{"tls_server_config:\n  min_version: SECRET\n", "unknown TLS version (value not shown)"},
		{"tls_server_config:\n  cipher_suites: [SECRET]\n", "unknown cipher (value not shown)"},
		{"tls_server_config:\n  curve_preferences: [SECRET]\n", "unknown curve (value not shown)"},
		{"tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\n  client_auth_type: SECRET\n", "invalid ClientAuth (value not shown)"},
	} {
		path := filepath.Join(dir, "web.yml")
		if err := os.WriteFile(path, []byte(tc.yml), 0o600); err != nil {
			t.Fatal(err)
		}
		_, _, err := loadWebConfig(path)
		if err == nil {
			t.Errorf("%q: loaded, want an error", tc.yml)
			continue
		}
		msg := err.Error()
		if strings.Contains(msg, "SECRET") || strings.Contains(msg, "`") || !strings.Contains(msg, tc.want) || !strings.Contains(msg, path) {
			t.Errorf("%q: error %q, want the path and %q without the value", tc.yml, msg, tc.want)
		}
	}
}
