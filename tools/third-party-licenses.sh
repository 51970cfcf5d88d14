#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tools/third-party-licenses.sh OUT: write the licence and notice files of
# every Go module linked into ./cmd/kernel_exporter for GOOS/GOARCH of the
# environment (and of Go's standard library and runtime), as one text file:
# a static binary carries their code, so a release carries their notices.
#
# The modules are those of go list -deps (modules without a package in the
# binary are left out); their files are read from the module cache, where
# go build has just put them. A module without a LICENSE, LICENCE, COPYING
# or NOTICE file at its root stops the release: look it up and add it here.
set -euo pipefail
: "${GO:=go}"
out=${1:?usage: $0 OUT}

tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
goroot=$("$GO" env GOROOT)
goversion=$("$GO" env GOVERSION)
{
	echo "kernel_exporter is a static binary: it contains the Go standard library"
	echo "and runtime and the Go modules below. Their licences and notices follow,"
	echo "as their authors published them."
	echo
	emit() { # NAME VERSION DIR
		local files=() f
		for f in "$3"/LICENSE* "$3"/LICENCE* "$3"/COPYING* "$3"/NOTICE* "$3"/license* "$3"/licence*; do
			[ -f "$f" ] && files+=("$f")
		done
		if [ ${#files[@]} -eq 0 ]; then
			echo "third-party-licenses: $1 $2 has no licence file in $3" >&2
			return 1
		fi
		for f in "${files[@]}"; do
			printf '%s\n%s %s: %s\n%s\n' "================================================================================" \
				"$1" "$2" "$(basename "$f")" "--------------------------------------------------------------------------------"
			cat "$f"
			echo
		done
	}
	emit "Go standard library and runtime" "$goversion" "$goroot"
	"$GO" list -deps -f '{{with .Module}}{{if not .Main}}{{.Path}} {{.Version}} {{.Dir}}{{end}}{{end}}' ./cmd/kernel_exporter |
		LC_ALL=C sort -u | while read -r path version dir; do
		[ -n "$dir" ] || { echo "third-party-licenses: $path $version: not in the module cache (go mod download)" >&2; exit 1; }
		emit "$path" "$version" "$dir"
	done
} >"$tmp"
mv "$tmp" "$out"
chmod 0644 "$out"
