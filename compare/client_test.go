// SPDX-License-Identifier: Apache-2.0

package compare

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// TestLimitBodySeries counts series keys however the body is cut into
// reads, and fails the read that passes the bound.
func TestLimitBodySeries(t *testing.T) {
	body := vectorOf(7)
	for _, max := range []int{7, 6} {
		for name, r := range map[string]io.Reader{"whole": strings.NewReader(body), "one byte": iotest.OneByteReader(strings.NewReader(body)), "halves": iotest.HalfReader(strings.NewReader(body))} {
			lb := &limitBody{rc: io.NopCloser(r), left: 1 << 20, max: 1 << 20, maxSeries: max}
			_, err := io.ReadAll(lb)
			if max == 7 && (err != nil || lb.series != 7) {
				t.Errorf("%s, bound 7: %d series, %v; want 7, nil", name, lb.series, err)
			}
			if max == 6 && !errors.Is(err, ErrTooManySeries) {
				t.Errorf("%s, bound 6: %v, want ErrTooManySeries", name, err)
			}
		}
	}
}

func vectorOf(n int) string {
	var b strings.Builder
	b.WriteString(`{"status":"success","data":{"resultType":"vector","result":[`)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"metric":{"instance":"h"},"value":[1,"1"]}`)
	}
	b.WriteString(`]}}`)
	return b.String()
}

// FuzzLimitBody checks that the series count of a body does not depend on
// how it is cut into reads, and that the byte bound holds.
func FuzzLimitBody(f *testing.F) {
	f.Add([]byte(vectorOf(3)), uint8(1), uint16(1000))
	f.Add([]byte(`"metric":{"metric":{"metric":{`), uint8(3), uint16(20))
	f.Fuzz(func(t *testing.T, body []byte, chunk uint8, max uint16) {
		if chunk == 0 {
			chunk = 1
		}
		want := bytes.Count(body, seriesKey)
		lb := &limitBody{rc: io.NopCloser(&chunkReader{body, int(chunk)}), left: int64(max), max: int64(max), maxSeries: 1 << 30}
		got, err := io.ReadAll(lb)
		if len(body) > int(max) {
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("%d bytes, bound %d: %v, want ErrTooLarge", len(body), max, err)
			}
			return
		}
		if err != nil || !bytes.Equal(got, body) || lb.series != want {
			t.Fatalf("chunks of %d: %d series, %v; want %d", chunk, lb.series, err, want)
		}
	})
}

// chunkReader reads at most n bytes at a time.
type chunkReader struct {
	b []byte
	n int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	k := min(len(p), c.n, len(c.b))
	copy(p, c.b[:k])
	c.b = c.b[k:]
	return k, nil
}
