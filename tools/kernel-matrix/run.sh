#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Kernel test matrix (make test-kernels): runs the TestMatrix* integration
# tests on this machine's kernel, then boots each guest kernel below under
# QEMU (TCG: no KVM needed) with an initramfs holding busybox-static, the
# static exporter and the compiled tests, runs them there, and prints one
# table with a row per program, mode and kernel, then one summary line per
# leg: "guest NAME ARCH RELEASE btf=yes|no: N passed, M failed". Fails if
# any test fails on any kernel or a guest does not report back.
#
# Guest kernels (KERNELS below): Debian 11's 5.10 LTS cloud kernel, from
# the bullseye suite through a private apt state under the cache (the
# machine's sources and lists are not touched; the archive is the one the
# machine's own bookworm entry names), and Debian 12's 6.1 LTS cloud kernel
# from the machine's own lists. Both have BTF, kprobes and BPF trampolines.
#
# Environment:
#   KE_KERNEL_CACHE   where kernel packages are kept (.cache/kernels)
#   KE_MATRIX_RUN     test regexp (^TestMatrix)
#   KE_MATRIX_KERNELS guest kernels to boot, by name (5.10 6.1); "" for none
#   KE_GUEST_TIMEOUT  seconds before a VM is killed (600)
#   KE_HOST_EXPECT    pin the host's features for the tests, e.g.
#                     "none" or "fentry,kprobes" (unset: not pinned)
#   GO                go command (go)
set -euo pipefail
cd "$(dirname "$0")/../.."

GO=${GO:-go}
CACHE=${KE_KERNEL_CACHE:-.cache/kernels}
RUN=${KE_MATRIX_RUN:-^TestMatrix}
GUEST_TIMEOUT=${KE_GUEST_TIMEOUT:-600}
SELECTED=${KE_MATRIX_KERNELS-5.10 6.1}

# name|package pattern|suite (empty: the machine's own apt lists)|features
# the probes must find (KE_MATRIX_EXPECT)|bundled programs expected down
# (KE_MATRIX_DOWN, see docs/kernel-matrix.md for why; TCG has no PMU, so
# ipc and llc are down on every guest)|tests to run (empty: $RUN). 5.10
# runs the per-program status, the chains that fall back or are refused
# there, the loader's own checks and the profile command; the TCP
# programs it runs like 6.1 are left to 6.1, to keep it within ~3 minutes
# of TCG.
KERNELS=(
	'5.10|^linux-image-5\.10\.0-[0-9]+-cloud-amd64-unsigned$|bullseye|fentry,kprobes|biolatency,funccount,funclatency,ipc,llc,packet_drops,runqlat,runqlat_cgroup,stackcount,syscalls|^TestMatrix(Programs|Funclatency|Funccount|Stackcount|AcceptLatency|FallbackChain|Requires|BTFPath|SoftirqRaise|RunqlatCgroup|AcceptPerProcess|PortExhaustion|DNSLatency|USDTLibbpf|ProfileCPU|ProfileKernel|ProfileOffCPU|MemlockPodCaps)$'
	'6.1|^linux-image-6\.1\.0-[0-9]+-cloud-amd64-unsigned$||fentry,kprobes|ipc,llc|'
)

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
need qemu-system-x86_64 busybox apt-get dpkg gzip timeout gcc
[ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1 || { echo "test-kernels: /bin/busybox must be static (busybox-static)" >&2; exit 1; }

log "building the static exporter and the integration tests"
CGO_ENABLED=0 $GO build -trimpath -o "$BUILD/kernel_exporter" ./cmd/kernel_exporter
CGO_ENABLED=0 $GO test -c -trimpath -o "$BUILD/integration.test" ./integration
# The profile tests' workload (internal/proftest), static: the guests have
# no compiler and no libc. The host leg compiles its own.
gcc -static -O1 -fno-omit-frame-pointer -Wall -o "$BUILD/ke-profile-workload" profile/testdata/workload.c

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

# aptsuite SUITE ARGS...: apt-get with a private state under the cache
# whose only source is SUITE of the Debian archive that the machine's own
# bookworm entry names. Lists are fetched once (make a new cache to refresh).
aptsuite() {
	local suite=$1
	shift
	local dir=$CACHE/apt-$suite
	local opts=(-o "Dir::Etc::sourcelist=/dev/null" -o "Dir::Etc::sourceparts=$dir/sources"
		-o "Dir::State::lists=$dir/lists" -o "Dir::Cache=$dir/cache" -o "Dir::State::status=/dev/null")
	if [ ! -f "$dir/updated" ]; then
		local uri
		uri=$(apt-get indextargets --format '$(REPO_URI) $(RELEASE) $(IDENTIFIER)' 2>/dev/null |
			awk '$2 == "bookworm" && $3 == "Packages" { print $1; exit }')
		[ -n "$uri" ] || { echo "test-kernels: no bookworm entry in the apt lists to take the archive from (run apt-get update)" >&2; return 1; }
		mkdir -p "$dir/sources" "$dir/lists/partial" "$dir/cache/archives/partial"
		printf 'Types: deb\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
			"$uri" "$suite" >"$dir/sources/$suite.sources"
		apt-get "${opts[@]}" update -qq >&2
		touch "$dir/updated"
	fi
	"$1" "${opts[@]}" "${@:2}"
}

# fetch NAME PATTERN SUITE: prints the cache directory of the newest
# package matching PATTERN, downloading and unpacking it when missing.
fetch() {
	local name=$1 pattern=$2 suite=$3 pkg=""
	if [ -n "$suite" ]; then
		# A suite of an older release: its kernel, once cached, is kept.
		pkg=$(ls "$CACHE" | grep -E "${pattern#^}" | sort -V | tail -n 1 || true)
		[ -n "$pkg" ] || pkg=$(aptsuite "$suite" apt-cache search --names-only "$pattern" | awk '{print $1}' | sort -V | tail -n 1 || true)
	else
		pkg=$(apt-cache search --names-only "$pattern" 2>/dev/null | awk '{print $1}' | sort -V | tail -n 1 || true)
		if [ -z "$pkg" ]; then
			# No package index (offline): use the newest kernel already cached.
			pkg=$(ls "$CACHE" | grep -E "${pattern#^}" | sort -V | tail -n 1 || true)
		fi
	fi
	[ -n "$pkg" ] || { echo "test-kernels: no package matches $pattern (run apt-get update)" >&2; return 1; }
	if [ ! -d "$CACHE/$pkg/boot" ]; then
		local deb
		deb=$(ls "$CACHE"/"${pkg}"_*.deb 2>/dev/null | tail -n 1 || true)
		if [ -z "$deb" ]; then
			if [ -n "$suite" ]; then
				(cd "$CACHE" && aptsuite "$suite" apt-get download "$pkg" >&2)
			else
				(cd "$CACHE" && apt-get download "$pkg" >&2)
			fi
			deb=$(ls "$CACHE"/"${pkg}"_*.deb | tail -n 1)
		fi
		rm -rf "$CACHE/$pkg.tmp"
		dpkg -x "$deb" "$CACHE/$pkg.tmp"
		mv "$CACHE/$pkg.tmp" "$CACHE/$pkg"
	fi
	echo "$CACHE/$pkg"
}

# guest NAME PATTERN SUITE EXPECT DOWN TESTS: boots the kernel and runs
# TESTS (a -test.run regexp) in it into $BUILD/guest-NAME.log. Returns
# non-zero when the guest failed. Leaves for the summary line: G_ARCH,
# G_RELEASE and G_BTF (what the kernel package says, until the guest's
# KE-GUEST-INFO line says otherwise), and G_REASON when the guest did not
# run its tests to the end.
guest() {
	local name=$1 pattern=$2 suite=$3 expect=$4 down=$5 tests=$6
	local qemu=qemu-system-x86_64
	G_ARCH=${qemu#qemu-system-} G_RELEASE=unknown G_BTF=unknown G_REASON="kernel not fetched"
	log "guest $name: fetching the kernel"
	local dir
	dir=$(fetch "$name" "$pattern" "$suite") || return 1
	local pkg vmlinuz config
	pkg=$(basename "$dir")
	vmlinuz=$(ls "$dir"/boot/vmlinuz-* | head -n 1)
	config=$(ls "$dir"/boot/config-* | head -n 1)
	G_RELEASE=$(basename "$vmlinuz")
	G_RELEASE=${G_RELEASE#vmlinuz-}
	if grep -qx CONFIG_DEBUG_INFO_BTF=y "$config"; then G_BTF=yes; fi
	for opt in CONFIG_DEBUG_INFO_BTF=y CONFIG_KPROBES=y CONFIG_DYNAMIC_FTRACE_WITH_DIRECT_CALLS=y CONFIG_SERIAL_8250_CONSOLE=y CONFIG_BLK_DEV_INITRD=y; do
		grep -qx "$opt" "$config" || { echo "test-kernels: $pkg lacks $opt" >&2; G_REASON="not booted: $pkg lacks $opt"; return 1; }
	done

	log "guest $name: building the initramfs"
	local root=$BUILD/initramfs
	rm -rf "$root"
	mkdir -p "$root"/{bin,dev,proc,sys,tmp,it}
	cp /bin/busybox "$root/bin/busybox"
	cp "$BUILD/kernel_exporter" "$root/bin/kernel_exporter"
	cp "$BUILD/integration.test" "$root/it/integration.test"
	cp "$BUILD/ke-profile-workload" "$root/bin/ke-profile-workload"
	cp tools/kernel-matrix/guest-init "$root/init"
	# The pci_* decoders' database (Debian's pci.ids, about 1.4 MB), for
	# TestMatrixPCIConfigReads.
	if [ -f /usr/share/misc/pci.ids ]; then
		mkdir -p "$root/usr/share/misc"
		cp /usr/share/misc/pci.ids "$root/usr/share/misc/pci.ids"
	fi
	chmod 755 "$root/init"
	printf '%s' "$tests" >"$root/it/run"
	printf '%s' "$expect" >"$root/it/expect"
	printf '%s' "$down" >"$root/it/down"
	(cd "$root" && find . | busybox cpio -o -H newc 2>/dev/null) | gzip -1 >"$BUILD/initramfs.cpio.gz"

	log "guest $name ($pkg): booting under QEMU (TCG), timeout ${GUEST_TIMEOUT}s"
	local start rc=0
	start=$(date +%s)
	G_REASON="not booted"
	timeout "$GUEST_TIMEOUT" "$qemu" -accel tcg -m 1024 -smp 1 \
		-nographic -no-reboot -nic none \
		-kernel "$vmlinuz" -initrd "$BUILD/initramfs.cpio.gz" \
		-append 'console=ttyS0 panic=-1 softlockup_panic=1 quiet' </dev/null \
		| tr -d '\r' >"$BUILD/guest-$name.log" 2>&1 || rc=$?
	echo "$name $pkg $(( $(date +%s) - start ))" >>"$BUILD/guests.txt"
	if [ "$rc" -eq 124 ]; then
		G_REASON="killed after ${GUEST_TIMEOUT}s"
	else
		G_REASON="qemu exit $rc"
	fi
	local info
	info=$(grep -o 'KE-GUEST-INFO .*' "$BUILD/guest-$name.log" | head -n 1 || true)
	if [ -n "$info" ]; then
		G_RELEASE=$(infofield release "$info")
		G_ARCH=$(infofield arch "$info")
		G_BTF=$(infofield btf "$info")
	else
		G_REASON="$G_REASON; no KE-GUEST-INFO line, release and btf read from the kernel package"
	fi

	if ! grep -q '^KE-GUEST-EXIT 0$' "$BUILD/guest-$name.log" || grep -q -- '^--- FAIL' "$BUILD/guest-$name.log"; then
		echo "test-kernels: FAIL in the $pkg guest (qemu exit $rc):" >&2
		grep -E -- '^\s*--- FAIL|_test.go:[0-9]+:|KE-GUEST|panic|Kernel panic' "$BUILD/guest-$name.log" >&2 || tail -n 40 "$BUILD/guest-$name.log" >&2
		return 1
	fi
	if ! grep -q '^MATRIX|' "$BUILD/guest-$name.log"; then
		echo "test-kernels: no MATRIX rows in $BUILD/guest-$name.log" >&2
		return 1
	fi
}

# infofield KEY LINE: the value of KEY=value in a KE-GUEST-INFO line.
infofield() {
	local f
	for f in $2; do
		case $f in "$1"=*) printf '%s' "${f#*=}" ;; esac
	done
}

# summary NAME ARCH RELEASE BTF LOG STATUS REASON: prints the leg's line,
# "guest NAME ARCH RELEASE btf=yes|no: N passed, M failed", counting the
# top-level "--- PASS:" and "--- FAIL:" lines of LOG (go test -v; subtests
# are indented). STATUS is the test binary's exit status, empty when the
# leg never reported one (guest killed, panicked or not booted): that, or
# a non-zero status without a FAIL line, counts as one more failure, and
# REASON follows in parentheses.
summary() {
	local name=$1 arch=$2 release=$3 btf=$4 log=$5 status=$6 reason=$7
	local passed=0 failed=0 note=""
	if [ -f "$log" ]; then
		passed=$(grep -c -- '^--- PASS: ' "$log" || true)
		failed=$(grep -c -- '^--- FAIL: ' "$log" || true)
	fi
	if [ -z "$status" ]; then
		failed=$((failed + 1))
		note=" (did not report back: $reason; counted as 1 failed)"
	elif [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then
		failed=1
		note=" (test binary exit $status without a --- FAIL line)"
	fi
	printf 'guest %s %s %s btf=%s: %d passed, %d failed%s\n' \
		"$name" "$arch" "$release" "$btf" "$passed" "$failed" "$note"
}

fail=0
rm -f "$BUILD"/guest-*.log "$BUILD/guests.txt" "$BUILD/summary.txt"
logs=("$BUILD/host.log")
host_btf=no
[ -e /sys/kernel/btf/vmlinux ] && host_btf=yes
summary host "$(uname -m)" "$(uname -r)" "$host_btf" "$BUILD/host.log" "$host_rc" "" >>"$BUILD/summary.txt"
for k in "${KERNELS[@]}"; do
	IFS='|' read -r name pattern suite expect down tests <<<"$k"
	case " $SELECTED " in *" $name "*) ;; *) continue ;; esac
	if [ -z "$tests" ] || [ -n "${KE_MATRIX_RUN+x}" ]; then tests=$RUN; fi
	guest "$name" "$pattern" "$suite" "$expect" "$down" "$tests" || fail=1
	logs+=("$BUILD/guest-$name.log")
	status=""
	if [ -f "$BUILD/guest-$name.log" ]; then
		status=$(grep -o 'KE-GUEST-EXIT [0-9]*' "$BUILD/guest-$name.log" | tail -n 1 | cut -d' ' -f2 || true)
	fi
	summary "$name" "$G_ARCH" "$G_RELEASE" "$G_BTF" "$BUILD/guest-$name.log" "$status" "$G_REASON" >>"$BUILD/summary.txt"
done

# The table: one row per MATRIX line of every run.
table() {
	awk -F'|' 'BEGIN { printf "%-20s %-26s %-10s %-30s %s\n", "KERNEL", "CONFIG", "MODE", "ATTACH", "RESULT" }
		/^MATRIX\|/ { printf "%-20s %-26s %-10s %-30s %s\n", $2, $3, $4, $5, $6 }' "$@"
}
echo
table "${logs[@]}" | tee "$BUILD/matrix.txt"
echo
echo "host $(uname -r): ${host_secs}s"
[ -f "$BUILD/guests.txt" ] && awk '{ printf "guest %s (%s): %ss (boot + tests, TCG)\n", $1, $2, $3 }' "$BUILD/guests.txt"
echo "logs: ${logs[*]}"
echo
cat "$BUILD/summary.txt"

if [ "$host_rc" -ne 0 ] || grep -q -- '^--- FAIL' "$BUILD/host.log"; then
	echo "test-kernels: FAIL on the host (exit $host_rc):" >&2
	grep -E -- '^\s*--- FAIL|_test.go:[0-9]+:' "$BUILD/host.log" >&2 || tail -n 30 "$BUILD/host.log" >&2
	fail=1
fi
if ! grep -q '^MATRIX|' "$BUILD/host.log"; then
	echo "test-kernels: no MATRIX rows in $BUILD/host.log" >&2
	fail=1
fi
exit "$fail"
