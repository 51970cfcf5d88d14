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
