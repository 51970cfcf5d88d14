#!/usr/bin/env bash
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

# BenchmarkMemory/keys=N/EXPORTER-P  1  x ns/op  v unit ...; runs in order,
# ours before ref at each size.
awk '
/^BenchmarkMemory\/keys=/ {
	split($1, p, "/"); sub(/^keys=/, "", p[2]); sub(/-[0-9]+$/, "", p[3])
	delete v
	for (i = 5; i < NF; i += 2) v[$(i + 1)] = $i
	line = sprintf("%.0f | %.0f | %.0f | %.0f | %.0f | %.2f×", v["VmHWM-MiB"], v["heap-peak-MiB"], v["first-ms"], v["later-ms"], v["first-cpu-ms"], v["later-cpu-ms"] > 0 ? v["first-cpu-ms"] / v["later-cpu-ms"] : 0)
	if (p[3] == "ours") { ours = line; oh = v["VmHWM-MiB"]; ohp = v["heap-peak-MiB"]; keys = p[2]; if (!haveRef) pending = 1; next }
	if (p[3] == "ref") {
		printf "| %d | %s | %s | %.3f× | %.3f× |\n", keys, ours, line, oh / v["VmHWM-MiB"], ohp / v["heap-peak-MiB"]
		pending = 0
	}
}
END {}
' "$OUT" >"$OUT.ref.tmp" || true
if [ -s "$OUT.ref.tmp" ]; then
	echo "| keys | ours: VmHWM MiB | heap peak MiB | first scrape ms | later ms | first CPU ms | first/later CPU | reference: VmHWM MiB | heap peak MiB | first scrape ms | later ms | first CPU ms | first/later CPU | VmHWM ours/ref | heap peak ours/ref |"
	echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
	cat "$OUT.ref.tmp"
else
	echo "| keys | VmHWM MiB | heap peak MiB | first scrape ms | later ms | first CPU ms | later CPU ms |"
	echo "|---:|---:|---:|---:|---:|---:|---:|"
	awk '/^BenchmarkMemory\/keys=.*\/ours/ {
		split($1, p, "/"); sub(/^keys=/, "", p[2]); delete v
		for (i = 5; i < NF; i += 2) v[$(i + 1)] = $i
		printf "| %d | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f |\n", p[2], v["VmHWM-MiB"], v["heap-peak-MiB"], v["first-ms"], v["later-ms"], v["first-cpu-ms"], v["later-cpu-ms"]
	}' "$OUT"
fi
rm -f "$OUT.ref.tmp"
