#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# debian-tree.sh DIR: make DIR a minimal Debian 12 (bookworm) tree that
# boots systemd under systemd-nspawn -b, for the tests that install the
# .deb in a real systemd (integration/systemd_deb_test.go). Built once with
# debootstrap (variant minbase, plus systemd and systemd-sysv) from the
# Debian archive that the machine's own bookworm apt entry names, into
# DIR.tmp, then renamed: DIR either is complete or does not exist. A DIR
# that exists is left as it is (remove it to rebuild).
#
# Needs root, debootstrap and the archive keyring (make test-deps).
set -eu
[ $# -eq 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
dir=$1
[ -d "$dir" ] && exit 0
command -v debootstrap >/dev/null || { echo "debian-tree: debootstrap not found (make test-deps installs it)" >&2; exit 1; }

uri=$(apt-get indextargets --format '$(REPO_URI) $(RELEASE) $(IDENTIFIER)' 2>/dev/null |
	awk '$2 == "bookworm" && $3 == "Packages" { print $1; exit }')
[ -n "$uri" ] || { echo "debian-tree: no bookworm entry in the apt lists to take the archive from (run apt-get update)" >&2; exit 1; }

rm -rf "$dir.tmp"
mkdir -p "$(dirname "$dir")"
debootstrap --variant=minbase --include=systemd,systemd-sysv \
	--keyring=/usr/share/keyrings/debian-archive-keyring.gpg \
	bookworm "$dir.tmp" "$uri" >"$dir.tmp.log" 2>&1 || {
	tail -n 20 "$dir.tmp.log" >&2
	echo "debian-tree: debootstrap failed (log: $dir.tmp.log)" >&2
	exit 1
}
# The tree boots with the host's network (no --private-network): nothing
# in it may touch it. No getty on a console nobody reads, a root login
# without password is never needed (the tests use systemd-run and
# nsenter), and the downloaded packages go.
echo kernel-exporter-test >"$dir.tmp/etc/hostname"
rm -f "$dir.tmp"/var/cache/apt/archives/*.deb
chroot "$dir.tmp" systemctl mask console-getty.service getty@.service \
	systemd-networkd.service systemd-resolved.service systemd-timesyncd.service \
	apt-daily.timer apt-daily-upgrade.timer >/dev/null 2>&1 || true
mv "$dir.tmp.log" "$dir.tmp/debian-tree.log"
mv "$dir.tmp" "$dir"
