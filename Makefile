# SPDX-License-Identifier: Apache-2.0
# kernel_exporter Makefile. Plain make builds ./kernel_exporter (make build).

.DEFAULT_GOAL := build

# ---------------------------------------------------------------------------
# BPF programs
#
# Every programs/<name>.bpf.c compiles to programs/<name>.bpf.o, which is
# committed and embedded into the binary (see programs/programs.go), so that
# building the exporter needs only Go.
#
# Objects must be byte-identical whoever builds them, from whatever checkout
# path: the toolchain is pinned, and tools/bpf-build.sh compiles in one fixed
# staging directory with repository-relative arguments (clang-19's BTF type
# order otherwise follows the length of the checkout path), then strips DWARF
# (.BTF and .BTF.ext, which CO-RE needs, are kept).
#
# Whether an object is stale is judged by the content of its inputs, never by
# file times: programs/bpf.sum records, for every object, the sha256 of its
# inputs (source, headers, tools/bpf-build.sh, BPF_ARCH) and of its bytes
# (tools/bpf-sum.sh). In a fresh clone every committed object is up to date,
# and make bpf needs no clang.
#
#   make bpf        rebuild the objects whose inputs changed, in place, and
#                   rewrite programs/bpf.sum
#   make bpf-check  rebuild every object into a scratch directory and fail if
#                   a committed one differs, is missing, or programs/bpf.sum
#                   does not match the tree
#   make bpf-deps   install the toolchain (Debian/Ubuntu, used by CI)
# ---------------------------------------------------------------------------

CLANG      ?= clang-19
LLVM_STRIP ?= llvm-strip-19
BPF_ARCH   ?= x86
export CLANG LLVM_STRIP BPF_ARCH

BPF_DIR     := programs
BPF_BUILD   := tools/bpf-build.sh
BPF_SUM     := tools/bpf-sum.sh

BPF_SRCS    := $(sort $(wildcard $(BPF_DIR)/*.bpf.c profile/bpf/*.bpf.c bpfstats/*.bpf.c integration/testdata/fallback/*.bpf.c integration/testdata/perfarray/*.bpf.c integration/testdata/bpfspin/*.bpf.c))

.PHONY: bpf bpf-check bpf-sum-check bpf-deps

# Programs, and the test objects embedded in the integration tests (see
# make test-kernels).
bpf:
	@$(BPF_SUM) update $(BPF_SRCS)

# Fail unless programs/bpf.sum lists exactly the objects of BPF_SRCS with
# their current hashes (no clang needed; the fresh-clone test runs it).
bpf-sum-check:
	@$(BPF_SUM) check $(BPF_SRCS)

# Rebuild every object into a scratch directory and compare it with the one
# in the tree. Also catches a source without an object and the reverse.
bpf-check:
	@set -e; \
	tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	$(BPF_BUILD) "$$tmp" $(BPF_SRCS); \
	fail=0; \
	for src in $(BPF_SRCS); do \
		obj=$${src%.bpf.c}.bpf.o; \
		if [ ! -f "$$obj" ]; then \
			echo "bpf-check: $$src has no object $$obj: run make bpf" >&2; \
			fail=1; continue; \
		fi; \
		if ! cmp -s "$$obj" "$$tmp/$$obj"; then \
			echo "bpf-check: $$obj is stale (differs from a fresh build of $$src): run make bpf" >&2; \
			fail=1; \
		fi; \
	done; \
	for obj in $(wildcard $(BPF_DIR)/*.bpf.o); do \
		if [ ! -f "$${obj%.bpf.o}.bpf.c" ]; then \
			echo "bpf-check: $$obj has no source $${obj%.bpf.o}.bpf.c: delete it or add the source" >&2; \
			fail=1; \
		fi; \
	done; \
	$(BPF_SUM) check $(BPF_SRCS) || fail=1; \
	if [ "$$fail" -ne 0 ]; then exit 1; fi; \
	echo "bpf-check: $(words $(BPF_SRCS)) object(s) up to date"

bpf-deps:
	apt-get install -y clang-19 llvm-19 libbpf-dev

# ---------------------------------------------------------------------------
# End of BPF programs section
# ---------------------------------------------------------------------------

# ---------------------------------------------------------------------------
# Go build, run and tests
#
#   make build   static ./kernel_exporter (CGO_ENABLED=0), programs embedded
#   make run     build, then start with the default bundled programs (root)
#   make test    install test dependencies, check BPF objects, gofmt, vet,
#                then every test: unit and integration (root, real BPF),
#                every fuzz target (make fuzz, FUZZ_TIME each) and the
#                kernel matrix (make test-kernels)
# ---------------------------------------------------------------------------

# Any Go >= 1.21 builds the module: it fetches the toolchain go.mod names
# through the module proxy. tools/ensure-go.sh finds one, or installs
# Debian's golang-1.23 from bookworm-backports on a machine without Go
# (Debian 12's own golang is 1.19, too old). Debian's Go defaults to
# GOTOOLCHAIN=local, which forbids that fetch: auto allows it.
ifndef GO
GO := $(shell tools/ensure-go.sh)
endif
ifeq ($(strip $(GO)),)
$(error no Go >= 1.21 found or installed: see tools/ensure-go.sh)
endif
export PATH := $(dir $(GO)):$(PATH)
export GOTOOLCHAIN ?= auto
BINARY    := kernel_exporter
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION  ?= $(shell git rev-parse --verify -q HEAD 2>/dev/null || echo unknown)
BRANCH    ?= $(shell git rev-parse --abbrev-ref HEAD 2>/dev/null || echo unknown)
# The build date is the last commit's (or SOURCE_DATE_EPOCH's), never the
# clock's, so that two builds of one commit are byte-identical.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
export SOURCE_DATE_EPOCH
BUILD_DATE := $(shell date -u -d @$(SOURCE_DATE_EPOCH) +%Y%m%d-%H:%M:%S)
LDFLAGS   := -s -w \
	-X github.com/prometheus/common/version.Version=$(patsubst v%,%,$(VERSION)) \
	-X github.com/prometheus/common/version.Revision=$(REVISION) \
	-X github.com/prometheus/common/version.Branch=$(BRANCH) \
	-X github.com/prometheus/common/version.BuildUser=make \
	-X github.com/prometheus/common/version.BuildDate=$(BUILD_DATE)
RUN_ARGS  ?=
# Nothing is installed with its Recommends (tools/install-debs.sh): what the
# tests need is named, ca-certificates (Go modules over HTTPS) and kmod
# (modprobe, for kernels that load veth and friends as modules) included.
TEST_DEBS := ca-certificates kmod clang-19 llvm-19 libbpf-dev prometheus iptables ethtool iproute2 util-linux gcc libc6-dev systemtap-sdt-dev busybox-static systemd openssl chromium tmux podman runc skopeo etcd-server python3-minimal pci.ids libbpf-tools bpftool debootstrap systemd-container
# QEMU for the kernel matrix (headless: no GUI libraries, as nothing is
# installed with its Recommends).
QEMU_DEBS := qemu-system-x86

.PHONY: build run test test-deps check vet fmt-check fuzz

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BINARY) ./cmd/kernel_exporter

run: build
	./$(BINARY) $(RUN_ARGS)

# Installs only what is missing, so it is quick on a prepared machine: the
# Debian packages, the Debian 12 tree TestSystemdDeb boots under
# systemd-nspawn (debootstrap, once, about 200 MB in .cache/nspawn), then
# the kube-apiserver the Kubernetes tests run and the OpenTelemetry
# Collector the OTLP tests send to (built once from the Go module proxy,
# cached in .cache/kube-apiserver and .cache/otelcol).
# tools/install-debs.sh installs without Recommends and leaves no service
# running or enabled (etcd, prometheus, podman.socket...): the tests start
# their own.
test-deps:
	@missing=""; for p in $(TEST_DEBS) $(QEMU_DEBS); do \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then apt-get update -qq && tools/install-debs.sh $$missing; fi
	tools/heartbeat.sh tools/nspawn/debian-tree.sh .cache/nspawn/debian12
	$(MAKE) --no-print-directory kube-apiserver
	$(MAKE) --no-print-directory otelcol

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed: $$out" >&2; exit 1; fi

vet:
	$(GO) vet ./...

check: bpf-check fmt-check vet

# The whole suite: unit and integration tests on this kernel, every fuzz
# target for FUZZ_TIME, then the kernel matrix (Debian's 5.10 and 6.1
# kernels under QEMU). tools/heartbeat.sh prints a line whenever a phase has been silent
# for 30 s. Beside fuzz and the kernel matrix, tools/alert-soak.sh runs
# integration's TestAlertSoak in the background (a real Prometheus
# evaluating deploy/prometheus's rules for KE_ALERT_SOAK_DURATION, 20m),
# whose output is printed at the end; it is stopped however the phases end.
FUZZ_TIME ?= 20s

test: test-deps check
	tools/heartbeat.sh env CGO_ENABLED=0 $(GO) test -count=1 -timeout 40m ./...
	@GO=$(GO) tools/alert-soak.sh start && trap 'GO=$(GO) tools/alert-soak.sh stop' EXIT && trap 'exit 130' INT TERM HUP && \
	$(MAKE) --no-print-directory fuzz && \
	$(MAKE) --no-print-directory test-kernels && \
	GO=$(GO) tools/alert-soak.sh wait

# Every Go fuzz target (func FuzzXxx) for FUZZ_TIME each; see tools/fuzz.sh.
fuzz:
	GO=$(GO) FUZZ_TIME=$(FUZZ_TIME) tools/heartbeat.sh tools/fuzz.sh

# ---------------------------------------------------------------------------
# Kernel test matrix
#
#   make test-kernels  run the TestMatrix* integration tests on this kernel,
#                      then in Debian 11's 5.10 and Debian 12's 6.1 cloud
#                      kernels booted under QEMU (TCG), and print a table per program, attach mode and
#                      kernel, then a line per kernel: "guest NAME ARCH RELEASE
#                      btf=yes|no: N passed, M failed"
#                      (tools/kernel-matrix/run.sh, docs/kernel-matrix.md).
#                      Kernel packages are cached in .cache/kernels.
# ---------------------------------------------------------------------------

.PHONY: test-kernels

test-kernels: test-deps
	GO=$(GO) tools/kernel-matrix/run.sh

# ---------------------------------------------------------------------------
# End of kernel test matrix section
# ---------------------------------------------------------------------------

# ---------------------------------------------------------------------------
# Benchmarks (root: they create BPF maps and load programs). Figures and how
# to read them: docs/performance.md.
#
#   make bench           scrape path: collect 1k..1M-entry maps through the
#                        batch and the per-key iterate path (ns and allocs
#                        per entry, batch/iterate ratio), the kernel's own
#                        batch read, and getpid() with and without the
#                        syscalls program
#   make bench-overhead  BPF run time per event (run_time_ns / run_cnt) of
#                        every bundled program under a standard local
#                        workload, with kernel.bpf_stats_enabled=1
#   make bench-budget    what the CPU budget's sampled statistics add per
#                        event, and every bundled program's BPF CPU seconds
#                        per second under the integration tests' loads (the
#                        figures behind --bpf.cpu-budget's default)
#   make bench-profile   what a whole-host CPU profile costs at 19 and 99 Hz:
#                        BPF ns per sample, BPF and exporter CPU, added RSS,
#                        share of user frames resolved (package profile)
#   make bench-bcc       BPF ns per event of runqlat, softirq, syscalls and
#                        biolatency against Debian's libbpf-tools (runqlat,
#                        softirqs -d, syscount, biolatency -D) on the same
#                        events, in both attach orders, BCC_RUNS times,
#                        with a minimal program per hook as the floor
#   make bench-memory    peak resident memory (VmHWM), Go heap peak and first
#                        against later scrape time of the built binary with a
#                        100k and a 1M-key map, every scrape checked for every
#                        key and the exact sum; beside the reference exporter
#                        when REF_EXPORTER names its binary
#   make bench-idle      resident memory after a few scrapes and CPU time of
#                        the built binary with the default programs, idle
#                        (no scrapes) for IDLE_SECONDS
#   make bench-startup   time from exec to the first scrape, default
#                        programs, 10 start-ups
#
# BENCH_TIME (default 5x) is go test -benchtime for the collect benchmarks;
# OVERHEAD_SECONDS (default 10) is how long the workload runs (also per
# attach order in bench-bcc); MEMORY_KEYS (default 100000,1000000) the map
# sizes of bench-memory, MEMORY_COUNT (default 1) its runs.
# ---------------------------------------------------------------------------

BENCH_TIME       ?= 5x
OVERHEAD_SECONDS ?= 10
BCC_RUNS         ?= 3
MEMORY_KEYS      ?= 100000,1000000
MEMORY_COUNT     ?= 1
IDLE_SECONDS     ?= 300
REF_EXPORTER     ?=

.PHONY: bench bench-overhead bench-budget bench-profile bench-bcc bench-memory bench-idle bench-startup

bench:
	CGO_ENABLED=0 $(GO) test -run '^$$' -bench 'Collect|ReadOnly' -benchtime $(BENCH_TIME) -timeout 60m ./collector/
	CGO_ENABLED=0 $(GO) test -run '^$$' -bench GetpidOverhead -count 3 -timeout 10m ./exporter/

bench-overhead:
	KE_OVERHEAD_SECONDS=$(OVERHEAD_SECONDS) CGO_ENABLED=0 $(GO) test -run '^$$' -bench ProgramOverhead -benchtime 1x -timeout 30m ./exporter/

bench-profile:
	KE_PROFILE_SECONDS=$(OVERHEAD_SECONDS) CGO_ENABLED=0 $(GO) test -run '^$$' -bench ProfileCost -benchtime 1x -timeout 30m ./profile/

bench-bcc:
	KE_BCC_SECONDS=$(OVERHEAD_SECONDS) CGO_ENABLED=0 $(GO) test -run '^$$' -bench BCCSideBySide -benchtime 1x -count $(BCC_RUNS) -timeout 60m ./integration/

bench-budget:
	CGO_ENABLED=0 $(GO) test -run '^$$' -bench SamplingCost -benchtime 1x -timeout 10m ./budget/
	KE_BUDGET_SECONDS=$(OVERHEAD_SECONDS) CGO_ENABLED=0 $(GO) test -run '^$$' -bench BundledCPU -benchtime 1x -timeout 30m ./budget/

bench-memory: build
	BINARY=$(CURDIR)/$(BINARY) REF_EXPORTER=$(REF_EXPORTER) KEYS=$(MEMORY_KEYS) COUNT=$(MEMORY_COUNT) GO=$(GO) tools/bench-memory.sh

bench-idle: build
	KERNEL_EXPORTER_BINARY=$(CURDIR)/$(BINARY) KE_IDLE_SECONDS=$(IDLE_SECONDS) CGO_ENABLED=0 \
		$(GO) test -run '^$$' -bench '^BenchmarkIdle$$' -benchtime 1x -timeout 60m ./integration/

bench-startup: build
	KERNEL_EXPORTER_BINARY=$(CURDIR)/$(BINARY) CGO_ENABLED=0 \
		$(GO) test -run '^$$' -bench '^BenchmarkStartup$$' -benchtime 10x -timeout 10m ./integration/

# ---------------------------------------------------------------------------
# End of benchmarks section
# ---------------------------------------------------------------------------

# ---------------------------------------------------------------------------
# Install and release
#
#   make install    (root) the static binary to $(DESTDIR)$(PREFIX)/bin, the
#                   systemd unit (ExecStart under $(PREFIX)) to
#                   $(SYSTEMD_UNIT_DIR), the sysusers file to
#                   $(SYSUSERS_DIR)/kernel_exporter.conf, an empty
#                   $(CONFIG_DIR)/ for user programs (existing files are
#                   kept), and the headers programs are built with
#                   (libbpf's in bpf/, with their COPYING) in
#                   $(PREFIX)/share/kernel_exporter/include (where
#                   kernel_exporter new finds them). Starts nothing.
#   make uninstall  removes them ($(CONFIG_DIR) only when empty).
#   make release    into $(DIST)/: for each of $(RELEASE_ARCHES), a tarball
#                   kernel_exporter-<version>.linux-<arch>.tar.gz (binary,
#                   README.md, docs/, licences, the kit for writing
#                   programs) and a .deb
#                   (nfpm $(NFPM_VERSION), deploy/nfpm.yaml), and
#                   sha256sums.txt; see tools/release.sh. <version> is
#                   git describe without a leading v.
# ---------------------------------------------------------------------------

PREFIX           ?= /usr/local
DESTDIR          ?=
SYSTEMD_UNIT_DIR ?= /etc/systemd/system
SYSUSERS_DIR     ?= /usr/lib/sysusers.d
CONFIG_DIR       ?= /etc/kernel_exporter
DIST             ?= dist
RELEASE_ARCHES   ?= amd64 arm64
# Fetched through the module proxy by go run, never installed globally.
NFPM_VERSION     ?= v2.45.2
DIST_VERSION     := $(patsubst v%,%,$(VERSION))
# Debian versions start with a digit: a describe that is not a tag (a
# commit hash) becomes 0~git<hash>; hyphens (1.2.0-3-gabc, -dirty) become +.
DEB_VERSION      := $(shell printf '%s' '$(DIST_VERSION)' | sed -e '/^[0-9][0-9]*\./!s/^/0~git/' -e 's/-/+/g')

.PHONY: install uninstall release

install: build
	install -D -m 0755 $(BINARY) $(DESTDIR)$(PREFIX)/bin/$(BINARY)
	install -d -m 0755 $(DESTDIR)$(SYSTEMD_UNIT_DIR)
	sed 's|^ExecStart=[^ ]*/kernel_exporter|ExecStart=$(PREFIX)/bin/$(BINARY)|' deploy/kernel_exporter.service \
		>$(DESTDIR)$(SYSTEMD_UNIT_DIR)/kernel_exporter.service
	chmod 0644 $(DESTDIR)$(SYSTEMD_UNIT_DIR)/kernel_exporter.service
	install -D -m 0644 deploy/kernel_exporter.sysusers $(DESTDIR)$(SYSUSERS_DIR)/kernel_exporter.conf
	[ -d $(DESTDIR)$(CONFIG_DIR) ] || install -d -m 0755 $(DESTDIR)$(CONFIG_DIR)
	for h in $$(cd include && find . -name '*.h' -o -name COPYING); do \
		install -D -m 0644 include/$$h $(DESTDIR)$(PREFIX)/share/kernel_exporter/include/$$h; \
	done
	@echo "installed; to run it: systemd-sysusers && systemctl daemon-reload && systemctl enable --now kernel_exporter"

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/$(BINARY) $(DESTDIR)$(SYSTEMD_UNIT_DIR)/kernel_exporter.service \
		$(DESTDIR)$(SYSUSERS_DIR)/kernel_exporter.conf
	rm -rf $(DESTDIR)$(PREFIX)/share/kernel_exporter/include
	-rmdir $(DESTDIR)$(PREFIX)/share/kernel_exporter 2>/dev/null
	@if [ -d $(DESTDIR)$(CONFIG_DIR) ]; then \
		rmdir $(DESTDIR)$(CONFIG_DIR) 2>/dev/null || echo "kept $(DESTDIR)$(CONFIG_DIR): not empty"; \
	fi

release:
	GO=$(GO) VERSION=$(DIST_VERSION) DEB_VERSION=$(DEB_VERSION) LDFLAGS='$(LDFLAGS)' DIST=$(DIST) \
		ARCHES='$(RELEASE_ARCHES)' NFPM_VERSION=$(NFPM_VERSION) tools/heartbeat.sh tools/release.sh

# ---------------------------------------------------------------------------
# End of install and release section
# ---------------------------------------------------------------------------

# ---------------------------------------------------------------------------
# Container image
#
#   make image   $(DIST)/kernel_exporter-<version>.oci.tar: an OCI archive
#                (podman load -i FILE, podman run oci-archive:FILE) of one
#                image FROM scratch per $(IMAGE_ARCHES), in one image index,
#                built from the static binary as make release builds it.
#                Nothing is pulled; the archive is reproducible
#                (SOURCE_DATE_EPOCH). See tools/image.sh, tools/image/ and
#                docs/kubernetes.md for the capabilities and mounts.
# ---------------------------------------------------------------------------

IMAGE_ARCHES ?= amd64 arm64

.PHONY: image

image:
	GO=$(GO) VERSION=$(DIST_VERSION) REVISION=$(REVISION) LDFLAGS='$(LDFLAGS)' DIST=$(DIST) \
		ARCHES='$(IMAGE_ARCHES)' tools/heartbeat.sh tools/image.sh

# ---------------------------------------------------------------------------
# End of container image section
# ---------------------------------------------------------------------------

# ---------------------------------------------------------------------------
# Kubernetes API server for tests (internal/kubetest)
#
#   make kube-apiserver  builds k8s.io/kubernetes $(KUBE_VERSION)'s
#                        cmd/kube-apiserver from the Go module proxy into
#                        .cache/kube-apiserver/$(KUBE_VERSION)/ (about 10
#                        minutes of 2 cores the first time; cached by
#                        version, a second run does nothing); see
#                        tools/kube-apiserver/build.sh. The tests run it over
#                        Debian's etcd-server.
# ---------------------------------------------------------------------------

KUBE_VERSION ?= v1.37.2

.PHONY: kube-apiserver

kube-apiserver:
	GO=$(GO) KUBE_VERSION=$(KUBE_VERSION) tools/kube-apiserver/build.sh

# ---------------------------------------------------------------------------
# End of Kubernetes API server section
# ---------------------------------------------------------------------------

# ---------------------------------------------------------------------------
# OpenTelemetry Collector for tests (internal/otelcoltest)
#
#   make otelcol  builds an OpenTelemetry Collector $(OTELCOL_VERSION) with
#                 the collector's builder from core modules only (OTLP
#                 receiver, debug exporter), through the Go module proxy,
#                 into .cache/otelcol/$(OTELCOL_VERSION)/otelcol (about 2
#                 minutes the first time; cached by version, a second run
#                 does nothing); see tools/otelcol/build.sh. The span and
#                 OTLP tests receive what the exporter sends with it.
# ---------------------------------------------------------------------------

OTELCOL_VERSION ?= v0.150.0

.PHONY: otelcol

otelcol:
	GO=$(GO) OTELCOL_VERSION=$(OTELCOL_VERSION) tools/otelcol/build.sh

# ---------------------------------------------------------------------------
# End of OpenTelemetry Collector section
# ---------------------------------------------------------------------------
