// SPDX-License-Identifier: Apache-2.0

// Package allowlist holds the SHA-256 digests of the BPF objects an
// exporter may load (--config.allowed-digests-file): a user program whose
// <name>.bpf.o hashes to a digest not listed is refused before it reaches
// the kernel. Bundled programs are part of the binary and are not checked:
// they are trusted as the binary is.
//
// The file holds one digest per line, as 64 hexadecimal digits, optionally
// led by "sha256:"; anything after the digest and a space or tab is
// ignored, so the output of sha256sum(1) is a valid file. Empty lines and
// lines starting with '#' are skipped. A file with no digest allows no user
// program.
package allowlist

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"

	"github.com/kernel-exporter/kernel_exporter/bounded"
)

// Bounds of the file.
const (
	// MaxFile bounds the file's size: about 1000 digests with a file
	// name each.
	MaxFile = 256 << 10 // 256 KiB
	// MaxDigests bounds the digests it lists.
	MaxDigests = 1000
)

// prefix may lead a digest.
const prefix = "sha256:"

// List is a set of allowed SHA-256 digests. A nil *List allows every
// object.
type List struct {
	// source names where the list came from in errors: the flag and its
	// file.
	source string
	sums   map[[sha256.Size]byte]bool
}

// Load reads the file at path (a regular file of at most MaxFile bytes)
// and parses it (Parse). Errors name the flag, the path and, for a bad
// line, its number, never the line's content.
func Load(path string) (*List, error) {
	data, err := bounded.ReadFile(path, "allowed digests file", MaxFile)
	if err != nil {
		return nil, fmt.Errorf("--config.allowed-digests-file: %w", err)
	}
	return Parse("--config.allowed-digests-file "+path, data)
}

// Parse parses the digests of data; source names it in errors (a flag and
// a path). Errors: a line whose first field is not 64 hexadecimal digits
// (after an optional "sha256:"), a line longer than 4096 bytes, or more
// than MaxDigests digests.
func Parse(source string, data []byte) (*List, error) {
	l := &List{source: source, sums: map[[sha256.Size]byte]bool{}}
	for i, line := range bytes.Split(data, []byte("\n")) {
		n := i + 1
		if len(line) > 4096 {
			return nil, fmt.Errorf("%s: line %d: longer than 4096 bytes", source, n)
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		field := line
		if j := bytes.IndexAny(line, " \t"); j >= 0 {
			field = line[:j]
		}
		field = bytes.TrimPrefix(field, []byte(prefix))
		var sum [sha256.Size]byte
		if len(field) != 2*sha256.Size {
			return nil, fmt.Errorf("%s: line %d: not a SHA-256 digest (want 64 hexadecimal digits, optionally after %q; got %d bytes)", source, n, prefix, len(field))
		}
		if _, err := hex.Decode(sum[:], field); err != nil {
			return nil, fmt.Errorf("%s: line %d: not a SHA-256 digest (want 64 hexadecimal digits)", source, n)
		}
		if !l.sums[sum] && len(l.sums) == MaxDigests {
			return nil, fmt.Errorf("%s: more than %d digests", source, MaxDigests)
		}
		l.sums[sum] = true
	}
	return l, nil
}

// FromDigests returns the list of digests, each exactly 64 hexadecimal
// digits (as Digests returns them); source names it in errors. Errors:
// one that is not a digest (by its index), more than MaxDigests.
func FromDigests(source string, digests []string) (*List, error) {
	l := &List{source: source, sums: map[[sha256.Size]byte]bool{}}
	for i, d := range digests {
		var sum [sha256.Size]byte
		if len(d) != 2*sha256.Size {
			return nil, fmt.Errorf("%s: digest %d: not a SHA-256 digest (want 64 hexadecimal digits; got %d bytes)", source, i+1, len(d))
		}
		if _, err := hex.Decode(sum[:], []byte(d)); err != nil {
			return nil, fmt.Errorf("%s: digest %d: not a SHA-256 digest (want 64 hexadecimal digits)", source, i+1)
		}
		if !l.sums[sum] && len(l.sums) == MaxDigests {
			return nil, fmt.Errorf("%s: more than %d digests", source, MaxDigests)
		}
		l.sums[sum] = true
	}
	return l, nil
}

// Digests returns the listed digests in hexadecimal, sorted; nil for a nil
// list.
func (l *List) Digests() []string {
	if l == nil {
		return nil
	}
	out := make([]string, 0, len(l.sums))
	for s := range l.sums {
		out = append(out, hex.EncodeToString(s[:]))
	}
	slices.Sort(out)
	return out
}

// Source names where the list came from ("" for a nil list).
func (l *List) Source() string {
	if l == nil {
		return ""
	}
	return l.source
}

// Check returns nil when the SHA-256 of data, the bytes of the BPF object
// at path, is listed (or l is nil), and otherwise an error naming the
// path, the digest and the list's source.
func (l *List) Check(path string, data []byte) error {
	if l == nil {
		return nil
	}
	sum := sha256.Sum256(data)
	if l.sums[sum] {
		return nil
	}
	return fmt.Errorf("BPF object %s: sha256:%x is not an allowed digest (%s): refused", path, sum, l.source)
}
