#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# heartbeat.sh CMD [ARG...]: runs CMD with its output passed through, and
# prints a progress line whenever CMD has printed nothing for 30 s (go test
# prints a package's results only when the package ends). Exits with CMD's
# status.
set -uo pipefail
start=$SECONDS
"$@" 2>&1 | while true; do
	if IFS= read -r -t 30 line; then
		printf '%s\n' "$line"
	else
		rc=$?
		if [ "$rc" -gt 128 ]; then
			printf '[heartbeat] %d s, still running: %s\n' "$((SECONDS - start))" "$*"
			continue
		fi
		[ -n "$line" ] && printf '%s\n' "$line"
		break
	fi
done
exit "${PIPESTATUS[0]}"
