#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# build.sh: builds an OpenTelemetry Collector for the tests (internal/otelcoltest)
# into .cache/otelcol/<version>/otelcol. A second run with the binary present
# does nothing.
#
# The collector is assembled by the collector's own builder
# (go.opentelemetry.io/collector/cmd/builder, "ocb"), installed with
# `go install` from the Go module proxy into .cache/otelcol/<version>/bin,
# from core modules only: the OTLP receiver (gRPC and HTTP) and the debug
# exporter, whose `verbosity: detailed` output is what the tests parse, and
# the env, file and yaml configuration providers (the builder's default list
# also has http and https ones, which the tests do not use). The providers are
# versioned v1.M.K alongside the core's v0.N.K: M = N - 94.
#
# Environment: OTELCOL_VERSION (default below, the core modules' v0.N.M),
# GO (default go), CACHE_DIR (default <repo>/.cache/otelcol), NICE (default
# 10: the build runs under nice -n $NICE). The first build takes about 2
# minutes of 2 idle cores; tools/heartbeat.sh prints progress while the
# builder is silent.
set -euo pipefail

OTELCOL_VERSION=${OTELCOL_VERSION:-v0.150.0}
GO=${GO:-go}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
CACHE_DIR=${CACHE_DIR:-$root/.cache/otelcol}
dir=$CACHE_DIR/$OTELCOL_VERSION
out=$dir/otelcol

if [ -x "$out" ]; then
	echo "otelcol $OTELCOL_VERSION: cached at $out"
	exit 0
fi

case $OTELCOL_VERSION in
v0.[0-9]*.[0-9]*)
	minor=${OTELCOL_VERSION#v0.}
	patch=${minor#*.}
	minor=${minor%%.*}
	;;
*)
	echo "build.sh: OTELCOL_VERSION=$OTELCOL_VERSION is not of the form v0.N.M" >&2
	exit 2
	;;
esac
providers_version=v1.$((minor - 94)).$patch

export CGO_ENABLED=0 GOWORK=off
# The builder runs `go` itself; make it the same one.
gobin=$(command -v "$GO")
export PATH="$(dirname "$gobin"):$PATH"

mkdir -p "$dir/bin"
start=$SECONDS
builder=$dir/bin/builder
if [ ! -x "$builder" ]; then
	echo "otelcol $OTELCOL_VERSION: installing the collector builder"
	GOBIN=$dir/bin "$here/../heartbeat.sh" nice -n "${NICE:-10}" "$GO" install "go.opentelemetry.io/collector/cmd/builder@$OTELCOL_VERSION"
fi

src=$dir/src
rm -rf "$src" "$out.tmp"
mkdir -p "$src"
cat >"$dir/builder.yaml" <<YAML
dist:
  name: otelcol
  description: kernel_exporter test collector (OTLP receiver, debug exporter)
  output_path: $src
receivers:
  - gomod: go.opentelemetry.io/collector/receiver/otlpreceiver $OTELCOL_VERSION
exporters:
  - gomod: go.opentelemetry.io/collector/exporter/debugexporter $OTELCOL_VERSION
providers:
  - gomod: go.opentelemetry.io/collector/confmap/provider/envprovider $providers_version
  - gomod: go.opentelemetry.io/collector/confmap/provider/fileprovider $providers_version
  - gomod: go.opentelemetry.io/collector/confmap/provider/yamlprovider $providers_version
YAML

echo "otelcol $OTELCOL_VERSION: building (about 2 minutes the first time)"
"$here/../heartbeat.sh" nice -n "${NICE:-10}" "$builder" --config "$dir/builder.yaml" --ldflags "-s -w"
mv "$src/otelcol" "$out"
rm -rf "$src"
echo "otelcol $OTELCOL_VERSION: built $out ($(du -h "$out" | cut -f1)) in $((SECONDS - start)) s"
