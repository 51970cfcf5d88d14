#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tools/bench-memory.sh: peak memory of a 100k and a 1M-key BPF map, ours
# and optionally the reference exporter's, side by side
# (BenchmarkMemory in integration/bench_memory_test.go); prints a markdown
# table with the ratios. Run as root; make bench-memory runs it.
#
#   tools/bench-memory.sh                          ours only
#   REF_EXPORTER=/path/ebpf_exporter tools/bench-memory.sh
#   REF_BUILD=1 tools/bench-memory.sh              build the reference first
#
# Environment:
#   KEYS          map sizes, comma-separated (100000,1000000)
#   SCRAPES       scrapes after the first, cold one (3)
#   COUNT         runs (go test -count; 1): one table line per run
#   REF_EXPORTER  the reference binary; unset: ours only
#   REF_BUILD     1: build the reference with REF_BUILD_SCRIPT into REF_DIR
#   REF_BUILD_SCRIPT  (/work/shared/tools/reference/build.sh) REF_DIR (/tmp/ref)
#   BINARY        our binary (default: built here as make build does)
#   OUT           raw go test output (/tmp/bench-memory.txt)
#   RAW           a raw output file of an earlier run: print its table only
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
KEYS=${KEYS:-100000,1000000}
SCRAPES=${SCRAPES:-3}
COUNT=${COUNT:-1}
OUT=${OUT:-/tmp/bench-memory.txt}
GO=${GO:-go}

if [ -n "${RAW:-}" ]; then
	OUT=$RAW
else
	if [ "${REF_BUILD:-}" = 1 ]; then
		dir=${REF_DIR:-/tmp/ref}
		bash "${REF_BUILD_SCRIPT:-/work/shared/tools/reference/build.sh}" "$dir" >/dev/null
		REF_EXPORTER=$dir/ebpf_exporter
	fi
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	bin=${BINARY:-}
	if [ -z "$bin" ]; then
		bin=$tmp/kernel_exporter
		(cd "$repo" && CGO_ENABLED=0 "$GO" build -trimpath -ldflags '-s -w' -o "$bin" ./cmd/kernel_exporter)
	fi
	echo "bench-memory: keys $KEYS, 1+$SCRAPES scrapes, $COUNT run(s), reference: ${REF_EXPORTER:-none}; raw output in $OUT" >&2
	(cd "$repo" && KERNEL_EXPORTER_BINARY="$bin" REF_EXPORTER="${REF_EXPORTER:-}" KE_BENCH_KEYS="$KEYS" KE_BENCH_SCRAPES="$SCRAPES" \
		CGO_ENABLED=0 "$GO" test -run '^$' -bench '^BenchmarkMemory$' -benchtime 1x -count "$COUNT" \
		-timeout 180m ./integration/) | tee "$OUT" >&2
fi

# BenchmarkMemory/keys=N/EXPORTER-P  1  x ns/op  v unit ...: with -count,
# Go runs every line COUNT times in a row; run i of ours goes beside run i
# of the reference.
awk '
/^BenchmarkMemory\/keys=/ {
	split($1, p, "/"); sub(/^keys=/, "", p[2]); sub(/-[0-9]+$/, "", p[3])
	if (!(p[2] in seen)) { seen[p[2]] = 1; order[++nk] = p[2] }
	k = p[2] SUBSEP p[3]; i = ++runs[k]
	for (j = 5; j < NF; j += 2) v[k, i, $(j + 1)] = $j
	if (p[3] == "ref") haveRef = 1
}
function cols(k, i) {
	return sprintf("%.0f | %.0f | %.0f | %.0f | %.0f | %.0f", v[k, i, "VmHWM-MiB"], v[k, i, "heap-peak-MiB"], v[k, i, "first-ms"], v[k, i, "later-ms"], v[k, i, "first-cpu-ms"], v[k, i, "later-cpu-ms"])
}
END {
	h = "VmHWM MiB | heap peak MiB | first scrape ms | later ms | first CPU ms | later CPU ms"
	if (haveRef) {
		ho = h; gsub(/\| /, "| ours: ", ho); hr = h; gsub(/\| /, "| ref: ", hr)
		print "| keys | ours: " ho " | ref: " hr " | VmHWM ours/ref | first/later CPU ours |"
		print "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
	} else {
		print "| keys | " h " | first/later CPU |"
		print "|---:|---:|---:|---:|---:|---:|---:|---:|"
	}
	for (a = 1; a <= nk; a++) {
		o = order[a] SUBSEP "ours"; r = order[a] SUBSEP "ref"
		for (i = 1; i <= runs[o]; i++) {
			ratio = v[o, i, "later-cpu-ms"] > 0 ? sprintf("%.2f×", v[o, i, "first-cpu-ms"] / v[o, i, "later-cpu-ms"]) : "-"
			if (haveRef && (r, i, "VmHWM-MiB") in v)
				printf "| %d | %s | %s | %.3f× | %s |\n", order[a], cols(o, i), cols(r, i), v[o, i, "VmHWM-MiB"] / v[r, i, "VmHWM-MiB"], ratio
			else if (!haveRef)
				printf "| %d | %s | %s |\n", order[a], cols(o, i), ratio
		}
	}
}' "$OUT"
