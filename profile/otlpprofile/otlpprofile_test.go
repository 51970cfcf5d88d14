// SPDX-License-Identifier: Apache-2.0

package otlpprofile

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"go.opentelemetry.io/collector/pdata/pcommon"
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
func folded(ps pprofile.Profiles) map[string]int64 {
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

// decode reads an encoded request with the Collector's own pdata, of the
// version the tests' Collector is built from.
func decode(t *testing.T, b []byte) pprofile.Profiles {
	t.Helper()
	req := pprofileotlp.NewExportRequest()
	if err := req.UnmarshalProto(b); err != nil {
		t.Fatalf("pdata cannot read the request: %v", err)
	}
	return req.Profiles()
}

// TestEncodeRoundTrip encodes, decodes with pdata, and finds every
// sample's stack, process and value again, with the zero entry at index 0
// of each table, the sample and period types, the time, and the resource
// and scope.
func TestEncodeRoundTrip(t *testing.T) {
	ps := decode(t, Encode(synthetic(), "1.2.3"))
	got := folded(ps)
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
	attrs := ps.ResourceProfiles().At(0).Resource().Attributes()
	if v, _ := attrs.Get("service.version"); v.Str() != "1.2.3" {
		t.Errorf("service.version %q", v.Str())
	}
	if v, _ := attrs.Get("service.name"); v.Str() != "kernel_exporter" {
		t.Errorf("service.name %q", v.Str())
	}
	if h, _ := os.Hostname(); h != "" {
		if v, _ := attrs.Get("host.name"); v.Str() != h {
			t.Errorf("host.name %q, want %q", v.Str(), h)
		}
	}
	if sc := ps.ResourceProfiles().At(0).ScopeProfiles().At(0).Scope(); sc.Name() != ScopeName || sc.Version() != "1.2.3" {
		t.Errorf("scope %q %q", sc.Name(), sc.Version())
	}
	if pr.Samples().Len() != 3 || ps.ProfileCount() != 1 {
		t.Errorf("%d samples, %d profiles", pr.Samples().Len(), ps.ProfileCount())
	}
	// The same attribute (process.pid 42, thread.name burn) is one entry:
	// 2 pids + 2 comms + 1 zero.
	if n := d.AttributeTable().Len(); n != 5 {
		t.Errorf("%d attributes, want 5", n)
	}
}

// TestEncodeOffCPU: an off-CPU profile has sample type off_cpu/nanoseconds,
// no period; pid 0 and an empty comm are still written (the attribute's
// value is a oneof: zero is not absence), and an empty stack is stack 0's.
func TestEncodeOffCPU(t *testing.T) {
	p := &profile.Profile{Kind: profile.OffCPU, Start: time.Unix(1700000000, 5), Duration: time.Second,
		Samples: []profile.Sample{{PID: 0, Comm: "", Value: 1 << 40, Count: 3}}}
	ps := decode(t, Encode(p, ""))
	d := ps.Dictionary()
	str := d.StringTable().At
	pr := ps.ResourceProfiles().At(0).ScopeProfiles().At(0).Profiles().At(0)
	if st := pr.SampleType(); str(int(st.TypeStrindex())) != "off_cpu" || str(int(st.UnitStrindex())) != "nanoseconds" || pr.Period() != 0 {
		t.Errorf("sample type %s/%s, period %d", str(int(st.TypeStrindex())), str(int(st.UnitStrindex())), pr.Period())
	}
	if pr.Time().AsTime().UnixNano() != 1700000000_000000005 {
		t.Errorf("time %v", pr.Time())
	}
	s := pr.Samples().At(0)
	if s.StackIndex() != 0 || s.Values().Len() != 1 || s.Values().At(0) != 1<<40 || s.AttributeIndices().Len() != 2 {
		t.Fatalf("sample: stack %d, values %v, %d attributes", s.StackIndex(), s.Values().AsRaw(), s.AttributeIndices().Len())
	}
	for j := 0; j < 2; j++ {
		a := d.AttributeTable().At(int(s.AttributeIndices().At(j)))
		switch k, v := str(int(a.KeyStrindex())), a.Value(); k {
		case "process.pid":
			if v.Type() != pcommon.ValueTypeInt || v.Int() != 0 {
				t.Errorf("process.pid: %s %v", v.Type(), v.AsRaw())
			}
		case "thread.name":
			if v.Type() != pcommon.ValueTypeStr || v.Str() != "" {
				t.Errorf("thread.name: %s %v", v.Type(), v.AsRaw())
			}
		default:
			t.Errorf("attribute %q", k)
		}
	}
	if _, ok := ps.ResourceProfiles().At(0).Resource().Attributes().Get("service.version"); ok {
		t.Error("service.version set for an empty version")
	}
}

// TestParseResponse reads partial successes, skips unknown fields, and
// refuses truncated messages.
func TestParseResponse(t *testing.T) {
	er := pprofileotlp.NewExportResponse()
	er.PartialSuccess().SetRejectedProfiles(3)
	er.PartialSuccess().SetErrorMessage("too old")
	b, err := er.MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	unknown := []byte{0x18, 0x05, 0x22, 0x01, 'x', 0x2d, 1, 2, 3, 4} // fields 3 varint, 4 bytes, 5 fixed32
	for _, c := range []struct {
		name string
		in   []byte
		want partialSuccess
		err  bool
	}{
		{"empty", nil, partialSuccess{}, false},
		{"partial", b, partialSuccess{3, "too old"}, false},
		{"unknown fields", append(append([]byte{}, unknown...), b...), partialSuccess{3, "too old"}, false},
		{"truncated", b[:len(b)-2], partialSuccess{}, true},
		{"bad tag", []byte{0x00}, partialSuccess{}, true},
	} {
		got, err := parseResponse(c.in)
		if (err != nil) != c.err || (!c.err && got != c.want) {
			t.Errorf("%s: %+v, %v; want %+v, error %v", c.name, got, err, c.want, c.err)
		}
	}
}

// FuzzParseResponse: any response body gives a result or an error, never
// a panic, and agrees with pdata on what it accepts.
func FuzzParseResponse(f *testing.F) {
	er := pprofileotlp.NewExportResponse()
	er.PartialSuccess().SetRejectedProfiles(7)
	er.PartialSuccess().SetErrorMessage("rejected")
	b, _ := er.MarshalProto()
	f.Add(b)
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0x02, 0x08, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		ps, err := parseResponse(b)
		if err != nil {
			return
		}
		er := pprofileotlp.NewExportResponse()
		if er.UnmarshalProto(b) != nil {
			return
		}
		if er.PartialSuccess().RejectedProfiles() != ps.rejected {
			t.Errorf("rejected %d, pdata %d", ps.rejected, er.PartialSuccess().RejectedProfiles())
		}
	})
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
		got = folded(req.Profiles())
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

// grpcServer is a profiles service answering with a partial success of
// rejected profiles.
type grpcServer struct {
	pprofileotlp.UnimplementedGRPCServer
	got      map[string]int64
	auth     []string
	rejected int64
}

func (g *grpcServer) Export(ctx context.Context, req pprofileotlp.ExportRequest) (pprofileotlp.ExportResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	g.auth = md.Get("authorization")
	g.got = folded(req.Profiles())
	resp := pprofileotlp.NewExportResponse()
	if g.rejected > 0 {
		resp.PartialSuccess().SetRejectedProfiles(g.rejected)
		resp.PartialSuccess().SetErrorMessage("no room")
	}
	return resp, nil
}

// TestSendGRPC sends to pdata's gRPC profiles service: the request arrives
// whole with the headers as metadata, and a partial success is an error
// counting the rejected profiles.
func TestSendGRPC(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	g := &grpcServer{}
	pprofileotlp.RegisterGRPCServer(srv, g)
	go srv.Serve(l)
	defer srv.Stop()
	t.Setenv("OTEL_EXPORTER_OTLP_PROFILES_PROTOCOL", "grpc")
	t.Setenv("OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT", "http://"+l.Addr().String())
	t.Setenv("OTEL_EXPORTER_OTLP_PROFILES_HEADERS", "Authorization=Bearer%20y")
	s, err := NewSender("")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Send(ctx, synthetic()); err != nil {
		t.Fatal(err)
	}
	if g.got["burn/42;main@/usr/bin/burn;burn_b@/usr/bin/burn"] != 300 || len(g.got) != 3 {
		t.Errorf("received %v", g.got)
	}
	if len(g.auth) != 1 || g.auth[0] != "Bearer y" {
		t.Errorf("authorization metadata %q", g.auth)
	}
	g.rejected = 1
	if err := s.Send(ctx, synthetic()); err == nil || !strings.Contains(err.Error(), "1 profiles rejected: no room") {
		t.Errorf("partial success: error %v", err)
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
