#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# postrm: make systemd forget the removed unit. The kernel_exporter user is
# kept (it may own files an admin gave it), as Debian does for system users.
set -e
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
	systemctl daemon-reload || true
fi
exit 0
