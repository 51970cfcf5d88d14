#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Prints the path of a Go command that can build this module, installing one
# when the machine has none. Used by the Makefile (GO := $(shell ...)).
#
# Any Go >= 1.21 will do: it reads the toolchain line of go.mod and fetches
# that exact toolchain through the Go module proxy (GOTOOLCHAIN=auto). When
# no suitable Go is found, this installs the newest golang-1.N-go (N >= 21)
# that apt offers (Ubuntu's own suites have one). Debian 12's own suites
# stop at 1.19, so there it first adds bookworm-backports (golang-1.23),
# whose apt source is derived from the machine's own Debian source (same
# mirror, backports suite), in
# /etc/apt/sources.list.d/kernel-exporter-backports.sources; both the source
# and the packages stay (README says so). All messages go to stderr: stdout
# is only the path.
set -eu

suitable() {
	[ -n "$1" ] && [ -x "$1" ] || return 1
	v=$(cd / && GOTOOLCHAIN=local "$1" version 2>/dev/null) || return 1
	# "go version go1.23.5 linux/amd64" -> 1 23
	set -- $(printf '%s\n' "$v" | sed -n 's/^go version go\([0-9]*\)\.\([0-9]*\).*/\1 \2/p')
	[ $# -eq 2 ] && { [ "$1" -gt 1 ] || [ "$2" -ge 21 ]; }
}

for g in "${GO_CANDIDATE:-}" "$(command -v go 2>/dev/null || true)" /usr/local/go/bin/go \
	/usr/lib/go-1.26/bin/go /usr/lib/go-1.25/bin/go /usr/lib/go-1.24/bin/go /usr/lib/go-1.23/bin/go \
	/usr/lib/go-1.22/bin/go /usr/lib/go-1.21/bin/go; do
	if suitable "$g"; then
		echo "$g"
		exit 0
	fi
done

# pick prints the newest golang-1.N-go (N >= 21) that apt can install.
pick() {
	for v in 26 25 24 23 22 21; do
		if apt-cache policy "golang-1.$v-go" 2>/dev/null | grep -q 'Candidate: [0-9]'; then
			echo "$v"
			return
		fi
	done
}

echo "ensure-go: no Go >= 1.21 found; installing one with apt-get" >&2
if [ "$(id -u)" -ne 0 ]; then
	echo "ensure-go: run as root to install Go, or put Go >= 1.21 on PATH" >&2
	exit 1
fi
v=$(pick)
if [ -z "$v" ]; then
	apt-get update -qq >&2
	v=$(pick)
fi
# Debian 12's own suites stop at golang-1.19: bookworm-backports has 1.23.
if [ -z "$v" ] && grep -qs bookworm /etc/os-release; then
	src=/etc/apt/sources.list.d/debian.sources
	uri=$(awk '/^URIs:/ {print $2; exit}' "$src" 2>/dev/null || true)
	if [ -z "$uri" ] && [ -f /etc/apt/sources.list ]; then
		uri=$(awk '$1 == "deb" && $3 ~ /^bookworm/ {print $2; exit}' /etc/apt/sources.list)
	fi
	if [ -z "$uri" ]; then
		echo "ensure-go: cannot find the Debian mirror in $src or /etc/apt/sources.list" >&2
		exit 1
	fi
	echo "ensure-go: adding bookworm-backports from $src" >&2
	printf 'Types: deb\nURIs: %s\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
		"$uri" >/etc/apt/sources.list.d/kernel-exporter-backports.sources
	apt-get update -qq >&2
	v=$(pick)
fi
if [ -z "$v" ]; then
	echo "ensure-go: apt offers no golang-1.21-go or newer: install Go >= 1.21 by hand" >&2
	exit 1
fi
# Without Recommends (a C toolchain, pkgconf): the exporter builds with
# CGO_ENABLED=0. ca-certificates: Go fetches go.mod's toolchain over HTTPS.
echo "ensure-go: installing golang-1.$v-go (without Recommends)" >&2
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "golang-1.$v-go" ca-certificates >&2
g=/usr/lib/go-1.$v/bin/go
suitable "$g" || { echo "ensure-go: $g does not run" >&2; exit 1; }
echo "$g"
