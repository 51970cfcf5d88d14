#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# install-debs.sh PKG...: install the Debian packages make test-deps needs,
# as a guest on the user's machine:
#
#   - without Recommends (--no-install-recommends): prometheus would bring
#     prometheus-node-exporter, and chromium, podman and smartmontools-like
#     helpers bring avahi-daemon and more, none of which a test uses;
#   - without starting services: /usr/sbin/policy-rc.d answers 101 ("action
#     forbidden") while apt runs, so postinst scripts start nothing (an
#     existing policy-rc.d is left as it is);
#   - without leaving them enabled: every systemd unit (service, socket,
#     timer) shipped by a package this run installed is disabled, so that
#     etcd, prometheus or podman.socket do not start at the next boot either.
#     The tests start their own etcd, Prometheus and podman processes on
#     ports of their own.
#
# Packages already installed are not touched (make test-deps passes only
# the missing ones).
set -eu
[ $# -gt 0 ] || exit 0

before=$(mktemp)
trap 'rm -f "$before"' EXIT
dpkg-query -W -f '${Package}\n' 2>/dev/null | sort >"$before"

policy=/usr/sbin/policy-rc.d
own_policy=false
if [ ! -e "$policy" ]; then
	printf '#!/bin/sh\n# make test-deps (tools/install-debs.sh): no service starts during the install.\nexit 101\n' >"$policy"
	chmod 0755 "$policy"
	own_policy=true
	trap 'rm -f "$before"; rm -f "$policy"' EXIT
fi

echo "installing (no Recommends, no services started):$(printf ' %s' "$@")"
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"

new=$(dpkg-query -W -f '${Package}\n' 2>/dev/null | sort | comm -13 "$before" -)
count=$(printf '%s\n' "$new" | grep -c . || true)
units=""
for p in $new; do
	for f in $(dpkg -L "$p" 2>/dev/null | grep -E '^(/usr)?/lib/systemd/system/[^/]+\.(service|socket|timer)$' || true); do
		u=$(basename "$f")
		case $u in *@.*) continue ;; esac # templates are never enabled as such
		units="$units $u"
	done
done
if [ -n "$units" ] && command -v systemctl >/dev/null 2>&1; then
	for u in $units; do
		# Only "enabled": static, indirect and alias units are not
		# enabled by the package, and disable leaves them as they are.
		if [ "$(systemctl is-enabled "$u" 2>/dev/null)" = enabled ]; then
			systemctl disable --quiet "$u" 2>/dev/null || true
			echo "install-debs: disabled $u (the tests start what they need)"
		fi
		if [ -d /run/systemd/system ] && systemctl is-active --quiet "$u" 2>/dev/null; then
			systemctl stop "$u" 2>/dev/null || true
			echo "install-debs: stopped $u"
		fi
	done
fi
if $own_policy; then rm -f "$policy"; fi
echo "install-debs: $count package(s) installed"
