#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# prerm: stop the service before its binary goes, on removal only (when
# systemd runs). An upgrade leaves it running: the new postinst restarts
# it on the new binary (try-restart), so it is down only for that restart.
set -e
if [ "$1" = remove ] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
	if command -v deb-systemd-invoke >/dev/null 2>&1; then
		deb-systemd-invoke stop kernel_exporter.service >/dev/null 2>&1 || true
	else
		systemctl stop kernel_exporter.service >/dev/null 2>&1 || true
	fi
fi
exit 0
