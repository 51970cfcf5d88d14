// SPDX-License-Identifier: Apache-2.0

package allowlist

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kernel-exporter/kernel_exporter/bounded"
)

func sum(b string) string {
	s := sha256.Sum256([]byte(b))
	return hex.EncodeToString(s[:])
}

func TestParseAndCheck(t *testing.T) {
	a, b := sum("object a"), sum("object b")
	// sha256sum's output, a prefixed and upper-case digest, comments,
	// blank lines and a CRLF line.
	text := "# programs of the cluster\n" + a + "  a.bpf.o\n\nsha256:" + strings.ToUpper(b) + "\r\n  \t\n"
	l, err := Parse("test", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Digests(); len(got) != 2 || !(got[0] == a && got[1] == b || got[0] == b && got[1] == a) {
		t.Fatalf("Digests() = %v, want %s and %s", got, a, b)
	}
	for _, obj := range []string{"object a", "object b"} {
		if err := l.Check("/c/x.bpf.o", []byte(obj)); err != nil {
			t.Errorf("Check(%q) = %v, want nil", obj, err)
		}
	}
	err = l.Check("/c/x.bpf.o", []byte("object c"))
	want := "BPF object /c/x.bpf.o: sha256:" + sum("object c") + " is not an allowed digest (test): refused"
	if err == nil || err.Error() != want {
		t.Errorf("Check(object c) = %v, want %s", err, want)
	}
	var none *List
	if err := none.Check("x", []byte("anything")); err != nil || none.Digests() != nil || none.Source() != "" {
		t.Errorf("nil list: Check %v, Digests %v, Source %q; want nil, nil, \"\"", err, none.Digests(), none.Source())
	}
	empty, err := Parse("empty", []byte("# nothing allowed\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := empty.Check("x", nil); err == nil {
		t.Error("an empty list allowed an object")
	}
	back, err := FromDigests("args", l.Digests())
	if err != nil || len(back.Digests()) != 2 || back.Check("x", []byte("object a")) != nil {
		t.Errorf("FromDigests(Digests()) = %v, %v; want the same two digests", back.Digests(), err)
	}
}

func TestParseErrors(t *testing.T) {
	secret := "s3cr3t-password-of-64-bytes-that-is-not-hex-at-all-xxxxxxxxxxxxx"
	if len(secret) != 64 {
		t.Fatal(len(secret))
	}
	for _, tc := range []struct{ text, want string }{
		{sum("a") + "\n" + "abc\n", "f: line 2: not a SHA-256 digest (want 64 hexadecimal digits, optionally after \"sha256:\"; got 3 bytes)"},
		{secret, "f: line 1: not a SHA-256 digest (want 64 hexadecimal digits)"},
		{"sha512:" + sum("a"), "f: line 1: not a SHA-256 digest (want 64 hexadecimal digits, optionally after \"sha256:\"; got 71 bytes)"},
		{strings.Repeat("0", 5000), "f: line 1: longer than 4096 bytes"},
	} {
		_, err := Parse("f", []byte(tc.text))
		if err == nil || err.Error() != tc.want {
			t.Errorf("Parse(%.20q) = %v, want %s", tc.text, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("error quotes the file: %v", err)
		}
	}
	var many strings.Builder
	for i := range MaxDigests + 1 {
		many.WriteString(sum(string(rune(i))) + "\n")
	}
	if _, err := Parse("f", []byte(many.String())); err == nil || err.Error() != "f: more than 1000 digests" {
		t.Errorf("%d digests: %v, want more than 1000 digests", MaxDigests+1, err)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "allowed")
	if err := os.WriteFile(path, []byte(sum("x")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Check("o", []byte("y")); err == nil || !strings.Contains(err.Error(), "(--config.allowed-digests-file "+path+")") {
		t.Errorf("Check = %v, want it to name the flag and file", err)
	}
	if _, err := Load(dir); !errors.Is(err, bounded.ErrNotRegular) {
		t.Errorf("Load(a directory) = %v, want ErrNotRegular", err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, MaxFile+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(big); !errors.Is(err, bounded.ErrTooLarge) {
		t.Errorf("Load(%d bytes) = %v, want ErrTooLarge", MaxFile+1, err)
	}
	if _, err := Load(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "allowed digests file "+dir+"/missing") {
		t.Errorf("Load(missing) = %v, want an error naming the file", err)
	}
}

// FuzzParse checks that Parse never panics, never quotes the file in its
// errors, and that what it accepts round-trips through Digests.
func FuzzParse(f *testing.F) {
	f.Add([]byte(sum("a") + "  a.bpf.o\n# c\nsha256:" + sum("b") + "\n"))
	f.Add([]byte("sha256:zz\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := Parse("f", data)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error spans lines: %q", err)
			}
			return
		}
		back, err := FromDigests("f", l.Digests())
		if err != nil || len(back.Digests()) != len(l.Digests()) {
			t.Fatalf("round trip: %v, %d digests, want %d", err, len(back.Digests()), len(l.Digests()))
		}
	})
}
