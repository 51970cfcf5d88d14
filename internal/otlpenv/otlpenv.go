// SPDX-License-Identifier: Apache-2.0

// Package otlpenv reads the standard OpenTelemetry exporter variables that
// both OTLP senders of this exporter share, per signal: spans (package
// spans, signal "TRACES") and pushed metrics (package exposition/otlp,
// signal "METRICS"). The OTLP exporters of the OpenTelemetry Go SDK read
// the rest themselves (ENDPOINT, HEADERS, INSECURE, TIMEOUT, ...).
package otlpenv

import (
	"fmt"
	"os"

	"github.com/kernel-exporter/kernel_exporter/bounded"
)

// MaxTLSFile bounds the certificate and key files of
// OTEL_EXPORTER_OTLP_[<SIGNAL>_]CERTIFICATE, _CLIENT_CERTIFICATE and
// _CLIENT_KEY, which the SDK's exporters read whole.
const MaxTLSFile = bounded.MaxConfig

// The OTLP protocols supported (the specification's names).
const (
	GRPC         = "grpc"
	HTTPProtobuf = "http/protobuf"
)

// Protocol returns the OTLP protocol of signal: the value of
// OTEL_EXPORTER_OTLP_<signal>_PROTOCOL, else of OTEL_EXPORTER_OTLP_PROTOCOL,
// else http/protobuf (the specification's default). Any value but grpc and
// http/protobuf is an error naming the variable and its value (cut to 64
// bytes).
func Protocol(signal string) (string, error) {
	for _, name := range []string{"OTEL_EXPORTER_OTLP_" + signal + "_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		v := os.Getenv(name)
		switch v {
		case "":
			continue
		case GRPC, HTTPProtobuf:
			return v, nil
		}
		if len(v) > 64 {
			v = v[:64] + "..."
		}
		return "", fmt.Errorf("%s=%q: unsupported OTLP protocol (want grpc or http/protobuf)", name, v)
	}
	return HTTPProtobuf, nil
}

// Endpoint returns the variable that sets signal's OTLP endpoint and its
// value: OTEL_EXPORTER_OTLP_<signal>_ENDPOINT, else
// OTEL_EXPORTER_OTLP_ENDPOINT. Both are "" when neither is set, and the
// SDK's exporters then send to their default, localhost.
func Endpoint(signal string) (name, value string) {
	for _, n := range []string{"OTEL_EXPORTER_OTLP_" + signal + "_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
		if v := os.Getenv(n); v != "" {
			return n, v
		}
	}
	return "", ""
}

// CheckTLSFiles checks the certificate and key files that signal's
// exporter will read, before it reads them: each must be a regular file
// (not a FIFO or device) of at most MaxTLSFile bytes. The error
// (bounded.CheckEnvFiles) names the variable and the path, never the
// content.
func CheckTLSFiles(signal string) error {
	var vars []string
	for _, v := range []string{"CERTIFICATE", "CLIENT_CERTIFICATE", "CLIENT_KEY"} {
		vars = append(vars, "OTEL_EXPORTER_OTLP_"+signal+"_"+v, "OTEL_EXPORTER_OTLP_"+v)
	}
	return bounded.CheckEnvFiles(MaxTLSFile, vars...)
}
