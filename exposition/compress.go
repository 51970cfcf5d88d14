// SPDX-License-Identifier: Apache-2.0

package exposition

import (
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// Encoders are pooled: a scrape takes one, resets it onto the response and
// puts it back when the close func has flushed it, reset onto nothing, so
// that the pool holds no response (nor what the response holds).
var (
	gzipPool = sync.Pool{New: func() any {
		w, err := gzip.NewWriterLevel(nil, gzip.BestSpeed)
		if err != nil {
			panic("exposition: gzip.NewWriterLevel(BestSpeed): " + err.Error())
		}
		return w
	}}
	zstdPool = sync.Pool{New: func() any {
		// Concurrency 1 encodes synchronously, in the caller's goroutine.
		w, err := zstd.NewWriter(nil,
			zstd.WithEncoderLevel(zstd.SpeedFastest),
			zstd.WithEncoderConcurrency(1))
		if err != nil {
			panic("exposition: zstd.NewWriter: " + err.Error())
		}
		return w
	}}
)

// Compress returns the writer to write a response body to, given w and
// the request's Accept-Encoding header: a zstd encoder when zstd is
// accepted, else a gzip one (fastest level) when gzip is, else w itself.
// It also returns the Content-Encoding to set ("zstd", "gzip", or "" for
// identity), and a func that must be called once after the body is
// written: it ends the compressed stream, flushing it to w, returns the
// encoder to its pool and reports the error of that last write.
func Compress(w io.Writer, acceptEncoding string) (io.Writer, string, func() error) {
	switch chooseEncoding(acceptEncoding) {
	case "zstd":
		z := zstdPool.Get().(*zstd.Encoder)
		z.Reset(w)
		return z, "zstd", onceClose(func() error {
			err := z.Close()
			z.Reset(nil) // keep no reference to the response in the pool
			zstdPool.Put(z)
			return err
		})
	case "gzip":
		g := gzipPool.Get().(*gzip.Writer)
		g.Reset(w)
		return g, "gzip", onceClose(func() error {
			err := g.Close()
			g.Reset(io.Discard) // keep no reference to the response in the pool
			gzipPool.Put(g)
			return err
		})
	}
	return w, "", func() error { return nil }
}

// onceClose makes close safe to call twice: the second call returns nil
// and no longer touches the pooled encoder.
func onceClose(close func() error) func() error {
	done := false
	return func() error {
		if done {
			return nil
		}
		done = true
		return close()
	}
}

// chooseEncoding returns "zstd" when acceptEncoding offers zstd with a
// non-zero quality, else "gzip" when it so offers gzip, else "". Other
// codings, and "*", are ignored: identity is always the fallback.
func chooseEncoding(acceptEncoding string) string {
	gz := false
	for part := range strings.SplitSeq(acceptEncoding, ",") {
		coding, params, _ := strings.Cut(part, ";")
		coding = strings.ToLower(strings.TrimSpace(coding))
		if coding != "zstd" && coding != "gzip" && coding != "x-gzip" {
			continue
		}
		if !acceptable(params) {
			continue
		}
		if coding == "zstd" {
			return "zstd"
		}
		gz = true
	}
	if gz {
		return "gzip"
	}
	return ""
}

// acceptable reports whether the parameters of a coding leave it
// acceptable: they have no q, or a q that parses to more than zero.
func acceptable(params string) bool {
	for p := range strings.SplitSeq(params, ";") {
		k, v, _ := strings.Cut(p, "=")
		if strings.ToLower(strings.TrimSpace(k)) != "q" {
			continue
		}
		q, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		return err == nil && q > 0
	}
	return true
}
