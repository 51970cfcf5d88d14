// SPDX-License-Identifier: Apache-2.0

package otlpprofile

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pprofile"
	"go.opentelemetry.io/collector/pdata/pprofile/pprofileotlp"

	"github.com/kernel-exporter/kernel_exporter/profile"
)

// synthetic is a CPU profile of process burn (pid 42): burn_a 700
// samples, burn_b 300, and a kernel stack of pid 43.
func synthetic() *profile.Profile {
	f := func(kernel bool, module, fn string) *profile.Frame {
		return &profile.Frame{Function: fn, Module: module, Kernel: kernel, Resolved: true}
	}
	main, ba, bb := f(false, "/usr/bin/burn", "main"), f(false, "/usr/bin/burn", "burn_a"), f(false, "/usr/bin/burn", "burn_b")
	sys, entry := f(true, "[kernel.kallsyms]", "__x64_sys_getpid"), f(true, "[kernel.kallsyms]", "entry_SYSCALL_64")
	return &profile.Profile{Kind: profile.CPU, Frequency: 99, Start: time.Unix(1700000000, 0), Duration: 10 * time.Second,
		Samples: []profile.Sample{
			{PID: 42, Comm: "burn", Stack: []*profile.Frame{ba, main}, Value: 700, Count: 700},
			{PID: 42, Comm: "burn", Stack: []*profile.Frame{bb, main}, Value: 300, Count: 300},
			{PID: 43, Comm: "other", Stack: []*profile.Frame{sys, entry, main}, Value: 10, Count: 10},
		}}
}

// folded walks the profiles' samples through the dictionary back to
// "comm/pid;outer;...;inner" -> value.
func folded(t *testing.T, ps pprofile.Profiles) map[string]int64 {
	t.Helper()
	d := ps.Dictionary()
	str := func(i int32) string { return d.StringTable().At(int(i)) }
	out := map[string]int64{}
	pr := ps.ResourceProfiles().At(0).ScopeProfiles().At(0).Profiles().At(0)
	for i := 0; i < pr.Samples().Len(); i++ {
		s := pr.Samples().At(i)
		var comm, pid string
		for j := 0; j < s.AttributeIndices().Len(); j++ {
			a := d.AttributeTable().At(int(s.AttributeIndices().At(j)))
			switch str(a.KeyStrindex()) {
			case "thread.name":
				comm = a.Value().AsString()
			case "process.pid":
				pid = a.Value().AsString()
			}
		}
		locs := d.StackTable().At(int(s.StackIndex())).LocationIndices()
		names := []string{comm + "/" + pid}
		for j := locs.Len() - 1; j >= 0; j-- {
			l := d.LocationTable().At(int(locs.At(j)))
			fn := d.FunctionTable().At(int(l.Lines().At(0).FunctionIndex()))
			m := d.MappingTable().At(int(l.MappingIndex()))
			names = append(names, str(fn.NameStrindex())+"@"+str(m.FilenameStrindex()))
		}
		out[strings.Join(names, ";")] += s.Values().At(0)
	}
	return out
}

// TestConvertRoundTrip converts, marshals to protobuf, unmarshals, and
// finds every sample's stack, process and value again, with the zero
// entry at index 0 of each table and the sample and period types.
func TestConvertRoundTrip(t *testing.T) {
	b, err := pprofileotlp.NewExportRequestFromProfiles(Convert(synthetic(), "1.2.3")).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	req := pprofileotlp.NewExportRequest()
	if err := req.UnmarshalProto(b); err != nil {
		t.Fatal(err)
	}
	ps := req.Profiles()
	got := folded(t, ps)
	want := map[string]int64{
		"burn/42;main@/usr/bin/burn;burn_a@/usr/bin/burn":                                                   700,
		"burn/42;main@/usr/bin/burn;burn_b@/usr/bin/burn":                                                   300,
		"other/43;main@/usr/bin/burn;entry_SYSCALL_64@[kernel.kallsyms];__x64_sys_getpid@[kernel.kallsyms]": 10,
	}
	if len(got) != len(want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %d, want %d (all: %v)", k, got[k], v, got)
		}
	}
	d := ps.Dictionary()
	if d.StringTable().At(0) != "" || d.FunctionTable().At(0).NameStrindex() != 0 || d.StackTable().At(0).LocationIndices().Len() != 0 ||
		d.LocationTable().At(0).Lines().Len() != 0 || d.MappingTable().At(0).FilenameStrindex() != 0 || d.AttributeTable().At(0).KeyStrindex() != 0 {
		t.Error("index 0 of a dictionary table is not the zero entry")
	}
	// 5 functions + 1 zero; 2 mappings + 1 zero.
	if n, m := d.FunctionTable().Len(), d.MappingTable().Len(); n != 6 || m != 3 {
		t.Errorf("%d functions and %d mappings, want 6 and 3 (each once, plus the zero entry)", n, m)
	}
	pr := ps.ResourceProfiles().At(0).ScopeProfiles().At(0).Profiles().At(0)
	str := d.StringTable().At
	if st, pt := pr.SampleType(), pr.PeriodType(); str(int(st.TypeStrindex())) != "samples" || str(int(st.UnitStrindex())) != "count" ||
		str(int(pt.TypeStrindex())) != "cpu" || str(int(pt.UnitStrindex())) != "nanoseconds" || pr.Period() != int64(time.Second)/99 {
		t.Errorf("sample type %s/%s, period type %s/%s every %d", str(int(st.TypeStrindex())), str(int(st.UnitStrindex())),
			str(int(pt.TypeStrindex())), str(int(pt.UnitStrindex())), pr.Period())
	}
	if pr.DurationNano() != uint64(10*time.Second) || pr.Time().AsTime().Unix() != 1700000000 {
		t.Errorf("time %v, duration %d ns", pr.Time(), pr.DurationNano())
	}
	if v, _ := ps.ResourceProfiles().At(0).Resource().Attributes().Get("service.version"); v.Str() != "1.2.3" {
		t.Errorf("service.version %q", v.Str())
	}
}

// TestSendHTTP sends to an OTLP/HTTP endpoint given by
// OTEL_EXPORTER_OTLP_ENDPOINT: the path gets /v1development/profiles, the
// body is the protobuf request, the headers of
// OTEL_EXPORTER_OTLP_PROFILES_HEADERS are set; an HTTP error is an error.
func TestSendHTTP(t *testing.T) {
	var got map[string]int64
	var path, ctype, auth string
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path, ctype, auth = r.URL.Path, r.Header.Get("Content-Type"), r.Header.Get("Authorization")
		b, _ := io.ReadAll(r.Body)
		req := pprofileotlp.NewExportRequest()
		if err := req.UnmarshalProto(b); err != nil {
			t.Errorf("unmarshal: %v", err)
		}
		got = folded(t, req.Profiles())
		w.WriteHeader(status)
	}))
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL+"/")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "")
	t.Setenv("OTEL_EXPORTER_OTLP_PROFILES_HEADERS", "Authorization=Bearer%20x")
	s, err := NewSender("")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Send(context.Background(), synthetic()); err != nil {
		t.Fatal(err)
	}
	if path != HTTPPath || ctype != "application/x-protobuf" || auth != "Bearer x" {
		t.Errorf("path %q, content type %q, authorization %q", path, ctype, auth)
	}
	if got["burn/42;main@/usr/bin/burn;burn_a@/usr/bin/burn"] != 700 {
		t.Errorf("received %v", got)
	}
	status = http.StatusBadRequest
	if err := s.Send(context.Background(), synthetic()); err == nil || !strings.Contains(err.Error(), "400") {
		t.Errorf("HTTP 400: error %v", err)
	}
}

// TestSenderErrors: bad variables are errors naming them.
func TestSenderErrors(t *testing.T) {
	for _, c := range []struct{ name, value, want string }{
		{"OTEL_EXPORTER_OTLP_PROTOCOL", "http/json", "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{"OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT", "ftp://x", "OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT"},
		{"OTEL_EXPORTER_OTLP_HEADERS", "novalue", "OTEL_EXPORTER_OTLP_HEADERS"},
		{"OTEL_EXPORTER_OTLP_CERTIFICATE", "/etc/ca.pem", "OTEL_EXPORTER_OTLP_CERTIFICATE"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(c.name, c.value)
			if _, err := NewSender(""); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s=%s: error %v, want one naming %s", c.name, c.value, err, c.want)
			}
		})
	}
}
