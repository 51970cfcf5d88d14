#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# postinst: create the kernel_exporter system user and make systemd see the
# unit. Never fails the install on a machine without systemd (a container, a
# chroot): the user is then made with useradd when it exists. Does not enable
# or start the service: systemctl enable --now kernel_exporter.
set -e

if command -v systemd-sysusers >/dev/null 2>&1; then
	systemd-sysusers /usr/lib/sysusers.d/kernel_exporter.conf || true
elif ! getent passwd kernel_exporter >/dev/null 2>&1 && command -v useradd >/dev/null 2>&1; then
	useradd --system --user-group --no-create-home --home-dir / \
		--shell /usr/sbin/nologin kernel_exporter || true
fi

if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
	systemctl daemon-reload || true
fi
exit 0
