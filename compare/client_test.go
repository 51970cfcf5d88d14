// SPDX-License-Identifier: Apache-2.0

package compare

import (
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
