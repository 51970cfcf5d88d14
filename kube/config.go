// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"

	"gopkg.in/yaml.v3"

	"github.com/kernel-exporter/kernel_exporter/bounded"
)

// Config reaches an API server: its URL and how to authenticate. Files
// are read when the client is built (certificates) or at each request
// (tokens: a service account's token is rotated in place), each through
// package bounded, at most MaxKubeconfig bytes.
type Config struct {
	Host string // https://host:port, or http:// for tests
	// Bearer token, given or read from a file at every request.
	BearerToken     string
	BearerTokenFile string
	// Basic authentication.
	Username, Password string
	// The server's CA (PEM), from a file or given; none: the system's.
	CAFile string
	CAData []byte
	// The client certificate and key (PEM), from files or given.
	CertFile, KeyFile string
	CertData, KeyData []byte
	// Insecure skips the verification of the server's certificate;
	// ServerName is the name it is verified against, when not the host's.
	Insecure   bool
	ServerName string
}

// MaxKubeconfig bounds the kubeconfig file RESTConfig reads (one with
// embedded certificates is a few KiB), and each file it names.
const MaxKubeconfig = 1 << 20

// The in-cluster service account, as the kubelet mounts it.
const (
	saTokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"
	saCAFile    = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
)

// RESTConfig returns the configuration for the API server: from the
// kubeconfig file when kubeconfig is not empty (see MaxKubeconfig), else the in-cluster one
// (the pod's service account) when KUBERNETES_SERVICE_HOST is set, else
// nil (no API access). Errors are those of reading the file or the
// service account.
func RESTConfig(kubeconfig string) (*Config, error) {
	if kubeconfig != "" {
		return loadKubeconfig(kubeconfig)
	}
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" {
		return nil, nil
	}
	if port == "" {
		return nil, errors.New("in-cluster config: KUBERNETES_SERVICE_HOST is set but KUBERNETES_SERVICE_PORT is not")
	}
	if _, err := bounded.ReadFile(saTokenFile, "service account token", MaxKubeconfig); err != nil {
		return nil, fmt.Errorf("in-cluster config: %w", err)
	}
	return &Config{Host: "https://" + net.JoinHostPort(host, port), BearerTokenFile: saTokenFile, CAFile: saCAFile}, nil
}

// kubeconfig is the part of a kubeconfig file (clientcmd's v1 Config)
// that RESTConfig reads.
type kubeconfig struct {
	CurrentContext string `yaml:"current-context"`
	Contexts       []struct {
		Name    string `yaml:"name"`
		Context struct {
			Cluster string `yaml:"cluster"`
			User    string `yaml:"user"`
		} `yaml:"context"`
	} `yaml:"contexts"`
	Clusters []struct {
		Name    string `yaml:"name"`
		Cluster struct {
			Server     string `yaml:"server"`
			CA         string `yaml:"certificate-authority"`
			CAData     string `yaml:"certificate-authority-data"`
			Insecure   bool   `yaml:"insecure-skip-tls-verify"`
			ServerName string `yaml:"tls-server-name"`
			ProxyURL   string `yaml:"proxy-url"`
		} `yaml:"cluster"`
	} `yaml:"clusters"`
	Users []struct {
		Name string `yaml:"name"`
		User struct {
			Cert         string    `yaml:"client-certificate"`
			CertData     string    `yaml:"client-certificate-data"`
			Key          string    `yaml:"client-key"`
			KeyData      string    `yaml:"client-key-data"`
			Token        string    `yaml:"token"`
			TokenFile    string    `yaml:"tokenFile"`
			Username     string    `yaml:"username"`
			Password     string    `yaml:"password"`
			Exec         yaml.Node `yaml:"exec"`
			AuthProvider yaml.Node `yaml:"auth-provider"`
		} `yaml:"user"`
	} `yaml:"users"`
}

// loadKubeconfig reads a kubeconfig file of at most MaxKubeconfig bytes
// through package bounded and returns its current context's config; the
// files it names (certificates, keys, token) are relative to its
// directory, as kubectl reads them. Errors name the file, never quote it.
func loadKubeconfig(path string) (*Config, error) {
	data, err := bounded.ReadFile(path, "kubeconfig", MaxKubeconfig)
	if err != nil {
		return nil, err
	}
	cfg, err := parseKubeconfig(data, filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	return cfg, nil
}

// parseKubeconfig returns the config of a kubeconfig's current context,
// with the relative paths it names made relative to dir. Errors do not
// quote the file's values (they may be secrets), only the names of
// contexts, clusters and users, and of fields.
func parseKubeconfig(data []byte, dir string) (*Config, error) {
	var kc kubeconfig
	if err := yaml.Unmarshal(data, &kc); err != nil {
		return nil, errors.New("not a kubeconfig file")
	}
	if kc.CurrentContext == "" {
		return nil, errors.New("no current-context")
	}
	ci := -1
	for i, c := range kc.Contexts {
		if c.Name == kc.CurrentContext {
			ci = i
		}
	}
	if ci < 0 {
		return nil, fmt.Errorf("context %q not found", kc.CurrentContext)
	}
	ctx := kc.Contexts[ci].Context
	cfg := &Config{}
	var err error
	found := false
	for _, c := range kc.Clusters {
		if c.Name != ctx.Cluster {
			continue
		}
		cl := c.Cluster
		found = true
		cfg.Host, cfg.Insecure, cfg.ServerName = cl.Server, cl.Insecure, cl.ServerName
		cfg.CAFile = resolve(dir, cl.CA)
		if cfg.CAData, err = decodeData(cl.CAData, "certificate-authority-data"); err != nil {
			return nil, err
		}
		if cl.ProxyURL != "" {
			return nil, fmt.Errorf("cluster %q: proxy-url is not supported (use HTTPS_PROXY)", ctx.Cluster)
		}
	}
	if !found {
		return nil, fmt.Errorf("cluster %q not found", ctx.Cluster)
	}
	if u, err := url.Parse(cfg.Host); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("cluster %q: server is not an http(s) URL", ctx.Cluster)
	}
	if ctx.User != "" {
		found = false
		for _, u := range kc.Users {
			if u.Name != ctx.User {
				continue
			}
			us := u.User
			found = true
			if !us.Exec.IsZero() || !us.AuthProvider.IsZero() {
				return nil, fmt.Errorf("user %q: exec and auth-provider credential plugins are not supported (use a token, a token file or a client certificate)", ctx.User)
			}
			cfg.BearerToken, cfg.BearerTokenFile = us.Token, resolve(dir, us.TokenFile)
			cfg.Username, cfg.Password = us.Username, us.Password
			cfg.CertFile, cfg.KeyFile = resolve(dir, us.Cert), resolve(dir, us.Key)
			if cfg.CertData, err = decodeData(us.CertData, "client-certificate-data"); err != nil {
				return nil, err
			}
			if cfg.KeyData, err = decodeData(us.KeyData, "client-key-data"); err != nil {
				return nil, err
			}
		}
		if !found {
			return nil, fmt.Errorf("user %q not found", ctx.User)
		}
	}
	return cfg, nil
}

// decodeData decodes a base64 *-data field.
func decodeData(s, field string) ([]byte, error) {
	if s == "" {
		return nil, nil
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%s is not base64", field)
	}
	return b, nil
}

// resolve makes a relative path relative to dir.
func resolve(dir, p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

// readPEM returns data, or the file's bytes when data is empty.
func readPEM(data []byte, file, what string) ([]byte, error) {
	if len(data) > 0 || file == "" {
		return data, nil
	}
	return bounded.ReadFile(file, what, MaxKubeconfig)
}

// tlsConfig returns the TLS configuration of c: its CA (else the
// system's), its client certificate, its server name.
func (c *Config) tlsConfig() (*tls.Config, error) {
	t := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName, InsecureSkipVerify: c.Insecure} //nolint:gosec // only when the kubeconfig asks for it
	ca, err := readPEM(c.CAData, c.CAFile, "Kubernetes CA")
	if err != nil {
		return nil, err
	}
	if len(ca) > 0 {
		t.RootCAs = x509.NewCertPool()
		if !t.RootCAs.AppendCertsFromPEM(ca) {
			return nil, errors.New("the Kubernetes CA holds no PEM certificate")
		}
	}
	cert, err := readPEM(c.CertData, c.CertFile, "Kubernetes client certificate")
	if err != nil {
		return nil, err
	}
	key, err := readPEM(c.KeyData, c.KeyFile, "Kubernetes client key")
	if err != nil {
		return nil, err
	}
	if len(cert) > 0 || len(key) > 0 {
		pair, err := tls.X509KeyPair(cert, key)
		if err != nil {
			return nil, errors.New("the Kubernetes client certificate and key do not make a pair")
		}
		t.Certificates = []tls.Certificate{pair}
	}
	return t, nil
}
