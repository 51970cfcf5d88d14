// SPDX-License-Identifier: Apache-2.0

package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/kernel-exporter/kernel_exporter/bounded"
)

// loadWithin runs Load in a goroutine and fails the test if it does not
// return within d (a FIFO used to block it forever).
func loadWithin(t *testing.T, d time.Duration, dir, name string) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := Load(dir, name)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("Load(%s, %s) did not return within %v", dir, name, d)
		return nil
	}
}

// TestHardening05ConfigFIFO: a <name>.yaml that is a FIFO with no writer
// is refused at once, with an error naming it.
func TestHardening05ConfigFIFO(t *testing.T) {
	checkRefused(t, "pipe", "a FIFO", func(file string) error { return syscall.Mkfifo(file, 0o600) })
}

// TestHardening09ConfigDevZero: a config that is a symlink to /dev/zero is
// refused without reading it (it used to be read until memory ran out).
func TestHardening09ConfigDevZero(t *testing.T) {
	checkRefused(t, "zero", "a character device", func(file string) error { return os.Symlink("/dev/zero", file) })
}

// checkRefused makes <dir>/<name>.yaml with mk and checks that Load refuses
// it within 5 s as not a regular file of the given kind.
func checkRefused(t *testing.T, name, kind string, mk func(file string) error) {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, name+".yaml")
	if err := mk(file); err != nil {
		t.Fatal(err)
	}
	err := loadWithin(t, 5*time.Second, dir, name)
	if err == nil {
		t.Fatalf("no error for %s", kind)
	}
	if !errors.Is(err, bounded.ErrNotRegular) {
		t.Errorf("errors.Is(%v, ErrNotRegular) = false", err)
	}
	if want := file + ": not a regular file (" + kind + ")"; err.Error() != want {
		t.Errorf("error\n got: %s\nwant: %s", err, want)
	}
}

// TestHardening09ConfigTooLarge: a config file over 1 MiB is refused, by
// Load and by Parse, with the limit in the error.
func TestHardening09ConfigTooLarge(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "big.yaml")
	data := []byte(goodCounter + "#" + strings.Repeat("x", MaxFileSize) + "\n")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	err := loadWithin(t, 5*time.Second, dir, "big")
	if err == nil || !errors.Is(err, bounded.ErrTooLarge) {
		t.Fatalf("got %v, want ErrTooLarge", err)
	}
	if want := file + ": larger than the 1 MiB limit of a config"; err.Error() != want {
		t.Errorf("error\n got: %s\nwant: %s", err, want)
	}
	if _, err := Parse("big.yaml", data); err == nil || err.Error() != "big.yaml: larger than the 1 MiB limit of a config" {
		t.Errorf("Parse: %v", err)
	}
}

// counterWith returns goodCounter with the label's decoders replaced.
func counterWith(decoders string) string {
	return strings.Replace(goodCounter, "            - name: ksym\n", decoders, 1)
}

// TestHardening09ManyRegexps: the regexps of a config are capped per
// decoder, per config, in length and in what they expand to, so that a
// config cannot make the decoders compile without bound.
func TestHardening09ManyRegexps(t *testing.T) {
	list := func(n int, pat string) string {
		var b strings.Builder
		b.WriteString("            - name: ksym\n            - name: regexp\n              regexps:\n")
		for i := 0; i < n; i++ {
			fmt.Fprintf(&b, "                - '%s'\n", pat)
		}
		return b.String()
	}
	for _, tc := range []struct{ name, yaml, want string }{
		{"per decoder", counterWith(list(MaxRegexps+1, "a")),
			"metrics.counters[0].labels[0].decoders[1].regexps: 257 patterns, more than the limit of 256"},
		{"per config", strings.Repeat("", 0) + manyCounters(5, list(250, "a")),
			"metrics.counters[4].labels[0].decoders[1].regexps: more than 1024 patterns in the config"},
		{"too long", counterWith(list(1, strings.Repeat("a", MaxRegexpLen+1))),
			"metrics.counters[0].labels[0].decoders[1].regexps[0]: pattern of 1025 bytes, longer than the limit of 1024"},
		{"expands", counterWith(list(1, strings.Repeat(`[a-z]{1000}`, 6))),
			"metrics.counters[0].labels[0].decoders[1].regexps[0]: pattern (a string of 66 bytes) expands to about 12013 instructions, more than the limit of 10000"},
		{"expands in total", counterWith(list(13, strings.Repeat(`[a-z]{1000}`, 4))),
			"metrics.counters[0].labels[0].decoders[1].regexps[12]: the config's patterns expand to more than 100000 instructions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("bad.yaml", []byte(tc.yaml))
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.HasSuffix(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "bad.yaml:") {
				t.Errorf("error\n got: %s\nwant: bad.yaml:...%s", err, tc.want)
			}
		})
	}
	// Within the limits, patterns are fine.
	if _, err := Parse("ok.yaml", []byte(counterWith(list(MaxRegexps, `^tcp_[a-z]{1,20}$`)))); err != nil {
		t.Errorf("256 patterns: %v", err)
	}
}

// manyCounters returns a config of n counters, each with one label whose
// decoders are given.
func manyCounters(n int, decoders string) string {
	var b strings.Builder
	b.WriteString("metrics:\n  counters:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "    - name: c%d_total\n      help: h\n      labels:\n        - name: function\n          size: 8\n          decoders:\n%s", i, decoders)
	}
	return b.String()
}

// TestHardening09StaticMapLimits: static_map entries and their keys and
// values are capped.
func TestHardening09StaticMapLimits(t *testing.T) {
	sm := func(entries map[string]string) string {
		var b strings.Builder
		b.WriteString("            - name: uint\n            - name: static_map\n              static_map: {")
		for k, v := range entries {
			fmt.Fprintf(&b, "%q: %q, ", k, v)
		}
		b.WriteString("}\n")
		return b.String()
	}
	big := map[string]string{}
	for i := 0; i <= MaxStaticMap; i++ {
		big[fmt.Sprint(i)] = "v"
	}
	for _, tc := range []struct {
		name    string
		entries map[string]string
		want    string
	}{
		{"entries", big, "static_map: a mapping of 65537 entries, more than the limit of 65536"},
		{"key", map[string]string{strings.Repeat("k", MaxStaticKey+1): "v"}, "static_map: a key of 257 bytes, longer than the limit of 256"},
		{"value", map[string]string{"1": strings.Repeat("v", MaxStaticValue+1)}, `static_map: the value of key "1" is 1025 bytes, longer than the limit of 1024`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("bad.yaml", []byte(counterWith(sm(tc.entries))))
			if err == nil || !strings.HasSuffix(err.Error(), "metrics.counters[0].labels[0].decoders[1]."+tc.want) {
				t.Errorf("got %v\nwant ...%s", err, tc.want)
			}
		})
	}
}

// TestHardening09StaticMapTotal: the static_map entries of a config are
// capped in total.
func TestHardening09StaticMapTotal(t *testing.T) {
	// One map of 45,000 entries, used by three counters through an alias:
	// 135,000 entries in all, over the limit of 131,072.
	var b strings.Builder
	b.WriteString("            - name: uint\n            - name: static_map\n              static_map: &m {")
	for i := 0; i < 45000; i++ {
		fmt.Fprintf(&b, "%d: v, ", i)
	}
	b.WriteString("}\n")
	alias := "            - name: uint\n            - name: static_map\n              static_map: *m\n"
	cfg := manyCounters(1, b.String()) + strings.TrimPrefix(manyCounters(2, alias), "metrics:\n  counters:\n")
	cfg = strings.Replace(cfg, "name: c0_total", "name: a_total", 1)
	_, err := Parse("bad.yaml", []byte(cfg))
	want := "metrics.counters[2].labels[0].decoders[1].static_map: more than 131072 static_map entries in the config"
	if err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("got %v\nwant ...%s", err, want)
	}
}

// TestHardening06ConfigLargeMapping: yaml.v3 compares every pair of keys
// of a mapping, so a 1 MiB static_map of 100,000 small entries took
// minutes to decode. The shape of the YAML tree is bounded before it is
// decoded: entries per mapping, their squares in total, nodes with aliases
// expanded, depth.
func TestHardening06ConfigLargeMapping(t *testing.T) {
	var big strings.Builder
	big.WriteString("            - name: uint\n            - name: static_map\n              static_map: {")
	for i := 0; big.Len() < MaxFileSize-1000; i++ {
		fmt.Fprintf(&big, "%d: a, ", i)
	}
	big.WriteString("}\n")
	// Mappings other than static_map cost yaml.v3 their size squared.
	var work strings.Builder
	for m := 0; m < 5; m++ {
		fmt.Fprintf(&work, "x%d: {", m)
		for i := 0; i < 4000; i++ {
			fmt.Fprintf(&work, "%d: v, ", i)
		}
		work.WriteString("}\n")
	}
	squares := work.String()
	// An alias bomb: each level multiplies the nodes by ten.
	bomb := "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
	for i := 1; i < 9; i++ {
		bomb += fmt.Sprintf("a%d: &a%d [*a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d]\n", i, i, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1)
	}
	deep := "metrics: " + strings.Repeat("[", 100) + strings.Repeat("]", 100) + "\n"
	// A key named static_map outside a decoder is an ordinary mapping:
	// yaml.v3 decodes it, in quadratic time.
	var elsewhere strings.Builder
	elsewhere.WriteString(goodCounter + "attach_to:\n  static_map:\n")
	for i := 0; i < 5000; i++ {
		fmt.Fprintf(&elsewhere, "    k%d: v\n", i)
	}
	for _, tc := range []struct{ name, yaml, want string }{
		{"1 MiB static_map", counterWith(big.String()), "metrics.counters[0].labels[0].decoders[1].static_map: a mapping of "},
		{"squares in total", squares, "x4: mappings too large in total: the sum of their squared sizes is over 67108864"},
		{"alias bomb", bomb, "more than 1048576 YAML nodes (aliases expanded)"},
		{"deep", deep, "nested deeper than 64 levels (aliases expanded)"},
		{"static_map outside a decoder", elsewhere.String(), "attach_to.static_map: a mapping of 5000 entries, more than the limit of 4096"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A guard against the minutes the quadratic decode took,
			// far above any machine's load; not a performance figure
			// (BenchmarkStaticMapParse gives those).
			start := time.Now()
			_, err := Parse("bad.yaml", []byte(tc.yaml))
			if d := time.Since(start); d > 30*time.Second {
				t.Errorf("took %v", d)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v\nwant ...%s", err, tc.want)
			}
		})
	}
}

// TestHardening10ConfigErrorNoContent: a config name that points at a
// secret or at anything that is not a config gives an error that names the
// file and shows none of its content.
func TestHardening10ConfigErrorNoContent(t *testing.T) {
	const shadow = "root:$6$Zx9secretHash$abc:19000:0:99999:7:::\n"
	for _, tc := range []struct {
		name    string
		content string
		secrets []string
	}{
		{"shadow line", shadow, []string{"root:", "$6$", "Zx9secretHash", "19000"}},
		{"shadow lines", shadow + "daemon:*:19000:0:99999:7:::\nbob:$y$j9T$Q5secretSalt$hashhash:19500:0:99999:7:::\n",
			[]string{"root:", "$6$", "Zx9secretHash", "Q5secretSalt", "daemon:*"}},
		{"binary", "\x7fELF\x02\x01\x01\x00\xff\xfe\x00\x00Zx9secret$Hash\x01", []string{"ELF", "Zx9secret$Hash"}},
		{"long line", strings.Repeat("Zx9secretHash", 400) + "\n", []string{"Zx9secretHash"}},
		{"mapping of secrets", "password: 'hunter2:Zx9secretHash'\napi_key: sk_live_0123456789abcdefghijklmnop\n",
			[]string{"hunter2", "Zx9secretHash", "sk_live_0123456789abcdefghijklmnop"}},
		{"secret as a value of a known key", "namespace: 'root:$6$Zx9secretHash'\nmetrics: x\n", []string{"root:", "Zx9secretHash"}},
		{"secret metric name", "metrics:\n  counters:\n    - name: 'root:$6$Zx9secretHash$abc'\n      help: x\n", []string{"root:", "Zx9secretHash"}},
		{"secret in a number field", strings.Replace(goodCounter, "size: 8", "size: 'root:$6$Zx9secretHash'", 1), []string{"root:", "Zx9secretHash"}},
		{"short secret in a number field", strings.Replace(goodCounter, "size: 8", "size: 'pw:$6$x'", 1), []string{"pw:$6$x", "$6$"}},
		{"list", "- 'root:$6$Zx9secretHash'\n- token=sk_live_0123456789abcdef\n", []string{"root:", "Zx9secretHash", "sk_live"}},
		{"custom tag", "!root:$6$Zx9secretHash x\n", []string{"root:", "Zx9secretHash"}},
		{"unknown anchor", "metrics: *Zx9secretHash$abc\n", []string{"Zx9secretHash"}},
		{"syntax error in a quoted line", "metrics: {counters: [\"root:$6$Zx9secretHash\n", []string{"root:", "Zx9secretHash"}},
		{"syntax error", "root:$6$Zx9secretHash: [: x\n\t- y", []string{"root:", "Zx9secretHash"}},
		{"bad regexp", counterWith("            - name: regexp\n              regexps: ['root:$6$Zx9secretHash(']\n"), []string{"root:", "Zx9secretHash"}},
		{"env file", "export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n", []string{"wJalrXUtnFEMI", "AWS_SECRET"}},
		{"duplicate key", "'root:$6$Zx9secretHash': 1\n'root:$6$Zx9secretHash': 2\n", []string{"root:", "Zx9secretHash"}},
		// Short secrets, which pass as plain tokens: a one-word file, the
		// first key of a "key:" file, a key given twice.
		{"short secret alone", "hunter2xy\n", []string{"hunter2xy"}},
		{"short secret as a key", "AKIA1234:\n", []string{"AKIA1234"}},
		{"short secret key twice", "hunter2xy: 1\nhunter2xy: 2\n", []string{"hunter2xy"}},
		{"short secret as an alias", "*hunter2\n", []string{"hunter2"}},
		{"short secret in a list of aliases", "[*hunter2]\n", []string{"hunter2"}},
		{"short secret tagged", "!!int hunter2\n", []string{"hunter2"}},
		{"short secret as a tagged key", "{? !!int hunter2}\n", []string{"hunter2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "shadow.yaml"), []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Load(dir, "shadow")
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, filepath.Join(dir, "shadow.yaml")) {
				t.Errorf("error does not name the file: %s", msg)
			}
			if !utf8.ValidString(msg) {
				t.Errorf("error is not valid UTF-8: %q", msg)
			}
			for _, s := range tc.secrets {
				if strings.Contains(msg, s) {
					t.Errorf("error shows %q: %s", s, msg)
				}
			}
			t.Log(msg)
		})
	}
}

// TestQuoteAndSanitize checks what errors may show of a value.
func TestQuoteAndSanitize(t *testing.T) {
	for in, want := range map[string]string{
		"eight":                     `"eight"`,
		"":                          `""`,
		"/bin/x":                    `"/bin/x"`,
		"abcdefghijklmnopqrstuvwx":  `"abcdefghijklmnopqrstuvwx"`,
		"abcdefghijklmnopqrstuvwxy": "(a string of 25 bytes)",
		"a b":                       "(a string of 3 bytes)",
		"root:$6$x":                 "(a string of 9 bytes)",
		"\xff":                      "(a string of 1 byte)",
	} {
		if got := Quote(in); got != want {
			t.Errorf("Quote(%q) = %s, want %s", in, got, want)
		}
	}
	for in, want := range map[string]string{
		`regexp: bad pattern "a(": missing closing ): ` + "`a(`": "regexp: bad pattern (a string of 2 bytes): missing closing ): (a string of 2 bytes)",
		`unknown decoder "nope" (known: a, b)`:                   `unknown decoder "nope" (known: a, b)`,
		`unknown anchor 'root:$6$' referenced`:                   `unknown anchor (a string of 8 bytes) referenced`,
		"unterminated 'root:$6$x":                                "unterminated (a string of 9 bytes)",
		"bad \xff byte":                                          "bad \uFFFD byte",
	} {
		if got := Sanitize(in); got != want {
			t.Errorf("Sanitize(%q)\n got: %s\nwant: %s", in, got, want)
		}
	}
}

// TestHardening11ConfigNameTraversal: a config name is a plain file name;
// "../outside/evil" is refused before any file is opened.
func TestHardening11ConfigNameTraversal(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "configs")
	outside := filepath.Join(root, "outside")
	for _, d := range []string{dir, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "evil.yaml"), []byte(goodCounter), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(dir, "../outside/evil")
	if err == nil {
		t.Fatalf("loaded %s from outside %s", c.File, dir)
	}
	if want := dir + `: config name "../outside/evil": want letters, digits, _ . - only (no /)`; err.Error() != want {
		t.Errorf("error\n got: %s\nwant: %s", err, want)
	}
	for name, want := range map[string]string{
		"timers":                          "",
		"my-prog_2.v1":                    "",
		strings.Repeat("a", 64):           "",
		"":                                "config name: empty",
		".":                               `config name ".": not a file name`,
		"..":                              `config name "..": not a file name`,
		"a/b":                             `config name "a/b": want letters, digits, _ . - only (no /)`,
		"/etc/shadow":                     `config name "/etc/shadow": want letters, digits, _ . - only (no /)`,
		"a b":                             `config name "a b": want letters, digits, _ . - only (no /)`,
		"caf\xe9":                         `config name "caf\xe9": want letters, digits, _ . - only (no /)`,
		strings.Repeat("a", 65):           `config name "aaaaaaaaaaaaaaaaaaaaaaaa"...: longer than 64 bytes`,
		"../../../../../../../etc/passwd": `config name "../../../../../../../etc"...: want letters, digits, _ . - only (no /)`,
	} {
		err := CheckName(name)
		switch {
		case want == "" && err != nil:
			t.Errorf("CheckName(%q) = %v, want nil", name, err)
		case want != "" && (err == nil || err.Error() != want):
			t.Errorf("CheckName(%q) = %v, want %s", name, err, want)
		}
	}
}

// TestHardening12ReservedLabels: label names that Prometheus reserves are
// refused: "le" on histograms (it broke the whole exposition), "quantile"
// and names starting with "__" everywhere.
func TestHardening12ReservedLabels(t *testing.T) {
	hist := func(label string) string {
		return strings.Replace(histogram("exp2", "bucket"), "      labels:\n", "      labels:\n        - name: "+label+"\n          size: 4\n          decoders:\n            - name: uint\n", 1)
	}
	for _, tc := range []struct{ name, yaml, want string }{
		{"le on a histogram", hist("le"),
			`bad.yaml:10: metrics.histograms[0].labels[0].name: label name "le": "le" is reserved by Prometheus for histogram buckets`},
		{"quantile on a histogram", hist("quantile"),
			`bad.yaml:10: metrics.histograms[0].labels[0].name: label name "quantile": "quantile" is reserved by Prometheus for summaries`},
		{"__ on a histogram", hist("__name__"),
			`bad.yaml:10: metrics.histograms[0].labels[0].name: label name "__name__": label names starting with __ are reserved by Prometheus`},
		{"quantile on a counter", strings.Replace(goodCounter, "name: function", "name: quantile", 1),
			`bad.yaml:6: metrics.counters[0].labels[0].name: label name "quantile": "quantile" is reserved by Prometheus for summaries`},
		{"__ on a counter", strings.Replace(goodCounter, "name: function", "name: __x", 1),
			`bad.yaml:6: metrics.counters[0].labels[0].name: label name "__x": label names starting with __ are reserved by Prometheus`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("bad.yaml", []byte(tc.yaml))
			if err == nil || err.Error() != tc.want {
				t.Errorf("error\n got: %v\nwant: %s", err, tc.want)
			}
		})
	}
	// "le" is an ordinary label on a counter.
	if _, err := Parse("ok.yaml", []byte(strings.Replace(goodCounter, "name: function", "name: le", 1))); err != nil {
		t.Errorf("le on a counter: %v", err)
	}
}

// TestHardening12BucketMultiplier: a multiplier must be finite and > 0 (0
// means 1), and must keep the largest bound finite.
func TestHardening12BucketMultiplier(t *testing.T) {
	for _, tc := range []struct{ value, want string }{
		{".nan", "must be a finite number > 0 (or 0 for 1), got NaN"},
		{".inf", "must be a finite number > 0 (or 0 for 1), got +Inf"},
		{"-.inf", "must be a finite number > 0 (or 0 for 1), got -Inf"},
		{"-1", "must be a finite number > 0 (or 0 for 1), got -1"},
		{"1e308", "1e+308 makes the largest bucket bound infinite"},
	} {
		y := strings.Replace(histogram("exp2", "bucket"), "bucket_multiplier: 0.000001", "bucket_multiplier: "+tc.value, 1)
		_, err := Parse("bad.yaml", []byte(y))
		if want := "bad.yaml:8: metrics.histograms[0].bucket_multiplier: " + tc.want; err == nil || err.Error() != want {
			t.Errorf("%s: got %v\nwant %s", tc.value, err, want)
		}
	}
	for _, v := range []string{"0", "1e-9", "1000"} {
		y := strings.Replace(histogram("exp2", "bucket"), "bucket_multiplier: 0.000001", "bucket_multiplier: "+v, 1)
		if _, err := Parse("ok.yaml", []byte(y)); err != nil {
			t.Errorf("%s: %v", v, err)
		}
	}
}

// TestHardening12NameLengths: namespace, metric, label and help lengths
// are bounded.
func TestHardening12NameLengths(t *testing.T) {
	long := strings.Repeat("n", MaxNameLen+1)
	for _, tc := range []struct{ name, yaml, want string }{
		{"namespace", "namespace: " + strings.Repeat("n", MaxNamespace+1) + "\n" + goodCounter,
			"bad.yaml:1: namespace: longer than 64 bytes (65)"},
		{"metric", strings.Replace(goodCounter, "timer_starts_total", long, 1),
			"bad.yaml:3: metrics.counters[0].name: metric name longer than 128 bytes (129)"},
		{"label", strings.Replace(goodCounter, "name: function", "name: "+long, 1),
			"bad.yaml:6: metrics.counters[0].labels[0].name: label name longer than 128 bytes (129)"},
		{"help", strings.Replace(goodCounter, "Timers started", strings.Repeat("h", MaxHelp+1), 1),
			"bad.yaml:4: metrics.counters[0].help: longer than 1024 bytes (1025)"},
		{"metrics", manyCounters(MaxMetrics+1, "            - name: ksym\n"),
			"bad.yaml:1: metrics: 257 metrics, more than the limit of 256"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("bad.yaml", []byte(tc.yaml))
			if err == nil || err.Error() != tc.want {
				t.Errorf("error\n got: %v\nwant: %s", err, tc.want)
			}
		})
	}
}

// TestHardening01LabelSizes: label size and padding are range-checked and
// the labels of a key may not take more than MaxKeySize bytes, so offsets
// cannot overflow (collector has the scrape-side regression test).
func TestHardening01LabelSizes(t *testing.T) {
	two := func(size1, pad1, size2, pad2 string) string {
		return `metrics:
  counters:
    - name: ops_total
      help: h
      labels:
        - name: a
          size: ` + size1 + `
          padding: ` + pad1 + `
          decoders: [{name: hex}]
        - name: b
          size: ` + size2 + `
          padding: ` + pad2 + `
          decoders: [{name: hex}]
`
	}
	for _, tc := range []struct{ name, yaml, want string }{
		{"overflowing sizes", two("9223372036854775807", "0", "9223372036854775807", "10"),
			"bad.yaml:7: metrics.counters[0].labels[0].size: must be 1 to 4096 bytes, got 9223372036854775807"},
		{"huge padding", two("4", "9223372036854775800", "4", "0"),
			"bad.yaml:8: metrics.counters[0].labels[0].padding: must be 0 to 4096 bytes, got 9223372036854775800"},
		{"negative padding", two("4", "-4", "4", "0"),
			"bad.yaml:8: metrics.counters[0].labels[0].padding: must be 0 to 4096 bytes, got -4"},
		{"key too large", two("4096", "0", "1", "0"),
			"bad.yaml:11: metrics.counters[0].labels[1].size: labels up to here take 4097 bytes, more than the 4096-byte limit of a map key"},
		{"too many labels", manyLabels(MaxLabels + 1),
			"bad.yaml:5: metrics.counters[0].labels: 33 labels, more than the limit of 32"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("bad.yaml", []byte(tc.yaml))
			if err == nil || err.Error() != tc.want {
				t.Errorf("error\n got: %v\nwant: %s", err, tc.want)
			}
		})
	}
	if _, err := Parse("ok.yaml", []byte(two("4000", "92", "4", "0"))); err != nil {
		t.Errorf("4096-byte key: %v", err)
	}
}

func manyLabels(n int) string {
	var b strings.Builder
	b.WriteString("metrics:\n  counters:\n    - name: ops_total\n      help: h\n      labels:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "        - {name: l%d, size: 1, decoders: [{name: uint}]}\n", i)
	}
	return b.String()
}

// TestHardening02BucketLimits: one cap on the buckets of a histogram, and
// every slot number bounded.
func TestHardening02BucketLimits(t *testing.T) {
	set := func(typ, fields string) string {
		return strings.Replace(strings.Replace(histogram(typ, "bucket"), "      bucket_min: 0\n      bucket_max: 26\n", fields, 1), "bucket_type: fixed", "bucket_type: fixed", 1)
	}
	for _, tc := range []struct{ name, yaml, want string }{
		{"linear 1e12", set("linear", "      bucket_max: 1000000000000\n"),
			"bad.yaml:6: metrics.histograms[0].bucket_max: 1000000000001 buckets (bucket_min 0 to bucket_max 1000000000000), more than the limit of 4096"},
		{"linear 1e16", set("linear", "      bucket_min: 10000000000000000\n      bucket_max: 10000000000000000\n"),
			"bad.yaml:6: metrics.histograms[0].bucket_min: must be 0 to 9007199254740992, got 10000000000000000"},
		{"linear 1e8", set("linear", "      bucket_max: 100000000\n"),
			"bad.yaml:6: metrics.histograms[0].bucket_max: 100000001 buckets (bucket_min 0 to bucket_max 100000000), more than the limit of 4096"},
		{"linear 4097", set("linear", "      bucket_min: 10\n      bucket_max: 4106\n"),
			"bad.yaml:7: metrics.histograms[0].bucket_max: 4097 buckets (bucket_min 10 to bucket_max 4106), more than the limit of 4096"},
		{"negative min", set("linear", "      bucket_min: -1\n      bucket_max: 4\n"),
			"bad.yaml:6: metrics.histograms[0].bucket_min: must be 0 to 9007199254740992, got -1"},
		{"fixed key NaN", set("fixed", "      bucket_keys: [1, .nan]\n"),
			"bad.yaml:6: metrics.histograms[0].bucket_keys[1]: must be an integer slot from 0 to 9007199254740992, got NaN"},
		{"fixed key Inf", set("fixed", "      bucket_keys: [1, .inf]\n"),
			"bad.yaml:6: metrics.histograms[0].bucket_keys[1]: must be an integer slot from 0 to 9007199254740992, got +Inf"},
		{"fixed key 1e300", set("fixed", "      bucket_keys: [1, 1e300]\n"),
			"bad.yaml:6: metrics.histograms[0].bucket_keys[1]: must be an integer slot from 0 to 9007199254740992, got 1e+300"},
		{"fixed key fraction", set("fixed", "      bucket_keys: [1.5]\n"),
			"bad.yaml:6: metrics.histograms[0].bucket_keys[0]: must be an integer slot from 0 to 9007199254740992, got 1.5"},
		{"fixed descending", set("fixed", "      bucket_keys: [5, 1]\n"),
			"bad.yaml:6: metrics.histograms[0].bucket_keys[1]: bucket_keys must be ascending: 1 after 5"},
		{"fixed too many", set("fixed", "      bucket_keys: ["+keys(MaxBuckets+1)+"]\n"),
			"bad.yaml:6: metrics.histograms[0].bucket_keys: 4097 keys, more than the limit of 4096"},
		{"sum bucket", set("exp2", "      bucket_max: 4\n      sum_bucket: 9007199254740993\n"),
			"bad.yaml:7: metrics.histograms[0].sum_bucket: must be 0 to 9007199254740992, got 9007199254740993"},
		{"max_series", set("exp2", "      bucket_max: 4\n      max_series: 1000001\n"),
			"bad.yaml:7: metrics.histograms[0].max_series: must be 0 (default 10000) to 1000000, got 1000001"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("bad.yaml", []byte(tc.yaml))
			if err == nil || err.Error() != tc.want {
				t.Errorf("error\n got: %v\nwant: %s", err, tc.want)
			}
		})
	}
	for _, y := range []string{
		set("linear", "      bucket_min: 1000000000000\n      bucket_max: 1000000004095\n"),
		set("fixed", "      bucket_keys: [1, 1000000000000]\n"),
		set("fixed", "      bucket_keys: ["+keys(MaxBuckets)+"]\n"),
	} {
		if _, err := Parse("ok.yaml", []byte(y)); err != nil {
			t.Errorf("%v", err)
		}
	}
}

func keys(n int) string {
	s := make([]string, n)
	for i := range s {
		s[i] = fmt.Sprint(i)
	}
	return strings.Join(s, ", ")
}

// TestProbeAndAlternativeLimits checks the range of every number and the
// length of every list in uprobes, usdt, perf_events, alternatives,
// requires, attach_to and kaddrs.
func TestProbeAndAlternativeLimits(t *testing.T) {
	up := func(extra string) string {
		return goodCounter + "uprobes:\n  - program: p\n    binary: /bin/x\n    symbol: s\n" + extra
	}
	perf := func(extra string) string {
		return goodCounter + "perf_events:\n  - program: p\n    type: software\n    name: cpu-clock\n" + extra
	}
	many := func(key, item string, n int) string {
		return goodCounter + key + ":\n" + strings.Repeat(item, n)
	}
	for _, tc := range []struct{ name, yaml, want string }{
		{"pid", up("    pid: 4194305\n"), "uprobes[0].pid: must be 0 (every process) to 4194304, got 4194305"},
		{"offset", up("    offset: 4294967297\n"), "uprobes[0].offset: must be < 4294967296 (the size limit of a target binary), got 4294967297"},
		{"symbol", strings.Replace(up(""), "symbol: s", "symbol: "+strings.Repeat("s", MaxSymbol+1), 1), "uprobes[0].symbol: longer than 512 bytes (513)"},
		{"binary", strings.Replace(up(""), "/bin/x", "/"+strings.Repeat("b", MaxPath), 1), "uprobes[0].binary: path longer than 4096 bytes (4097)"},
		{"program", strings.Replace(up(""), "program: p", "program: "+strings.Repeat("p", MaxProgramName+1), 1), "uprobes[0].program: program name longer than 128 bytes (129)"},
		{"uprobes", many("uprobes", "  - {program: p, binary: /b, symbol: s}\n", MaxProbes+1), "uprobes: 257 entries, more than the limit of 256"},
		{"usdt pid", goodCounter + "usdt:\n  - {program: p, binary: /b, provider: a, name: b, pid: -1}\n", "usdt[0].pid: must be 0 (every process) to 4194304, got -1"},
		{"usdt name", goodCounter + "usdt:\n  - {program: p, binary: /b, provider: a, name: " + strings.Repeat("n", MaxSymbol+1) + "}\n", "usdt[0].name: longer than 512 bytes (513)"},
		{"frequency", perf("    frequency: 100001\n"), "perf_events[0].frequency: must be 1 to 100000 samples per second, got 100001"},
		{"period", perf("    period: 9223372036854775808\n"), "perf_events[0].period: must be 1 to 9223372036854775807 events, got 9223372036854775808"},
		{"alternatives", many("alternatives", "  - {name: g, programs: [p]}\n", MaxAlternatives+1), "alternatives: 65 groups, more than the limit of 64"},
		{"features", goodCounter + "requires:\n  features: [" + strings.TrimSuffix(strings.Repeat("btf, ", MaxFeatures+1), ", ") + "]\n", "requires.features: 33 features, more than the limit of 32"},
		{"kernel", goodCounter + "requires:\n  kernel: \"5." + strings.Repeat("1", 40) + "\"\n", "requires.kernel: invalid kernel version (a string of 42 bytes): want major.minor[.patch], e.g. \"5.15\""},
		{"kaddrs", goodCounter + "kaddrs: [" + strings.TrimSuffix(strings.Repeat("a, ", MaxKaddrs+1), ", ") + "]\n", "kaddrs: 257 symbols, more than the limit of 256"},
		{"kaddr name", goodCounter + "kaddrs: ['a b']\n", "kaddrs[0]: invalid kernel symbol name (a string of 3 bytes)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("bad.yaml", []byte(tc.yaml))
			if err == nil || !strings.HasSuffix(err.Error(), ": "+tc.want) {
				t.Errorf("error\n got: %v\nwant: ...: %s", err, tc.want)
			}
		})
	}
	for _, y := range []string{up("    pid: 4194304\n    offset: 4294967295\n"), perf("    frequency: 100000\n"), perf("    period: 9223372036854775807\n")} {
		if _, err := Parse("ok.yaml", []byte(y)); err != nil {
			t.Errorf("%v", err)
		}
	}
}
