// SPDX-License-Identifier: Apache-2.0

package web

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	config_util "github.com/prometheus/common/config"
	toolkit "github.com/prometheus/exporter-toolkit/web"
	"go.yaml.in/yaml/v2"
	"golang.org/x/crypto/bcrypt"
	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/bounded"
	"github.com/kernel-exporter/kernel_exporter/config"
)

// MaxWebFile bounds the --web.config.file and each file it names
// (certificates, key, client CAs): PEM files are a few KiB.
const MaxWebFile = bounded.MaxConfig

// webConfig is a --web.config.file in exporter-toolkit's format (TLS,
// basic auth, response headers), loaded with every file it names read
// through package bounded: exporter-toolkit's own reading (os.ReadFile of
// each, at every request and handshake) would hang on a FIFO and exhaust
// memory on /dev/zero. Its TLS settings go through exporter-toolkit's
// ConfigToTLSConfig with the files' content given inline, so that
// exporter-toolkit reads no file.
type webConfig struct {
	tls      *tls.Config // nil: plain HTTP
	http2    bool
	headers  map[string]string
	users    map[string][]byte // user: bcrypt hash
	fakeCost int               // of the dearest hash: unknown users are checked at it
}

// fileField is a field of the web config that names a file, and the field
// its content goes to.
type fileField struct {
	name   string // as in YAML
	path   func(*toolkit.TLSConfig) *string
	inline func(*toolkit.TLSConfig, string)
}

// fileFields are the fields of exporter-toolkit's web config that name
// files (TestWebConfigFileFields checks there are no others).
var fileFields = []fileField{
	{"cert_file", func(c *toolkit.TLSConfig) *string { return &c.TLSCertPath }, func(c *toolkit.TLSConfig, s string) { c.TLSCert = s }},
	{"key_file", func(c *toolkit.TLSConfig) *string { return &c.TLSKeyPath }, func(c *toolkit.TLSConfig, s string) { c.TLSKey = config_util.Secret(s) }},
	{"client_ca_file", func(c *toolkit.TLSConfig) *string { return &c.ClientCAs }, func(c *toolkit.TLSConfig, s string) { c.ClientCAsText = s }},
}

// configurableHeaders are the response headers a web config may set, with
// their allowed values (nil: any), as exporter-toolkit documents them.
var configurableHeaders = map[string][]string{
	"Strict-Transport-Security": nil,
	"X-Content-Type-Options":    {"nosniff"},
	"X-Frame-Options":           {"deny", "sameorigin"},
	"X-XSS-Protection":          nil,
	"Content-Security-Policy":   nil,
}

// loadWebConfig reads and checks the web config at path: the file itself
// and each file it names (cert_file, key_file, client_ca_file, relative to
// the config's directory) must be regular files of at most MaxWebFile
// bytes; the YAML must be exporter-toolkit's (strict), the password hashes
// bcrypt ones, the headers among configurableHeaders, and the TLS settings
// valid. Errors name the web config, the field and the file.
//
// It also returns the files it read, the config file first, each stamped
// before it was read, so that a change after the load is seen (see
// webConfigSource), whether the load failed or not.
func loadWebConfig(path string) (*webConfig, []watched, error) {
	bad := func(err error) error { return fmt.Errorf("--web.config.file %s: %w", path, err) }
	files := []watched{{path, stampOf(path)}}
	data, err := bounded.ReadFile(path, "web config", MaxWebFile)
	if err != nil {
		return nil, files, fmt.Errorf("--web.config.file: %w", err)
	}
	// exporter-toolkit's defaults and parser (yaml.v2, strict).
	c := toolkit.Config{
		TLSConfig:  toolkit.TLSConfig{MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS13, PreferServerCipherSuites: true},
		HTTPConfig: toolkit.HTTPConfig{HTTP2: true},
	}
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return nil, files, bad(redacted(err))
	}
	wc := &webConfig{http2: c.HTTPConfig.HTTP2, headers: c.HTTPConfig.Header, users: map[string][]byte{}}
	for k, v := range c.HTTPConfig.Header {
		allowed, ok := configurableHeaders[k]
		if !ok {
			return nil, files, bad(fmt.Errorf("http_server_config.headers: header %s cannot be set", config.Quote(k)))
		}
		if allowed != nil && !slices.Contains(allowed, v) {
			return nil, files, bad(fmt.Errorf("http_server_config.headers: %s must be one of %q", k, allowed))
		}
	}
	maxCost := 0
	for user, hash := range c.Users {
		cost, err := bcrypt.Cost([]byte(hash))
		if err != nil {
			return nil, files, bad(fmt.Errorf("basic_auth_users: user %s: %w", config.Quote(user), hashError(err)))
		}
		maxCost = max(maxCost, cost)
		wc.users[user] = []byte(hash)
	}
	wc.fakeCost = maxCost
	tc := c.TLSConfig
	tc.SetDirectory(filepath.Dir(path))
	if tc.TLSCertPath == "" && tc.TLSCert == "" && tc.TLSKeyPath == "" && tc.TLSKey == "" &&
		tc.ClientCAs == "" && tc.ClientCAsText == "" && tc.ClientAuth == "" {
		return wc, files, nil // no TLS
	}
	for _, f := range fileFields {
		p := f.path(&tc)
		if *p == "" {
			continue
		}
		files = append(files, watched{*p, stampOf(*p)})
		b, err := bounded.ReadFile(*p, "tls_server_config."+f.name, MaxWebFile)
		if err != nil {
			return nil, files, bad(err)
		}
		f.inline(&tc, string(b))
		*p = ""
	}
	if tc.TLSCert == "" {
		return nil, files, bad(errors.New("tls_server_config: missing one of cert or cert_file"))
	}
	if tc.TLSKey == "" {
		return nil, files, bad(errors.New("tls_server_config: missing one of key or key_file"))
	}
	cfg, err := toolkit.ConfigToTLSConfig(&tc)
	if err != nil {
		return nil, files, bad(fmt.Errorf("tls_server_config: %w", redacted(err)))
	}
	// Parse the certificate once, not at every handshake.
	cert, err := cfg.GetCertificate(nil)
	if err != nil {
		return nil, files, bad(fmt.Errorf("tls_server_config: %w", err))
	}
	cfg.Certificates, cfg.GetCertificate = []tls.Certificate{*cert}, nil
	wc.tls = cfg
	return wc, files, nil
}

// redacted returns err's text without any value of the file: a web config
// holds password hashes and may hold a private key inline, and errors never
// quote a file's content. yaml.v2's type errors keep their line, tag and
// Go type ("line 3: cannot unmarshal !!str into web.Config"), its strict
// field errors their line and type (and the key when it is snake_case, as
// the web config's own keys are), and exporter-toolkit's value errors
// ("unknown cipher: ...") their kind; anything else loses what it quotes
// between backquotes or after a quoting prefix.
func redacted(err error) error {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		lines := make([]string, len(te.Errors))
		for i, l := range te.Errors {
			lines[i] = redactLine(l)
		}
		return errors.New("yaml: unmarshal errors:\n  " + strings.Join(lines, "\n  "))
	}
	return errors.New(redactLine(err.Error()))
}

var (
	// yaml.v2: "line N: cannot unmarshal TAG[ `VALUE`] into TYPE"; the
	// value may hold backquotes and " into ", the type holds neither.
	typeErr = regexp.MustCompile(`^(line \d+: cannot unmarshal \S+) .* into (\S+)$`)
	// yaml.v2 strict: "line N: field KEY not found in type TYPE" and
	// "line N: field KEY already set in type TYPE".
	fieldErr = regexp.MustCompile(`^(line \d+): field (.*) (not found|already set) in type (\S+)$`)
	// configKey is a key shaped as the web config's own (snake_case): a
	// misspelt one is named, any other key is not.
	configKey = regexp.MustCompile(`^[a-z][a-z0-9_]{0,39}$`)
	// yaml.v2: "line N: key KEY already set in map".
	dupErr = regexp.MustCompile(`^(line \d+): key .* already set in map$`)
)

// hashError returns bcrypt's error for a password hash without the byte
// of the hash that some of them quote.
func hashError(err error) error {
	var prefix bcrypt.InvalidHashPrefixError
	var version bcrypt.HashVersionTooNewError
	switch {
	case errors.As(err, &prefix):
		return errors.New("not a bcrypt hash (it must start with $)")
	case errors.As(err, &version):
		return errors.New("not a bcrypt hash version this exporter reads (2a, 2b or 2y)")
	}
	return err // ErrHashTooShort, InvalidCostError (a number): nothing of the hash
}

// valuePrefixes are the error texts exporter-toolkit follows with the
// file's value.
var valuePrefixes = []string{"unknown cipher: ", "unknown curve: ", "unknown TLS version: ", "invalid ClientAuth: "}

func redactLine(l string) string {
	if m := typeErr.FindStringSubmatch(l); m != nil {
		return m[1] + " into " + m[2]
	}
	if m := fieldErr.FindStringSubmatch(l); m != nil {
		if configKey.MatchString(m[2]) {
			return l
		}
		return m[1] + ": a field " + m[3] + " in type " + m[4]
	}
	if m := dupErr.FindStringSubmatch(l); m != nil {
		return m[1] + ": key set twice"
	}
	for _, p := range valuePrefixes {
		if i := strings.Index(l, p); i >= 0 {
			return l[:i] + strings.TrimSuffix(p, ": ") + " (value not shown)"
		}
	}
	if i, j := strings.IndexByte(l, '`'), strings.LastIndexByte(l, '`'); i >= 0 {
		if j == i {
			j = len(l) - 1
		}
		return l[:i] + "a value" + l[j+1:]
	}
	return l
}

// CheckConfigFile checks the --web.config.file as loadWebConfig does: the
// file and every file it names regular files of at most MaxWebFile bytes
// (a FIFO, a device such as /dev/zero, or a huge file is refused with a
// *bounded.Error naming it and its field), and its settings valid. An
// empty path means no web config.
//
// The server reads the file and the files it names again when one of them
// changes (rotated certificates, changed passwords), the same way.
func CheckConfigFile(path string) error {
	if path == "" {
		return nil
	}
	_, _, err := loadWebConfig(path)
	return err
}

// watched is a file a web config load read, with its stamp from before.
type watched struct {
	path  string
	stamp fileStamp
}

// fileStamp tells whether a file changed: its identity, size and times as
// stat(2) gives them after symlinks (a Kubernetes Secret's rotation swaps a
// symlink), or the stat error.
type fileStamp struct {
	dev, ino   uint64
	size       int64
	mtim, ctim unix.Timespec
	errno      error
}

func stampOf(path string) fileStamp {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return fileStamp{errno: err}
	}
	return fileStamp{dev: st.Dev, ino: st.Ino, size: st.Size, mtim: st.Mtim, ctim: st.Ctim}
}

// webConfigSource serves the current web config to requests and TLS
// handshakes: it loads it again when the config file or a file the last
// load read changed (checked with stat at every request and handshake),
// and keeps the error of a failed load until one changes again.
type webConfigSource struct {
	path string
	log  *slog.Logger

	mu    sync.Mutex
	cur   *webConfig // the last good load
	err   error      // of the last load, when it failed
	watch []watched  // files of the last load
}

// newWebConfigSource loads the web config at path; its error is
// loadWebConfig's.
func newWebConfigSource(path string, log *slog.Logger) (*webConfigSource, error) {
	wc, files, err := loadWebConfig(path)
	if err != nil {
		return nil, err
	}
	return &webConfigSource{path: path, log: log, cur: wc, watch: files}, nil
}

// get returns the web config, loaded again if a file changed, or the
// error of the last load (logged once).
func (s *webConfigSource) get() (*webConfig, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	changed := false
	for _, w := range s.watch {
		if stampOf(w.path) != w.stamp {
			changed = true
			break
		}
	}
	if !changed {
		if s.err != nil {
			return nil, s.err
		}
		return s.cur, nil
	}
	wc, files, err := loadWebConfig(s.path)
	s.watch = files
	if err != nil {
		s.err = err
		s.log.Error("the web config changed and is refused: requests get 500 and TLS handshakes fail until it is fixed", "err", err)
		return nil, err
	}
	if s.err != nil {
		s.log.Info("the web config is valid again", "file", s.path)
	}
	s.cur, s.err = wc, nil
	return wc, nil
}
