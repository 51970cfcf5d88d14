#!/usr/bin/env bash
# Kernel test matrix (make test-kernels): runs the TestMatrix* integration
# tests on this machine's kernel, then boots Debian's 6.1 cloud kernel
# under QEMU (TCG: no KVM needed) with an initramfs holding busybox-static,
# the static exporter and the compiled tests, runs them there, and prints
# one table row per program, mode and kernel. Fails if any test fails on
# either kernel or the guest does not report back.
#
# Environment:
#   KE_KERNEL_CACHE   where kernel packages are kept (.cache/kernels)
#   KE_MATRIX_RUN     test regexp (^TestMatrix)
#   KE_GUEST_TIMEOUT  seconds before the VM is killed (600)
#   KE_HOST_EXPECT    pin the host's features for the tests, e.g.
#                     "none" or "fentry,kprobes" (unset: not pinned)
#   GO                go command (go)
set -euo pipefail
cd "$(dirname "$0")/../.."

GO=${GO:-go}
CACHE=${KE_KERNEL_CACHE:-.cache/kernels}
RUN=${KE_MATRIX_RUN:-^TestMatrix}
GUEST_TIMEOUT=${KE_GUEST_TIMEOUT:-600}
# Debian's 6.1 LTS cloud kernel: has BTF, kprobes and BPF trampolines.
KERNEL_PATTERN='^linux-image-6\.1\.0-[0-9]+-cloud-amd64-unsigned$'
GUEST_EXPECT=fentry,kprobes

BUILD=$CACHE/build
mkdir -p "$CACHE" "$BUILD"
BUILD=$(cd "$BUILD" && pwd)
CACHE=$(cd "$CACHE" && pwd)

log() { printf '== %s\n' "$*" >&2; }

need() {
	for c in "$@"; do
		command -v "$c" >/dev/null || { echo "test-kernels: $c not found (make test-deps installs it)" >&2; exit 1; }
	done
}
need qemu-system-x86_64 busybox apt-get dpkg gzip timeout
[ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1 || { echo "test-kernels: /bin/busybox must be static (busybox-static)" >&2; exit 1; }

log "building the static exporter and the integration tests"
CGO_ENABLED=0 $GO build -trimpath -o "$BUILD/kernel_exporter" ./cmd/kernel_exporter
CGO_ENABLED=0 $GO test -c -trimpath -o "$BUILD/integration.test" ./integration

start=$(date +%s)
log "host $(uname -r): running $RUN"
host_rc=0
(
	cd integration
	if [ -n "${KE_HOST_EXPECT+x}" ]; then export KE_MATRIX_EXPECT=$KE_HOST_EXPECT; fi
	KERNEL_EXPORTER_BINARY=$BUILD/kernel_exporter "$BUILD/integration.test" \
		-test.v -test.count=1 -test.timeout=15m -test.run "$RUN"
) >"$BUILD/host.log" 2>&1 || host_rc=$?
host_secs=$(( $(date +%s) - start ))

log "fetching the guest kernel"
pkg=$(apt-cache search --names-only "$KERNEL_PATTERN" 2>/dev/null | awk '{print $1}' | sort -V | tail -n 1 || true)
if [ -z "$pkg" ]; then
	# No package index (offline): use the newest kernel already cached.
	pkg=$(ls "$CACHE" | grep -E "${KERNEL_PATTERN#^}" | sort -V | tail -n 1 || true)
fi
[ -n "$pkg" ] || { echo "test-kernels: no package matches $KERNEL_PATTERN (run apt-get update)" >&2; exit 1; }
if [ ! -d "$CACHE/$pkg/boot" ]; then
	deb=$(ls "$CACHE"/"${pkg}"_*.deb 2>/dev/null | tail -n 1 || true)
	if [ -z "$deb" ]; then
		(cd "$CACHE" && apt-get download "$pkg" >&2)
		deb=$(ls "$CACHE"/"${pkg}"_*.deb | tail -n 1)
	fi
	rm -rf "$CACHE/$pkg.tmp"
	dpkg -x "$deb" "$CACHE/$pkg.tmp"
	mv "$CACHE/$pkg.tmp" "$CACHE/$pkg"
fi
vmlinuz=$(ls "$CACHE/$pkg"/boot/vmlinuz-* | head -n 1)
config=$(ls "$CACHE/$pkg"/boot/config-* | head -n 1)
for opt in CONFIG_DEBUG_INFO_BTF=y CONFIG_KPROBES=y CONFIG_DYNAMIC_FTRACE_WITH_DIRECT_CALLS=y CONFIG_SERIAL_8250_CONSOLE=y CONFIG_BLK_DEV_INITRD=y; do
	grep -qx "$opt" "$config" || { echo "test-kernels: $pkg lacks $opt" >&2; exit 1; }
done

log "building the initramfs"
root=$BUILD/initramfs
rm -rf "$root"
mkdir -p "$root"/{bin,dev,proc,sys,tmp,it}
cp /bin/busybox "$root/bin/busybox"
cp "$BUILD/kernel_exporter" "$root/bin/kernel_exporter"
cp "$BUILD/integration.test" "$root/it/integration.test"
cp tools/kernel-matrix/guest-init "$root/init"
chmod 755 "$root/init"
printf '%s' "$RUN" >"$root/it/run"
printf '%s' "$GUEST_EXPECT" >"$root/it/expect"
(cd "$root" && find . | busybox cpio -o -H newc 2>/dev/null) | gzip -1 >"$BUILD/initramfs.cpio.gz"

log "guest $pkg: booting under QEMU (TCG), timeout ${GUEST_TIMEOUT}s"
start=$(date +%s)
guest_rc=0
timeout "$GUEST_TIMEOUT" qemu-system-x86_64 -accel tcg -m 1024 -smp 1 \
	-nographic -no-reboot -nic none \
	-kernel "$vmlinuz" -initrd "$BUILD/initramfs.cpio.gz" \
	-append 'console=ttyS0 panic=-1 softlockup_panic=1 quiet' </dev/null \
	| tr -d '\r' >"$BUILD/guest.log" 2>&1 || guest_rc=$?
guest_secs=$(( $(date +%s) - start ))

# The table: one row per MATRIX line of both runs.
table() {
	awk -F'|' 'BEGIN { printf "%-20s %-26s %-10s %-30s %s\n", "KERNEL", "CONFIG", "MODE", "ATTACH", "RESULT" }
		/^MATRIX\|/ { printf "%-20s %-26s %-10s %-30s %s\n", $2, $3, $4, $5, $6 }' "$@"
}
echo
table "$BUILD/host.log" "$BUILD/guest.log" | tee "$BUILD/matrix.txt"
echo
echo "host $(uname -r): ${host_secs}s; guest $pkg: ${guest_secs}s (boot + tests, TCG)"
echo "logs: $BUILD/host.log $BUILD/guest.log"

fail=0
if [ "$host_rc" -ne 0 ] || grep -q -- '^--- FAIL' "$BUILD/host.log"; then
	echo "test-kernels: FAIL on the host (exit $host_rc):" >&2
	grep -E -- '^\s*--- FAIL|_test.go:[0-9]+:' "$BUILD/host.log" >&2 || tail -n 30 "$BUILD/host.log" >&2
	fail=1
fi
if ! grep -q '^KE-GUEST-EXIT 0$' "$BUILD/guest.log" || grep -q -- '^--- FAIL' "$BUILD/guest.log"; then
	echo "test-kernels: FAIL in the $pkg guest (qemu exit $guest_rc):" >&2
	grep -E -- '^\s*--- FAIL|_test.go:[0-9]+:|KE-GUEST|panic|Kernel panic' "$BUILD/guest.log" >&2 || tail -n 40 "$BUILD/guest.log" >&2
	fail=1
fi
for log in "$BUILD/host.log" "$BUILD/guest.log"; do
	if ! grep -q '^MATRIX|' "$log"; then
		echo "test-kernels: no MATRIX rows in $log" >&2
		fail=1
	fi
done
exit "$fail"
