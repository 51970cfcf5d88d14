// SPDX-License-Identifier: Apache-2.0

// Package httpclient builds the HTTP transport of the commands that fetch
// from other servers (compare from Prometheus, profile diff from
// exporters): a bearer token or basic auth read from files, and TLS (a CA,
// a client certificate), through prometheus/common/config. Every file is
// read once, bounded in size, and errors name the flag and file, never
// their content.
package httpclient

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"strings"

	"github.com/prometheus/common/config"

	"github.com/kernel-exporter/kernel_exporter/bounded"
	"github.com/kernel-exporter/kernel_exporter/internal/printable"
)

// MaxSecretFile bounds a token, password, CA, certificate or key file.
const MaxSecretFile = 1 << 20

// Options are the client's authentication and TLS, as files.
type Options struct {
	// BearerTokenFile holds a token sent as Authorization: Bearer.
	BearerTokenFile string
	// Username and PasswordFile: HTTP basic auth.
	Username, PasswordFile string
	// CAFile verifies the server; CertFile and KeyFile are a client
	// certificate; InsecureSkipVerify skips verifying the server.
	CAFile, CertFile, KeyFile string
	InsecureSkipVerify        bool
}

// RoundTripper returns a transport that sends o's credentials and uses its
// TLS, following redirects. flagPrefix names the flags in errors
// ("--prometheus." gives --prometheus.bearer-token-file, ...); name is
// the User-Agent's client name. The files are read here, through package
// bounded, and handed over as values, so that no file is read unbounded or
// at every request. Errors: a file unreadable or too large, a CA file
// without a PEM certificate, a certificate without its key or not
// matching it.
func RoundTripper(o Options, flagPrefix, name string) (http.RoundTripper, error) {
	var cfg config.HTTPClientConfig
	read := func(flag, path string) (string, error) {
		if path == "" {
			return "", nil
		}
		b, err := bounded.ReadFile(path, flagPrefix+flag, MaxSecretFile)
		if err != nil {
			return "", fmt.Errorf("%s%s: %w", flagPrefix, flag, err)
		}
		return string(b), nil
	}
	tok, err := read("bearer-token-file", o.BearerTokenFile)
	if err != nil {
		return nil, err
	}
	cfg.BearerToken = config.Secret(strings.TrimSpace(tok))
	if o.Username != "" || o.PasswordFile != "" {
		pw, err := read("password-file", o.PasswordFile)
		if err != nil {
			return nil, err
		}
		cfg.BasicAuth = &config.BasicAuth{Username: o.Username, Password: config.Secret(strings.TrimRight(pw, "\r\n"))}
	}
	if cfg.TLSConfig.CA, err = read("tls.ca-file", o.CAFile); err != nil {
		return nil, err
	}
	if cfg.TLSConfig.Cert, err = read("tls.cert-file", o.CertFile); err != nil {
		return nil, err
	}
	key, err := read("tls.key-file", o.KeyFile)
	if err != nil {
		return nil, err
	}
	cfg.TLSConfig.Key = config.Secret(key)
	if cfg.TLSConfig.CA != "" && !x509.NewCertPool().AppendCertsFromPEM([]byte(cfg.TLSConfig.CA)) {
		return nil, fmt.Errorf("%stls.ca-file %s: no PEM certificate in it", flagPrefix, printable.Quote(o.CAFile, 256))
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		return nil, fmt.Errorf("%stls.cert-file and %stls.key-file go together", flagPrefix, flagPrefix)
	}
	if o.CertFile != "" {
		if _, err := tls.X509KeyPair([]byte(cfg.TLSConfig.Cert), []byte(key)); err != nil {
			return nil, fmt.Errorf("%stls.cert-file %s, %stls.key-file %s: %w", flagPrefix, printable.Quote(o.CertFile, 256), flagPrefix, printable.Quote(o.KeyFile, 256), err)
		}
	}
	cfg.TLSConfig.InsecureSkipVerify = o.InsecureSkipVerify
	cfg.FollowRedirects = true
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("client options: %w", err)
	}
	rt, err := config.NewRoundTripperFromConfig(cfg, name)
	if err != nil {
		return nil, fmt.Errorf("client options: %w", err)
	}
	return rt, nil
}
