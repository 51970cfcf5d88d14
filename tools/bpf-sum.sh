#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tools/bpf-sum.sh: keep the committed BPF objects up to date by the content
# of their inputs, never by file times (a fresh clone gives every file the
# same time, or an order that depends on the checkout).
#
#   tools/bpf-sum.sh update SRC...   rebuild (tools/bpf-build.sh) only the
#                                    objects whose inputs or bytes differ from
#                                    programs/bpf.sum, then rewrite it
#   tools/bpf-sum.sh check SRC...    fail unless programs/bpf.sum lists
#                                    exactly SRC's objects, with the hashes of
#                                    their inputs and bytes as they are now
#
# programs/bpf.sum has one line per object, sorted by path:
#
#   <inputs sha256> <object sha256> <object path>
#
# An object's inputs are its source, every header under include/,
# tools/bpf-build.sh (flags, staging) and $BPF_ARCH. The toolchain is
# pinned by name (clang-19): make bpf-check rebuilds everything with it and
# compares bytes, which catches a toolchain that builds differently.
#
# update needs clang only when something is stale: in a fresh clone nothing
# is, and make bpf prints "up to date".
set -euo pipefail

BPF_ARCH=${BPF_ARCH:-x86}
repo=$(cd "$(dirname "$0")/.." && pwd)
sum=programs/bpf.sum

if [ $# -lt 1 ]; then
	echo "usage: $0 update|check SRC..." >&2
	exit 2
fi
mode=$1
shift
cd "$repo"

hash() { sha256sum | cut -d' ' -f1; }

# What every object shares: the build script and the headers.
common=$(
	for f in tools/bpf-build.sh $(find include -name '*.h' | LC_ALL=C sort); do
		printf '%s %s\n' "$f" "$(hash <"$f")"
	done | hash
)

inputs() { # SRC
	printf 'arch %s\ncommon %s\n%s %s\n' "$BPF_ARCH" "$common" "$1" "$(hash <"$1")" | hash
}

# recorded OBJ: the manifest's "<inputs> <object>" hashes for OBJ, or nothing.
recorded() {
	[ -f "$sum" ] || return 0
	awk -v o="$1" '$3 == o { print $1, $2 }' "$sum"
}

case $mode in
update)
	stale=()
	for src in "$@"; do
		obj=${src%.c}.o
		if [ ! -f "$obj" ] || [ "$(recorded "$obj")" != "$(inputs "$src") $(hash <"$obj")" ]; then
			stale+=("$src")
		fi
	done
	if [ ${#stale[@]} -gt 0 ]; then
		echo "bpf: rebuilding ${#stale[@]} of $# object(s): ${stale[*]}"
		tools/bpf-build.sh . "${stale[@]}"
	else
		echo "bpf: $# object(s) up to date (programs/bpf.sum)"
	fi
	tmp=$(mktemp)
	trap 'rm -f "$tmp"' EXIT
	for src in "$@"; do
		obj=${src%.c}.o
		printf '%s %s %s\n' "$(inputs "$src")" "$(hash <"$obj")" "$obj"
	done | LC_ALL=C sort -k3 >"$tmp"
	if ! cmp -s "$tmp" "$sum" 2>/dev/null; then
		cat "$tmp" >"$sum"
		echo "bpf: wrote $sum"
	fi
	;;
check)
	fail=0
	want=$(for src in "$@"; do echo "${src%.c}.o"; done | LC_ALL=C sort)
	have=$( { awk '{ print $3 }' "$sum" 2>/dev/null || true; } | LC_ALL=C sort)
	if [ "$want" != "$have" ]; then
		echo "bpf-check: $sum does not list exactly the objects of the sources: run make bpf" >&2
		diff <(echo "$want") <(echo "$have") | sed -n 's/^[<>] /  /p' >&2 || true
		fail=1
	fi
	for src in "$@"; do
		obj=${src%.c}.o
		[ -f "$obj" ] || continue
		if [ "$(recorded "$obj")" != "$(inputs "$src") $(hash <"$obj")" ]; then
			echo "bpf-check: $obj: $sum records other inputs or bytes than the tree's: run make bpf" >&2
			fail=1
		fi
	done
	exit $fail
	;;
*)
	echo "usage: $0 update|check SRC..." >&2
	exit 2
	;;
esac
