// SPDX-License-Identifier: Apache-2.0

package compare

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// fakeSeries is one series' increase over a side's window.
type fakeSeries struct {
	name   string // kernel_x_total or kernel_y_bucket
	labels map[string]string
	v      float64
}

// fakeProm answers compare's queries from fixed increases per side, the
// side named by its selector's matchers (as Selector.String gives them),
// as a Prometheus would (a RoundTripper: no sockets). Answers are cached,
// so that a benchmark measures the client's decoding and the ranking.
type fakeProm struct {
	sides map[string][]fakeSeries
	mu    sync.Mutex
	cache map[string][]byte
}

var (
	reCount    = regexp.MustCompile(`^count by \(([a-z_]+)\) \(last_over_time\(\{__name__=~"kernel_\.\+",?(.*)\}\[\d+s\]\)\)$`)
	reIncrease = regexp.MustCompile(`^increase\(([a-z0-9_]+)\{(.*)\}\[\d+s\]\)$`)
)

func (f *fakeProm) RoundTrip(r *http.Request) (*http.Response, error) {
	if err := r.ParseForm(); err != nil {
		return nil, err
	}
	q := r.Form.Get("query")
	f.mu.Lock()
	body, ok := f.cache[q]
	f.mu.Unlock()
	if !ok {
		body = f.answer(q)
		f.mu.Lock()
		if f.cache == nil {
			f.cache = map[string][]byte{}
		}
		f.cache[q] = body
		f.mu.Unlock()
	}
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)), Request: r}, nil
}

func (f *fakeProm) answer(q string) []byte {
	var b bytes.Buffer
	b.WriteString(`{"status":"success","data":{"resultType":"vector","result":[`)
	n := 0
	sample := func(labels map[string]string, v float64) {
		if n > 0 {
			b.WriteByte(',')
		}
		n++
		names := make([]string, 0, len(labels))
		for k := range labels {
			names = append(names, k)
		}
		sort.Strings(names)
		b.WriteString(`{"metric":{`)
		for i, k := range names {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%q:%q", k, labels[k])
		}
		fmt.Fprintf(&b, `},"value":[1735693200,"%s"]}`, strconv.FormatFloat(v, 'g', -1, 64))
	}
	if m := reCount.FindStringSubmatch(q); m != nil {
		counts := map[string]float64{}
		for _, s := range f.sides[m[2]] {
			key := s.name
			if m[1] != "__name__" {
				key = s.labels[m[1]]
			}
			counts[key]++
		}
		for k, c := range counts {
			sample(map[string]string{m[1]: k}, c)
		}
	} else if m := reIncrease.FindStringSubmatch(q); m != nil {
		for _, s := range f.sides[m[2]] {
			if s.name == m[1] {
				sample(s.labels, s.v)
			}
		}
	} else {
		return []byte(`{"status":"error","errorType":"bad_data","error":"fakeProm: unknown query ` + strings.ReplaceAll(q, `"`, `'`) + `"}`)
	}
	b.WriteString(`]}}`)
	return b.Bytes()
}
