#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# prerm: stop the service before its binary goes (only when systemd runs).
set -e
if [ "$1" = remove ] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
	systemctl stop kernel_exporter.service >/dev/null 2>&1 || true
fi
exit 0
