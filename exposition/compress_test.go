// SPDX-License-Identifier: Apache-2.0

package exposition

import (
	"bytes"
	"io"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/prometheus/common/expfmt"
)

func TestChooseEncoding(t *testing.T) {
	for _, c := range []struct{ accept, want string }{
		{"", ""},
		{"identity", ""},
		{"gzip", "gzip"},
		{"x-gzip", "gzip"},
		{"GZIP;q=0.5", "gzip"},
		{"gzip, zstd", "zstd"},
		{"zstd;q=0.1, gzip;q=1", "zstd"},
		{"gzip;q=0, zstd;q=0", ""},
		{"zstd;q=0, gzip", "gzip"},
		{"zstd; q=0.0, gzip;q=0.8", "gzip"},
		{"gzip;q=0", ""},
		{"br, deflate", ""},
		{"*", ""},
		{"gzip;q=bogus", ""},
	} {
		if got := chooseEncoding(c.accept); got != c.want {
			t.Errorf("chooseEncoding(%q) = %q, want %q", c.accept, got, c.want)
		}
	}
}

func TestCompressRoundTrip(t *testing.T) {
	var plain bytes.Buffer
	if err := Write(&plain, expfmt.FmtText, nil, snapshots()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ accept, encoding string }{
		{"gzip, zstd", "zstd"},
		{"gzip", "gzip"},
		{"", ""},
	} {
		// Twice each, the second time with a pooled encoder.
		for range 2 {
			var body bytes.Buffer
			w, enc, closeFn := Compress(&body, c.accept)
			if enc != c.encoding {
				t.Fatalf("Compress(%q) encoding %q, want %q", c.accept, enc, c.encoding)
			}
			if err := Write(w, expfmt.FmtText, nil, snapshots()); err != nil {
				t.Fatal(err)
			}
			if err := closeFn(); err != nil {
				t.Fatalf("%s close: %v", enc, err)
			}
			if err := closeFn(); err != nil {
				t.Fatalf("%s second close: %v", enc, err)
			}
			got := decompress(t, enc, body.Bytes())
			if !bytes.Equal(got, plain.Bytes()) {
				t.Errorf("%q: %d bytes after a round trip, want the %d written", enc, len(got), plain.Len())
			}
			if enc != "" && body.Len() >= plain.Len() {
				t.Errorf("%s: compressed %d bytes to %d", enc, plain.Len(), body.Len())
			}
		}
	}
}

func decompress(t *testing.T, encoding string, b []byte) []byte {
	t.Helper()
	var r io.Reader = bytes.NewReader(b)
	switch encoding {
	case "gzip":
		g, err := gzip.NewReader(r)
		if err != nil {
			t.Fatal(err)
		}
		r = g
	case "zstd":
		z, err := zstd.NewReader(r)
		if err != nil {
			t.Fatal(err)
		}
		defer z.Close()
		r = z
	}
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("decompressing %s: %v", encoding, err)
	}
	return out
}
