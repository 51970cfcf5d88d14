#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# postinst: create the kernel_exporter system user, make systemd see the
# unit and, on an upgrade, restart the service if it runs, so that the new
# binary serves (try-restart: a stopped service stays stopped, as Debian's
# packages do with debhelper's restart-after-upgrade). A first install
# neither enables nor starts it: systemctl enable --now kernel_exporter.
# Never fails the install on a machine without systemd (a container, a
# chroot): the user is then made with useradd when it exists.
set -e

if command -v systemd-sysusers >/dev/null 2>&1; then
	systemd-sysusers /usr/lib/sysusers.d/kernel_exporter.conf || true
elif ! getent passwd kernel_exporter >/dev/null 2>&1 && command -v useradd >/dev/null 2>&1; then
	useradd --system --user-group --no-create-home --home-dir / \
		--shell /usr/sbin/nologin kernel_exporter || true
fi

if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
	systemctl daemon-reload || true
	# configure with the version configured before: an upgrade (or a
	# reinstall). deb-systemd-invoke honours policy-rc.d (a chroot or an
	# image build that forbids starting services).
	if [ "$1" = configure ] && [ -n "$2" ]; then
		if command -v deb-systemd-invoke >/dev/null 2>&1; then
			deb-systemd-invoke try-restart kernel_exporter.service || true
		else
			systemctl try-restart kernel_exporter.service || true
		fi
	fi
fi
exit 0
