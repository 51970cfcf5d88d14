#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# postrm: make systemd forget the removed unit. Removal keeps the admin's
# choices (/etc/default/kernel_exporter, drop-ins, whether the service is
# enabled), so that installing again brings the service back as it was;
# purge also forgets the enablement (the links systemctl enable made,
# which systemctl disable cannot remove once the unit file is gone), as
# Debian's packages do. The kernel_exporter user is kept (it may own files
# an admin gave it), as Debian does for system users.
set -e
if [ "$1" = purge ]; then
	rm -f /etc/systemd/system/*.wants/kernel_exporter.service
	if command -v deb-systemd-helper >/dev/null 2>&1; then
		deb-systemd-helper purge kernel_exporter.service >/dev/null 2>&1 || true
	fi
fi
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
	systemctl daemon-reload || true
fi
exit 0
