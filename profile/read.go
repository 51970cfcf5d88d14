// SPDX-License-Identifier: Apache-2.0

package profile

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"

	pprof "github.com/google/pprof/profile"

	"github.com/kernel-exporter/kernel_exporter/bounded"
)

// MaxProfileFile bounds a profile file ReadFile reads.
const MaxProfileFile = 256 << 20

// ReadFile reads a profile written by WritePprof or another pprof
// producer (gzipped or not), or folded stacks (WriteFolded, the FlameGraph
// scripts' input), taken as a profile of kind k. The file must be a regular
// file of at most MaxProfileFile bytes; errors name it and never quote its
// content.
func ReadFile(path string, k Kind) (*Profile, error) {
	data, err := bounded.ReadFile(path, "profile", MaxProfileFile)
	if err != nil {
		return nil, err
	}
	p, err := Parse(data, k)
	if err != nil {
		return nil, fmt.Errorf("profile %s: %w", path, err)
	}
	return p, nil
}

// Parse reads a profile from data, as ReadFile does; gzipped data may
// hold at most MaxProfileFile bytes uncompressed.
func Parse(data []byte, k Kind) (*Profile, error) { return ParseLimit(data, k, MaxProfileFile) }

// ParseLimit reads a profile from data, as ReadFile does; gzipped data may
// hold at most max bytes uncompressed (a gzip bomb is an error, not a
// gigabyte of memory).
func ParseLimit(data []byte, k Kind, max int) (*Profile, error) {
	if bytes.HasPrefix(data, []byte{0x1f, 0x8b}) {
		raw, err := gunzip(data, max)
		if err != nil {
			return nil, err
		}
		pp, err := pprof.ParseUncompressed(raw)
		if err != nil {
			return nil, fmt.Errorf("gzipped, but not a pprof profile: %w", err)
		}
		return FromPprof(pp)
	}
	if p, err := ParseFolded(bytes.NewReader(data), k); err == nil {
		return p, nil
	} else if looksFolded(data) {
		return nil, err
	}
	pp, err := pprof.ParseData(data)
	if err != nil {
		return nil, fmt.Errorf("neither a pprof profile nor folded stacks")
	}
	return FromPprof(pp)
}

// looksFolded reports whether data starts as text (so that a failure to
// parse it as folded stacks is the error to report).
func looksFolded(data []byte) bool {
	head := data[:min(len(data), 512)]
	for _, c := range head {
		if c < 0x20 && c != '\n' && c != '\r' && c != '\t' {
			return false
		}
	}
	return len(head) > 0
}

// gunzip returns data uncompressed, or an error if that is more than max
// bytes or not gzip.
func gunzip(data []byte, max int) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("gzipped, but not a pprof profile: %w", err)
	}
	raw, err := io.ReadAll(io.LimitReader(zr, int64(max)+1))
	if err != nil {
		return nil, fmt.Errorf("gzipped, but not a pprof profile: %w", err)
	}
	if len(raw) > max {
		return nil, fmt.Errorf("more than %d bytes uncompressed", max)
	}
	return raw, nil
}
