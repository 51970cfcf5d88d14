// SPDX-License-Identifier: Apache-2.0

package decoder

import (
	"errors"
	"io/fs"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/kernel-exporter/kernel_exporter/config"
)

// TestDecodeErrorNamesDecoder checks that a chain's error names the decoder
// that failed and unwraps to its error.
func TestDecodeErrorNamesDecoder(t *testing.T) {
	e := NewEnv(16)
	e.ProcRoot = t.TempDir() // no kallsyms
	chain, err := e.NewChain([]config.Decoder{{Name: "hex"}, {Name: "errno"}}, 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = chain.Decode(u32(7))
	var de *DecodeError
	if !errors.As(err, &de) || de.Decoder != "errno" || de.Index != 1 || err.Error() != "errno: bad number 0x307837" {
		t.Fatalf("error = %#v (%v)", err, err)
	}
	ksym, err := e.NewChain([]config.Decoder{{Name: "ksym"}}, 8, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = ksym.Decode(u64(0xffffffff81000000))
	if !errors.As(err, &de) || de.Decoder != "ksym" || de.Index != 0 || !errors.Is(err, errNotExist()) {
		t.Fatalf("ksym error = %v", err)
	}
	// ErrSkip is not an error of a decoder.
	re, _ := e.NewChain([]config.Decoder{{Name: "regexp", Regexps: []string{"^x"}}}, 0, nil)
	if _, err := re.Decode([]byte("y")); err != ErrSkip {
		t.Fatalf("skip = %v", err)
	}
}

// TestChainOutputUTF8 checks that a chain's output is valid UTF-8 whatever
// its last decoder returns.
func TestChainOutputUTF8(t *testing.T) {
	e := NewEnv(16)
	chain, err := e.NewChain([]config.Decoder{{Name: "static_map", AllowUnknown: true, StaticMap: map[string]string{"a": "b"}}}, 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := chain.Decode([]byte{'x', 0xff, 0xfe, 'y'})
	if err != nil || out != "x\uFFFDy" || !utf8.ValidString(out) {
		t.Fatalf("Decode = %q, %v", out, err)
	}
}

// TestErrorsShowTokensOnly checks that decoder errors quote at most a short
// hex token of their input, and config strings cut short.
func TestErrorsShowTokensOnly(t *testing.T) {
	secret := strings.Repeat("root:$6$secret:19000:0:99999:7:::\n", 10)
	e := NewEnv(16)
	d := mustNew(t, e, config.Decoder{Name: "errno"}, 0)
	_, err := d.Decode([]byte(secret))
	if want := "errno: bad number 0x726f6f743a243624... (340 bytes)"; err == nil || err.Error() != want {
		t.Errorf("error = %v, want %q", err, want)
	}
	for _, name := range []string{"syscall", "errno", "cgroup"} {
		chain, err := e.NewChain([]config.Decoder{{Name: "hex"}, {Name: name}}, 1, nil)
		if err != nil {
			if name == "cgroup" {
				continue // no cgroup2 mount here
			}
			t.Fatal(err)
		}
		_, err = chain[1].Decode([]byte(secret))
		if err == nil || strings.Contains(err.Error(), "secret") || len(err.Error()) > 80 {
			t.Errorf("%s error = %v", name, err)
		}
	}
	// Config strings are quoted up to 24 bytes.
	long := strings.Repeat("x", 24) + secret
	_, err = e.New(config.Decoder{Name: long}, 4, nil)
	if err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("unknown decoder error = %v", err)
	}
	_, err = e.New(config.Decoder{Name: "regexp", Regexps: []string{"(" + long}}, 0, nil)
	if err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("regexp error = %v", err)
	}
	if got := Token(nil); got != "0x (empty)" {
		t.Errorf("Token(nil) = %q", got)
	}
}

// TestConfigBounds checks the limits on what a decoder takes from the
// config.
func TestConfigBounds(t *testing.T) {
	e := NewEnv(16)
	for _, size := range []int{-1, MaxSize + 1, 1 << 40} {
		if _, err := e.New(config.Decoder{Name: "hex"}, size, nil); !errors.Is(err, ErrSize) {
			t.Errorf("size %d: %v", size, err)
		}
	}
	many := make([]string, MaxRegexps+1)
	for i := range many {
		many[i] = "a"
	}
	newErr(t, e, config.Decoder{Name: "regexp", Regexps: many}, 0, "regexp: 257 patterns, more than the limit of 256")
	newErr(t, e, config.Decoder{Name: "regexp", Regexps: []string{"a", strings.Repeat("a", MaxRegexpLen+1)}}, 0,
		"regexp: pattern 1 is 1025 bytes long, more than the limit of 1024")
	if _, err := e.New(config.Decoder{Name: "regexp", Regexps: many[:MaxRegexps]}, 0, nil); err != nil {
		t.Errorf("%d patterns: %v", MaxRegexps, err)
	}
}

func errNotExist() error { return fs.ErrNotExist }
