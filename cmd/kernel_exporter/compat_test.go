// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/promslog"
	promslogflag "github.com/prometheus/common/promslog/flag"
	toolkit "github.com/prometheus/exporter-toolkit/web"
	"github.com/prometheus/exporter-toolkit/web/kingpinflag"

	"github.com/kernel-exporter/kernel_exporter/loader"
)

// runArgs runs main's run with args, up to the end of the flag checks
// (checkOnly), and returns its exit code and what it wrote to stderr.
func runArgs(t *testing.T, args ...string) (int, string) {
	t.Helper()
	checkOnly = true
	defer func() { checkOnly = false }()
	var stdout, stderr strings.Builder
	code := run(args, &stdout, &stderr)
	return code, stderr.String()
}

// TestReferenceFlagsParse gives run every flag of cloudflare/ebpf_exporter
// (cmd/ebpf_exporter/main.go) as its README and unit files use them: exit
// 0 with nothing on stderr once every flag is checked (checkOnly) means
// each was accepted.
func TestReferenceFlagsParse(t *testing.T) {
	dir := t.TempDir()
	ref := []string{
		"--config.dir=" + dir, "--config.names=biolatency,timers",
		"--config.check", "--config.strict",
		"--debug", "--log.no-timestamps",
		"--web.listen-address=:9435", "--web.telemetry-path=/metrics",
		"--capabilities.keep=cap_syslog,cap_bpf",
		"--btf.path=" + dir + "/vmlinux",
		"--config.skip-cache-size=1024",
	}
	if err := os.WriteFile(dir+"/vmlinux", []byte("BTF"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stderr := runArgs(t, ref...)
	if code != 0 || stderr != "" {
		t.Fatalf("run(reference flags) = %d, stderr %q; want 0 and no flag error", code, stderr)
	}
	// Each alone, and the compatibility switch with the narrower flag.
	for _, a := range append(ref[2:], "--compat.ebpf-exporter", "--config.default-namespace=node_bpf", "--web.listen-address=fd://0", "--capabilities.keep=none", "--capabilities.keep=all", "--capabilities.keep=cap_perfmon,cap_ipc_lock") {
		code, stderr := runArgs(t, "--config.dir="+dir, "--config.names=a", a)
		if code != 0 || stderr != "" {
			t.Errorf("run(%s) = %d, stderr %q; want 0 and no flag error", a, code, stderr)
		}
	}
}

// TestReferenceFlagsErrors checks that values the reference takes and this
// exporter cannot honour are errors naming the flag and what replaces it.
func TestReferenceFlagsErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ arg, want string }{
		{"--config.skip-cache-size=-1", "--config.skip-cache-size -1: must be 0 to 1073741824"},
		{"--config.skip-cache-size=2000000000", "--config.skip-cache-size 2000000000: must be 0 to"},
		{"--web.listen-address=fd://3", "--web.listen-address fd://3: of cloudflare/ebpf_exporter's fd://<n> addresses only fd://0, given alone, is accepted (as --web.systemd-socket"},
		{"--config.default-namespace=9lives", `--config.default-namespace: invalid metric namespace "9lives"`},
		{"--config.default-namespace=" + strings.Repeat("n", 65), "--config.default-namespace: longer than 64 bytes (65)"},
	} {
		code, stderr := runArgs(t, "--config.dir="+dir, "--config.names=a", tc.arg)
		if code != 2 || !strings.HasPrefix(stderr, "kernel_exporter: error: "+tc.want) {
			t.Errorf("run(%s) = %d, stderr %q; want 2 and an error starting %q", tc.arg, code, stderr, tc.want)
		}
	}
	// Two addresses, one of them fd://0: the socket cannot be mixed.
	code, stderr := runArgs(t, "--config.dir="+dir, "--config.names=a", "--web.listen-address=fd://0", "--web.listen-address=:9435")
	if code != 2 || !strings.Contains(stderr, "only fd://0, given alone") {
		t.Errorf("run(fd://0 and :9435) = %d, stderr %q", code, stderr)
	}
}

// parsedRef is what parseRef returns.
type parsedRef struct {
	log    *refLogFlags
	load   *refLoadFlags
	logCfg *promslog.Config
	web    *toolkit.FlagConfig
}

// parseRef parses args with the flags of the reference and applies them
// as run does.
func parseRef(t *testing.T, args ...string) parsedRef {
	t.Helper()
	app := kingpin.New("test", "")
	r := parsedRef{logCfg: &promslog.Config{}}
	promslogflag.AddFlags(app, r.logCfg)
	r.log = addRefLogFlags(app)
	c := app.Command("serve", "").Default()
	r.web = kingpinflag.AddFlags(c, DefaultAddress)
	r.load = addRefLoadFlags(c)
	if _, err := app.Parse(args); err != nil {
		t.Fatalf("parse %v: %v", args, err)
	}
	for _, err := range []error{r.log.apply(r.logCfg), r.load.check(), applySystemdFD(r.web)} {
		if err != nil {
			t.Fatalf("apply %v: %v", args, err)
		}
	}
	return r
}

// TestReferenceFlagsMeaning checks what each flag does.
func TestReferenceFlagsMeaning(t *testing.T) {
	// --debug: debug level.
	if got := parseRef(t, "--debug").logCfg.Level.String(); got != "debug" {
		t.Errorf("--debug: level %q, want debug", got)
	}
	if got := parseRef(t).logCfg.Level.String(); got != "info" {
		t.Errorf("no --debug: level %q, want info", got)
	}

	// --log.no-timestamps: no time= in a line; without it there is one.
	for _, noTS := range []bool{false, true} {
		args := []string{}
		if noTS {
			args = append(args, "--log.no-timestamps")
		}
		r := parseRef(t, args...)
		var buf bytes.Buffer
		r.logCfg.Writer = &buf
		log := r.log.logger(promslog.New(r.logCfg))
		log.With("config", "a").WithGroup("g").Info("hello", "k", "v")
		line := buf.String()
		if !strings.Contains(line, "hello") || !strings.Contains(line, "config=a") || !strings.Contains(line, "g.k=v") {
			t.Errorf("no-timestamps=%v: line %q lacks the message or its attributes", noTS, line)
		}
		if got := strings.Contains(line, "time="); got == noTS {
			t.Errorf("no-timestamps=%v: line %q has time= %v", noTS, line, got)
		}
	}

	// fd://0: systemd's socket.
	web := parseRef(t, "--web.listen-address=fd://0").web
	if !*web.WebSystemdSocket || len(*web.WebListenAddresses) != 0 {
		t.Errorf("fd://0: systemd socket %v, addresses %v; want true, none", *web.WebSystemdSocket, *web.WebListenAddresses)
	}
	web = parseRef(t, "--web.listen-address=:9435").web
	if *web.WebSystemdSocket || len(*web.WebListenAddresses) != 1 {
		t.Errorf(":9435: systemd socket %v, addresses %v", *web.WebSystemdSocket, *web.WebListenAddresses)
	}

	// The namespace of configs that set none.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, ""},
		{[]string{"--compat.ebpf-exporter"}, "ebpf_exporter"},
		{[]string{"--config.default-namespace=node_bpf"}, "node_bpf"},
		{[]string{"--compat.ebpf-exporter", "--config.default-namespace=node_bpf"}, "node_bpf"},
	} {
		if got := parseRef(t, tc.args...).load.namespace(); got != tc.want {
			t.Errorf("%v: namespace %q, want %q", tc.args, got, tc.want)
		}
	}

	// --config.skip-cache-size: accepted, noted once in the log.
	ref := parseRef(t, "--config.skip-cache-size=4096").load
	var buf bytes.Buffer
	ref.skipCacheNote(slog.New(slog.NewTextHandler(&buf, nil)))
	if ref.SkipCacheSize != 4096 || !strings.Contains(buf.String(), "--decoder.cache-size") {
		t.Errorf("skip-cache-size: %d, log %q", ref.SkipCacheSize, buf.String())
	}
}

// TestReferenceCapabilitiesKeep checks that --capabilities.keep takes the
// reference's values: libcap names (lowercase cap_*), comma-separated,
// "all" and "none".
func TestReferenceCapabilitiesKeep(t *testing.T) {
	for _, tc := range []struct {
		in   string
		caps []int // capability numbers, capabilities(7)
		all  bool
	}{
		{"none", nil, false},
		{"all", nil, true},
		{"cap_syslog", []int{34}, false},
		{"cap_perfmon,cap_ipc_lock", []int{38, 14}, false},
		{"cap_syslog,cap_bpf", []int{34, 39}, false},
		{"cap_sys_admin,cap_net_admin,cap_sys_resource,cap_dac_read_search", []int{21, 12, 24, 2}, false},
	} {
		keep, all, err := loader.ParseKeep(tc.in)
		var want loader.CapSet
		for _, c := range tc.caps {
			want |= 1 << c
		}
		if err != nil || all != tc.all || keep != want {
			t.Errorf("ParseKeep(%q) = %#x, %v, %v; want %#x, %v", tc.in, keep, all, err, want, tc.all)
		}
	}
}
