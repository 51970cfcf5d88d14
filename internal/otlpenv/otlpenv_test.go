// SPDX-License-Identifier: Apache-2.0

package otlpenv

import "testing"

func TestProtocol(t *testing.T) {
	for _, tc := range []struct {
		signal, own, all string
		want, err        string
	}{
		{"METRICS", "", "", "http/protobuf", ""},
		{"METRICS", "", "grpc", "grpc", ""},
		{"METRICS", "grpc", "http/protobuf", "grpc", ""},
		{"TRACES", "http/protobuf", "grpc", "http/protobuf", ""},
		{"METRICS", "http/json", "", "", `OTEL_EXPORTER_OTLP_METRICS_PROTOCOL="http/json": unsupported OTLP protocol (want grpc or http/protobuf)`},
		{"TRACES", "", "udp", "", `OTEL_EXPORTER_OTLP_PROTOCOL="udp": unsupported OTLP protocol (want grpc or http/protobuf)`},
	} {
		t.Setenv("OTEL_EXPORTER_OTLP_"+tc.signal+"_PROTOCOL", tc.own)
		t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", tc.all)
		got, err := Protocol(tc.signal)
		if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && err.Error() != tc.err) {
			t.Errorf("Protocol(%s) with %q, %q = %q, %v; want %q, %q", tc.signal, tc.own, tc.all, got, err, tc.want, tc.err)
		}
	}
}

// A device named by the signal's own variable or the shared one is refused
// before the SDK reads it; unset variables are no error.
func TestCheckTLSFiles(t *testing.T) {
	if err := CheckTLSFiles("TRACES"); err != nil {
		t.Fatalf("no variables: %v", err)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY", "/dev/zero")
	if err := CheckTLSFiles("METRICS"); err != nil {
		t.Errorf("METRICS with only a TRACES variable: %v", err)
	}
	err := CheckTLSFiles("TRACES")
	if err == nil || err.Error() != "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY /dev/zero: not a regular file (a character device)" {
		t.Errorf("TRACES: %v", err)
	}
}

func TestEndpoint(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	if n, v := Endpoint("TRACES"); n != "" || v != "" {
		t.Errorf("none set: %q=%q, want none", n, v)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://all:4318")
	if n, v := Endpoint("TRACES"); n != "OTEL_EXPORTER_OTLP_ENDPOINT" || v != "http://all:4318" {
		t.Errorf("general set: %q=%q", n, v)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://traces:4318/v1/traces")
	if n, v := Endpoint("TRACES"); n != "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" || v != "http://traces:4318/v1/traces" {
		t.Errorf("signal's set: %q=%q, want it over the general one", n, v)
	}
	if n, _ := Endpoint("METRICS"); n != "OTEL_EXPORTER_OTLP_ENDPOINT" {
		t.Errorf("another signal: %q, want the general variable", n)
	}
}
