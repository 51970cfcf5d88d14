#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# alert-soak.sh start|wait|stop: runs integration's TestAlertSoak (a real
# Prometheus evaluating deploy/prometheus's rules against the default
# programs for KE_ALERT_SOAK_DURATION, default 20m) in the background, so
# that make test overlaps it with make fuzz and make test-kernels.
#
#   start  starts go test -run '^TestAlertSoak$' ./integration in a session
#          of its own, output to $DIR/log, exit status to $DIR/rc
#   wait   prints the log, follows it until the test ends (a line at least
#          every 30 s), and exits with the test's status
#   stop   ends the session if it still runs (SIGTERM to its process group:
#          the exporters detach their programs and exit; SIGKILL 20 s
#          later), then removes $DIR. Harmless when nothing runs.
#
# DIR is KE_ALERT_SOAK_DIR, default .cache/alert-soak in the checkout. GO is
# the go command (default go).
set -uo pipefail
cd "$(dirname "$0")/.."
dir=${KE_ALERT_SOAK_DIR:-$PWD/.cache/alert-soak}
go=${GO:-go}

# make -n runs a recipe line that calls $(MAKE), as make test's does: a
# dry run only says what it would do (make puts its single-letter flags,
# n among them, in the first word of MAKEFLAGS).
first=${MAKEFLAGS:-}
first=${first%% *}
case $first in -*) ;; *n*)
	echo "alert-soak: dry run (make -n): would ${1:-}"
	exit 0
	;;
esac

alive() { [ -f "$dir/pgid" ] && kill -0 -- "-$(cat "$dir/pgid")" 2>/dev/null; }

case ${1:-} in
start)
	if alive; then
		echo "alert-soak: already running (process group $(cat "$dir/pgid"), $dir)" >&2
		exit 1
	fi
	rm -rf "$dir"
	mkdir -p "$dir"
	echo "alert-soak: TestAlertSoak for ${KE_ALERT_SOAK_DURATION:-20m} in the background, output in $dir/log"
	# setsid: a session and process group of its own, which stop ends as
	# a whole (go, the test binary, the exporters, Prometheus).
	KE_ALERT_SOAK_DIR=$dir CGO_ENABLED=0 setsid bash -c '
		echo $$ >"$KE_ALERT_SOAK_DIR/pgid"
		"$0" test -count=1 -v -run "^TestAlertSoak\$" -timeout 2h ./integration >"$KE_ALERT_SOAK_DIR/log" 2>&1
		echo $? >"$KE_ALERT_SOAK_DIR/rc"' "$go" </dev/null >/dev/null 2>&1 &
	for _ in $(seq 50); do [ -f "$dir/pgid" ] && exit 0; sleep 0.1; done
	echo "alert-soak: did not start" >&2
	exit 1
	;;
wait)
	if [ ! -f "$dir/log" ]; then
		echo "alert-soak: not started ($dir/log missing)" >&2
		exit 1
	fi
	echo "alert-soak: TestAlertSoak's output ($dir/log):"
	start=$SECONDS
	last=$SECONDS
	printed=0
	while :; do
		n=$(wc -l <"$dir/log")
		if [ "$n" -gt "$printed" ]; then
			sed -n "$((printed + 1)),${n}p" "$dir/log"
			printed=$n
			last=$SECONDS
		fi
		if [ -f "$dir/rc" ]; then
			sed -n "$((printed + 1)),\$p" "$dir/log"
			rc=$(cat "$dir/rc")
			echo "alert-soak: TestAlertSoak exited with status $rc"
			exit "$rc"
		fi
		if ! alive; then
			echo "alert-soak: TestAlertSoak ended without an exit status" >&2
			exit 1
		fi
		if [ $((SECONDS - last)) -ge 30 ]; then
			echo "[alert-soak] $((SECONDS - start)) s, still running"
			last=$SECONDS
		fi
		sleep 2
	done
	;;
stop)
	if alive; then
		pgid=$(cat "$dir/pgid")
		echo "alert-soak: stopping process group $pgid"
		kill -TERM -- "-$pgid" 2>/dev/null
		for _ in $(seq 20); do alive || break; sleep 1; done
		if alive; then
			echo "alert-soak: process group $pgid still running 20 s after SIGTERM: SIGKILL" >&2
			kill -KILL -- "-$pgid" 2>/dev/null
		fi
	fi
	rm -rf "$dir"
	;;
*)
	echo "usage: $0 start|wait|stop" >&2
	exit 2
	;;
esac
