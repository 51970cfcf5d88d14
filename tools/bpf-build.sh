#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tools/bpf-build.sh: compile BPF C sources into CO-RE objects that are
# byte-identical whoever builds them, from whatever checkout path.
#
#   tools/bpf-build.sh OUTDIR SRC...
#
# Each SRC is a repository-relative path ending in .bpf.c; its object is
# written to OUTDIR/<SRC without .c>.o (OUTDIR=. rebuilds in place).
#
# Why a fixed staging directory: clang-19 orders the types in .BTF partly by
# heap layout, and heap layout shifts with the length of strings such as the
# working directory and the arguments: biolatency.bpf.c compiled from
# checkouts at paths of 10 and 37 characters gave objects whose BTF types
# came out in a different order. So sources and headers are copied to one fixed
# path and compiled there with fixed, relative arguments and a minimal
# environment; only repository-relative names reach clang.
#
# Environment: CLANG (clang-19), LLVM_STRIP (llvm-strip-19), BPF_ARCH (x86),
# BPF_STAGE (/tmp/kernel_exporter-bpf). Concurrent builds are serialised
# with flock on $BPF_STAGE.lock.
set -euo pipefail

CLANG=${CLANG:-clang-19}
LLVM_STRIP=${LLVM_STRIP:-llvm-strip-19}
BPF_ARCH=${BPF_ARCH:-x86}
BPF_STAGE=${BPF_STAGE:-/tmp/kernel_exporter-bpf}

if [ $# -lt 2 ]; then
	echo "usage: $0 OUTDIR SRC..." >&2
	exit 2
fi
out=$1
shift
mkdir -p "$out"
out=$(cd "$out" && pwd)
repo=$(cd "$(dirname "$0")/.." && pwd)

clang_bin=$(command -v "$CLANG") || { echo "bpf-build: $CLANG not found: run make bpf-deps" >&2; exit 1; }
strip_bin=$(command -v "$LLVM_STRIP") || { echo "bpf-build: $LLVM_STRIP not found: run make bpf-deps" >&2; exit 1; }

exec 9>"$BPF_STAGE.lock"
flock 9

rm -rf "$BPF_STAGE"
mkdir -p "$BPF_STAGE"
cp -r "$repo/include" "$BPF_STAGE/include"
for src in "$@"; do
	case $src in
	/* | *..*) echo "bpf-build: $src: give a repository-relative path" >&2; exit 2 ;;
	*.bpf.c) ;;
	*) echo "bpf-build: $src: not a .bpf.c source" >&2; exit 2 ;;
	esac
	mkdir -p "$BPF_STAGE/$(dirname "$src")"
	cp "$repo/$src" "$BPF_STAGE/$src"
done

cd "$BPF_STAGE"
for src in "$@"; do
	obj=${src%.c}.o
	env -i PATH=/usr/bin:/bin "$clang_bin" -target bpf -D__TARGET_ARCH_"$BPF_ARCH" \
		-O2 -g -Wall -Werror -Iinclude -fdebug-compilation-dir=. \
		-c "$src" -o "$obj"
	# DWARF off; .BTF and .BTF.ext (CO-RE, line info) stay.
	env -i PATH=/usr/bin:/bin "$strip_bin" -g "$obj"
	mkdir -p "$out/$(dirname "$obj")"
	cp "$obj" "$out/$obj"
done
rm -rf "$BPF_STAGE"
