// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/internal/testenv"
	"github.com/kernel-exporter/kernel_exporter/programs"
)

// imageRunFlags are the podman run flags the container needs, as
// docs/kubernetes.md lists them for a DaemonSet: named capabilities (no
// --privileged), the host's pid and cgroup namespaces (pid and cgroup
// labels, and /proc of host processes for uprobes), the host network (the
// node's port), and read-only bind mounts of BTF, tracefs and the cgroup
// hierarchy. Podman's default seccomp profile is kept: it allows bpf() and
// perf_event_open() to a container holding CAP_BPF and CAP_PERFMON.
//
// The two ulimits and --runtime runc are for this sandbox, not the image:
// podman's default nofile/nproc limits need CAP_SYS_RESOURCE to set, and
// crun refuses a hybrid cgroup v1/v2 host.
var imageRunFlags = []string{
	"--runtime", "runc",
	"--ulimit", "nofile=20000:20000", "--ulimit", "nproc=32768:32768",
	"--cap-drop=ALL", "--cap-add=BPF,PERFMON,SYS_ADMIN,SYSLOG,DAC_READ_SEARCH",
	"--pid=host", "--cgroupns=host", "--network=host",
	"-v", "/sys/kernel/btf:/sys/kernel/btf:ro",
	"-v", "/sys/kernel/tracing:/sys/kernel/tracing:ro",
	"-v", "/sys/fs/cgroup:/sys/fs/cgroup:ro",
}

// TestImagePodman builds the OCI archive with make image for this machine's
// architecture (or takes KE_IMAGE_ARCHIVE), builds it a second time and
// checks the two archives are byte-identical, loads it with podman load,
// checks the image config (entrypoint, default arguments, labels), runs it
// with imageRunFlags and the default programs plus syscalls, and checks
// from the host that kernel_exporter_config_up is 1 for each, and that n
// failing kill() calls made on the host move
// kernel_syscall_errors_total{syscall="kill",errno="ESRCH"} by exactly n.
// The container and the image are removed at the end.
func TestImagePodman(t *testing.T) {
	for _, tool := range []string{"podman", "runc"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.SkipOrFail(t, "%s not found: the image test needs Debian's podman and runc (%v)", tool, err)
		}
	}
	if _, err := os.Stat("/sys/kernel/tracing/events"); err != nil {
		if err := unix.Mount("tracefs", "/sys/kernel/tracing", "tracefs", 0, ""); err != nil {
			t.Fatalf("tracefs is not mounted at /sys/kernel/tracing and mounting it failed: %v", err)
		}
	}

	archive := os.Getenv("KE_IMAGE_ARCHIVE")
	if archive == "" {
		archive = makeImage(t, t.TempDir())
		again := makeImage(t, t.TempDir())
		a, b := fileSHA256(t, archive), fileSHA256(t, again)
		if a != b {
			t.Errorf("make image is not reproducible: %s has sha256 %s, a second build %s", archive, a, b)
		} else {
			progress(t, "image: two builds are byte-identical (sha256 %s)", a)
		}
	}

	out := podman(t, 2*time.Minute, "load", "-i", archive)
	ref := ""
	for _, line := range strings.Split(out, "\n") {
		if r, ok := strings.CutPrefix(line, "Loaded image: "); ok {
			ref = strings.TrimSpace(r)
		}
	}
	if ref == "" {
		t.Fatalf("podman load -i %s printed no \"Loaded image:\" line:\n%s", archive, out)
	}
	id := strings.TrimSpace(podman(t, time.Minute, "image", "inspect", "--format", "{{.Id}}", ref))
	t.Cleanup(func() { _, _ = exec.Command("podman", "rmi", "-f", id).CombinedOutput() })
	progress(t, "image: loaded %s (%s)", ref, id)
	checkImageConfig(t, ref)
	checkImageLicences(t, id)

	name := fmt.Sprintf("kernel_exporter-it-%d", os.Getpid())
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	progs := append(append([]string{}, programs.Default...), "syscalls")
	argv := append([]string{"run", "--rm", "--name", name}, imageRunFlags...)
	argv = append(argv, id, "--web.listen-address="+addr, "--programs="+strings.Join(progs, ","))
	t.Logf("podman %s", strings.Join(argv, " "))
	e := &Exporter{t: t, URL: "http://" + addr, logs: &syncBuffer{}, done: make(chan error, 1)}
	cmd := exec.Command("podman", argv...)
	cmd.Stdout, cmd.Stderr = e.logs, e.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { e.done <- cmd.Wait() }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		_, _ = exec.Command("podman", "stop", "-t", "10", name).CombinedOutput()
		select {
		case <-e.done:
		case <-time.After(30 * time.Second):
			_, _ = exec.Command("podman", "rm", "-f", name).CombinedOutput()
			t.Errorf("container %s did not stop within 30 s", name)
		}
	}
	t.Cleanup(stop)
	if err := waitServing(e.URL, e.done, 90*time.Second); err != nil {
		t.Fatalf("container: %v\n%s", err, e.logs)
	}
	progress(t, "image: container %s serves on %s", name, addr)

	before := e.Scrape()
	for _, c := range progs {
		if v := before.Value("kernel_exporter_config_up", L("config", c)); v != 1 {
			t.Errorf("in the container, kernel_exporter_config_up{config=%q} = %v, want 1\n%s", c, v, e.logs)
		}
	}
	const (
		n       = 1000
		noPid   = 1 << 30 // above any pid_max: kill() fails with ESRCH
		metric  = "kernel_syscall_errors_total"
		syscall = "kill"
	)
	for i := range n {
		if err := unix.Kill(noPid, 0); !errors.Is(err, unix.ESRCH) {
			t.Fatalf("kill(%d, 0) #%d = %v, want ESRCH", noPid, i, err)
		}
	}
	after := e.Scrape()
	esrch := L("syscall", syscall, "errno", "ESRCH")
	if d := after.Value(metric, esrch) - before.Value(metric, esrch); d != n {
		t.Errorf("%s{syscall=kill,errno=ESRCH} scraped from the container moved by %v after %d failing kill() on the host, want exactly %d\n%s",
			metric, d, n, n, after.seriesDump(metric))
	} else {
		progress(t, "image: %s{syscall=kill,errno=ESRCH} moved by %v, as expected", metric, d)
	}
	stop()
	if !strings.Contains(e.logs.String(), "capabilities dropped after attach") {
		t.Errorf("container log has no \"capabilities dropped after attach\" line:\n%s", e.logs)
	}
}

// makeImage runs make image for this machine's architecture into dist and
// returns the archive's path.
func makeImage(t *testing.T, dist string) string {
	t.Helper()
	return makeImageArches(t, dist, runtime.GOARCH, 5*time.Minute)
}

// checkImageConfig checks ref's entrypoint, default arguments, platform
// and OCI labels.
func checkImageConfig(t *testing.T, ref string) {
	t.Helper()
	out := podman(t, time.Minute, "image", "inspect", ref)
	var imgs []struct {
		Architecture string
		Os           string
		Config       struct {
			Entrypoint []string
			Cmd        []string
			Labels     map[string]string
		}
	}
	if err := json.Unmarshal([]byte(out), &imgs); err != nil || len(imgs) != 1 {
		t.Fatalf("podman image inspect %s: %v (%d images)", ref, err, len(imgs))
	}
	img := imgs[0]
	if img.Os != "linux" || img.Architecture != runtime.GOARCH {
		t.Errorf("image platform %s/%s, want linux/%s", img.Os, img.Architecture, runtime.GOARCH)
	}
	if fmt.Sprint(img.Config.Entrypoint) != "[/kernel_exporter]" {
		t.Errorf("entrypoint %q, want [/kernel_exporter]", img.Config.Entrypoint)
	}
	if fmt.Sprint(img.Config.Cmd) != "[--web.listen-address=:19435]" {
		t.Errorf("cmd %q, want [--web.listen-address=:19435]", img.Config.Cmd)
	}
	for _, l := range []string{"org.opencontainers.image.version", "org.opencontainers.image.revision", "org.opencontainers.image.source"} {
		if img.Config.Labels[l] == "" {
			t.Errorf("image has no label %s: %v", l, img.Config.Labels)
		}
	}
	if v := img.Config.Labels["org.opencontainers.image.version"]; !strings.HasSuffix(ref, ":"+v) {
		t.Errorf("image %s: label org.opencontainers.image.version=%q is not its tag", ref, v)
	}
}

// checkImageLicences exports a container of image id (created, never
// started) and checks that its file system holds the licence texts under
// /usr/share/doc/kernel_exporter/: LICENSE (Apache-2.0), the texts of
// LICENSES/ and the third-party notices of the Go modules linked in.
func checkImageLicences(t *testing.T, id string) {
	t.Helper()
	name := fmt.Sprintf("kernel_exporter-licences-%d", os.Getpid())
	podman(t, time.Minute, "create", "--name", name, id)
	defer func() { _, _ = exec.Command("podman", "rm", "-f", name).CombinedOutput() }()
	export := filepath.Join(t.TempDir(), "rootfs.tar")
	podman(t, time.Minute, "export", "-o", export, name)
	f, err := os.Open(export)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files := tarFiles(t, "podman export", f, func(name string) bool {
		return strings.HasPrefix(name, "usr/share/doc/kernel_exporter/")
	}, 4<<20)
	doc := "usr/share/doc/kernel_exporter/"
	for file, want := range map[string]string{
		"LICENSE":                   "Apache License",
		"LICENSES/Apache-2.0.txt":   "Apache License",
		"LICENSES/GPL-2.0-only.txt": "GNU GENERAL PUBLIC LICENSE",
		"LICENSES/BSD-2-Clause.txt": "Redistribution and use in source and binary forms",
		"THIRD_PARTY_LICENSES":      "github.com/cilium/ebpf",
	} {
		if !strings.Contains(files[doc+file], want) {
			t.Errorf("image: /%s%s lacks %q (files under /%s: %d)", doc, file, want, doc, len(files))
		}
	}
	progress(t, "image: licences in /%s: %d files", doc, len(files))
}

// podman runs podman with args within d and returns its combined output.
func podman(t *testing.T, d time.Duration, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	out, err := exec.CommandContext(ctx, "podman", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("podman %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// progress logs a step and prints it to stderr at once (go test holds
// t.Logf output of a package run without -v until the package ends).
func progress(t *testing.T, format string, args ...any) {
	t.Helper()
	t.Logf(format, args...)
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}
