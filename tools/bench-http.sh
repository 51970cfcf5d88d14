#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tools/bench-http.sh: whole scrapes over HTTP of a 10k-1M key BPF map, in
# the text format, gzip-compressed and as protobuf, by kernel_exporter and,
# optionally, by the reference exporter (BenchmarkHTTPScrape in
# integration/bench_http_test.go); prints a markdown table. Run as root.
#
#   tools/bench-http.sh                      ours only
#   REF_EXPORTER=/path/ebpf_exporter tools/bench-http.sh
#   REF_BUILD=1 tools/bench-http.sh          build the reference first
#
# Environment:
#   KEYS          map sizes, comma-separated (10000,100000,1000000)
#   SCRAPES       timed scrapes per format (go test -benchtime Nx; 5)
#   COUNT         runs of the whole benchmark (go test -count; 1): the table
#                 gives the median of the runs' medians, the lowest minimum,
#                 the highest VmHWM
#   REF_EXPORTER  the reference binary; unset: ours only
#   REF_BUILD     1: build the reference with REF_BUILD_SCRIPT into REF_DIR
#                 and use REF_DIR/ebpf_exporter (the build stays out of the
#                 repository)
#   REF_BUILD_SCRIPT  (/work/shared/tools/reference/build.sh) REF_DIR (/tmp/ref)
#   OUT           raw go test output (/tmp/bench-http.txt)
#   RAW           a raw output file of an earlier run: print its table only
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
KEYS=${KEYS:-10000,100000,1000000}
SCRAPES=${SCRAPES:-5}
COUNT=${COUNT:-1}
OUT=${OUT:-/tmp/bench-http.txt}
GO=${GO:-go}

if [ -n "${RAW:-}" ]; then
	OUT=$RAW
elif [ "${REF_BUILD:-}" = 1 ]; then
	dir=${REF_DIR:-/tmp/ref}
	bash "${REF_BUILD_SCRIPT:-/work/shared/tools/reference/build.sh}" "$dir" >/dev/null
	REF_EXPORTER=$dir/ebpf_exporter
fi

if [ -z "${RAW:-}" ]; then
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	# Built as make build does (the shipped binary).
	(cd "$repo" && CGO_ENABLED=0 "$GO" build -trimpath -ldflags '-s -w' -o "$tmp/kernel_exporter" ./cmd/kernel_exporter)
	echo "bench-http: keys $KEYS, $SCRAPES scrapes per format, $COUNT run(s), reference: ${REF_EXPORTER:-none}; raw output in $OUT" >&2
	(cd "$repo" && KERNEL_EXPORTER_BINARY="$tmp/kernel_exporter" REF_EXPORTER="${REF_EXPORTER:-}" KE_BENCH_KEYS="$KEYS" \
		CGO_ENABLED=0 "$GO" test -run '^$' -bench '^BenchmarkHTTPScrape$' -benchtime "${SCRAPES}x" -count "$COUNT" \
		-timeout 120m ./integration/) | tee "$OUT" >&2
fi

# BenchmarkHTTPScrape/keys=N/EXPORTER/FORMAT-P  n  x ns/op  v unit ...
awk '
/^BenchmarkHTTPScrape\/keys=/ {
	split($1, p, "/"); sub(/^keys=/, "", p[2]); sub(/-[0-9]+$/, "", p[4])
	k = p[2] SUBSEP p[3] SUBSEP p[4]
	if (!(p[2] in seenKeys)) { seenKeys[p[2]] = 1; keyOrder[++nk] = p[2] }
	if (!(p[4] in seenFmt)) { seenFmt[p[4]] = 1; fmtOrder[++nf] = p[4] }
	if (p[3] == "ref") haveRef = 1
	for (i = 5; i < NF; i += 2) {
		v = $i; u = $(i + 1)
		if (u == "ms-median") med[k, ++nmed[k]] = v
		if (u == "ms-min" && (!(k in lo) || v < lo[k])) lo[k] = v
		if (u == "VmHWM-MiB" && (!(k in hwm) || v > hwm[k])) hwm[k] = v
		if (u == "body-B") body[k] = v
	}
}
function median(k,   n, i, j, t, a) {
	n = nmed[k]; if (n == 0) return "-"
	for (i = 1; i <= n; i++) a[i] = med[k, i] + 0
	for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
	return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function num(v) { return (v < 100) ? sprintf("%.1f", v) : sprintf("%.0f", v) }
function cell(k) { return (k in lo) ? num(median(k)) " (" num(lo[k]) ")" : "-" }
function mb(k) { return (k in hwm) ? sprintf("%.0f", hwm[k]) : "-" }
function kb(k) { return (k in body) ? sprintf("%.0f", body[k] / 1024) : "-" }
END {
	if (haveRef) {
		print "| keys | format | ours: ms median (min) | reference: ms median (min) | ours: body KiB | reference: body KiB | ours: VmHWM MiB | reference: VmHWM MiB |"
		print "|---:|---|---:|---:|---:|---:|---:|---:|"
	} else {
		print "| keys | format | ours: ms median (min) | ours: body KiB | ours: VmHWM MiB |"
		print "|---:|---|---:|---:|---:|"
	}
	for (i = 1; i <= nk; i++) for (j = 1; j <= nf; j++) {
		o = keyOrder[i] SUBSEP "ours" SUBSEP fmtOrder[j]; r = keyOrder[i] SUBSEP "ref" SUBSEP fmtOrder[j]
		if (haveRef) printf "| %d | %s | %s | %s | %s | %s | %s | %s |\n", keyOrder[i], fmtOrder[j], cell(o), cell(r), kb(o), kb(r), mb(o), mb(r)
		else printf "| %d | %s | %s | %s | %s |\n", keyOrder[i], fmtOrder[j], cell(o), kb(o), mb(o)
	}
}' "$OUT"
