// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kernel-exporter/kernel_exporter/programs"
)

// TestBadFlags gives every command bad flags, one at a time: each must
// end the run before anything loads with exit code 2 and one line on
// stderr that names the flag (and, where it helps, says what is wanted).
func TestBadFlags(t *testing.T) {
	// A directory, and a file in it that is not one.
	dir := t.TempDir()
	file := filepath.Join(dir, "mine.yaml")
	if err := os.WriteFile(file, []byte("metrics: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Arguments that make each command's other flags valid.
	base := map[string][]string{
		"serve": {"--programs=timers"},
		"dump":  {"dump", "--programs=timers"},
		"hist":  {"hist", "biolatency"},
		"top":   {"top", "syscalls"},
	}
	// Flags every command that loads configs takes.
	load := []struct{ arg, want string }{
		{"--decoder.cache-size=-1", "--decoder.cache-size -1: must be 1 to"},
		{"--decoder.cache-size=0", "--decoder.cache-size 0: must be 1 to"},
		{"--decoder.cache-size=16777217", "--decoder.cache-size 16777217: must be 1 to 16777216"},
		{"--decoder.cache-size=many", `--decoder.cache-size "many": strconv.`},
		{"--config.max-series=0", "--config.max-series 0: must be 1 to"},
		{"--config.load-timeout=abc", `--config.load-timeout "abc": time: invalid duration`},
		{"--config.load-timeout=0s", "--config.load-timeout 0s: must be more than 0"},
		{"--config.load-timeout=2h", "--config.load-timeout 2h0m0s: must be more than 0 and at most 1h0m0s"},
		{"--bpf.memory-budget=lots", `--bpf.memory-budget "lots": not a size`},
		{"--bpf.stats=maybe", `--bpf.stats=maybe: a switch takes no value (give --bpf.stats or --no-bpf.stats)`},
		{"--capabilities.keep=cap_bogus", "--capabilities.keep: "},
		{"--attach.disable=warp", `--attach.disable: unknown attach kind "warp"`},
		{"--attach.to=nofunction", `--attach.to "nofunction": want <config>=<function>`},
		{"--attach.to=other=vfs_read", `--attach.to "other=vfs_read": config "other" is not being started`},
		{"--kube.cache-size=0", "--kube.cache-size 0: must be 1 to"},
		{"--kube.node-name=Node_1", `--kube.node-name "Node_1": not a Kubernetes node name`},
		{"--kube.kubeconfig=" + dir, "--kube.kubeconfig " + `"` + dir + `": not a regular file`},
		{"--kube.kubeconfig=" + dir + "/none", "--kube.kubeconfig " + `"` + dir + `/none": no such file or directory`},
		{"--config.allowed-digests-file=" + dir, "--config.allowed-digests-file: allowed digests file " + dir + ": not a regular file"},
		{"--config.allowed-digests-file=" + file, "--config.allowed-digests-file " + file + ": line 1: not a SHA-256 digest (want 64 hexadecimal digits, optionally after \"sha256:\"; got 8 bytes)"},
		{"--btf.path=" + dir + "/none", "--btf.path " + `"` + dir + `/none": no such file or directory`},
		{"--config.skip-cache-size=-1", "--config.skip-cache-size -1: must be 0 to"},
		{"--config.default-namespace=9lives", `--config.default-namespace: invalid metric namespace "9lives"`},
		{"--log.level=loud", `--log.level "loud": unrecognized log level loud`},
		{"--log.format=xml", `--log.format "xml": unrecognized log format xml`},
		{"--debug=sure", `--debug=sure: a switch takes no value (give --debug or --no-debug)`},
		{"--config.dir", "expected argument for flag '--config.dir'"},
		{"--web.listen-adress=:1", "unknown long flag '--web.listen-adress'"},
		{"--decoder.cache-sise=1", "unknown long flag '--decoder.cache-sise' (did you mean --decoder.cache-size?)"},
		{"--nosuch", "unknown long flag '--nosuch'"},
	}
	type tc struct {
		args []string
		want string
	}
	var cases []tc
	for cmd, b := range base {
		for _, l := range load {
			cases = append(cases, tc{append(append([]string{}, b...), l.arg), l.want})
		}
		_ = cmd
	}
	add := func(cmd, arg, want string) {
		cases = append(cases, tc{append(append([]string{}, base[cmd]...), arg), want})
	}
	// serve
	base["serve"] = nil
	add("serve", "--programs=biolatncy", `--programs: no bundled program "biolatncy" (did you mean biolatency?)`)
	add("serve", "--programs=none,timers", `--programs "none,timers": none runs no bundled program, and cannot be given with others`)
	add("serve", "--programs=,", `--programs ",": no program named`)
	add("serve", "--programs=all,timers,timers", `--programs: "timers" is given twice`)
	add("serve", "--programs=../x", `--programs: config name "../x"`)
	add("serve", "--config.names=mine", "--config.names needs --config.dir")
	cases = append(cases,
		tc{[]string{"--programs=none", "--no-collector.bpf"}, "nothing to run: --programs=none runs no bundled program and no --config.names is given: --no-collector.bpf turns off the host BPF collector, the only other source of metrics"},
		tc{[]string{"--programs=none", "--config.check"}, "nothing to run: --programs=none runs no bundled program and no --config.names is given: --config.check has no config to check"},
		tc{[]string{"dump", "--programs=none"}, "nothing to run: --programs=none runs no bundled program and no --config.names is given"},
		tc{[]string{"--log.level=verbose"}, `--log.level "verbose": unrecognized log level verbose (one of: debug, info, warn, error)`},
		tc{[]string{"--log.format=xml"}, `--log.format "xml": unrecognized log format xml (one of: logfmt, json)`},
	)
	base["serve"] = []string{"--programs=timers"}
	add("serve", "--verbose", "--verbose applies to --config.check only")
	add("serve", "--config.check=yes", `--config.check=yes: a switch takes no value (give --config.check or --no-config.check)`)
	add("serve", "--bpf.cpu-budget=-1", "--bpf.cpu-budget -1: must be 0 (off) to")
	add("serve", "--bpf.cpu-budget=NaN", "--bpf.cpu-budget NaN: must be 0 (off) to")
	add("serve", "--bpf.budget-backoff=soon", `--bpf.budget-backoff "soon": time: invalid duration`)
	add("serve", "--web.telemetry-path=metrics", `--web.telemetry-path "metrics": must start with /`)
	add("serve", "--web.max-requests=-1", "--web.max-requests -1: must be 0 (no limit) to 1048576")
	add("serve", "--web.max-connections=0", "--web.max-connections 0: must be 1 to 1048576")
	add("serve", "--web.max-connections-per-address=0", "--web.max-connections-per-address 0: must be 1 to 1048576")
	add("serve", "--web.max-header-bytes=100", "--web.max-header-bytes 100: must be 8192 to 1048576")
	add("serve", "--web.health-address=0.0.0.0:19436", `--web.health-address "0.0.0.0:19436": not a loopback IP address`)
	add("serve", "--web.health-address=19436", `--web.health-address "19436": want <loopback IP>:<port>`)
	add("serve", "--web.listen-address=nowhere", `--web.listen-address "nowhere": want host:port`)
	add("serve", "--web.listen-address=:nosuchport", `--web.listen-address ":nosuchport": want host:port`)
	add("serve", "--web.listen-address=fd://3", "--web.listen-address fd://3: of cloudflare/ebpf_exporter's fd://<n> addresses only fd://0")
	add("serve", "--web.systemd-socket=maybe", `--web.systemd-socket=maybe: a switch takes no value`)
	add("serve", "--web.config.file="+dir+"/none", "--web.config.file")
	add("serve", "--otlp.metrics.interval=30s", "--otlp.metrics.interval and --otlp.metrics.timeout apply with --otlp.metrics only")
	add("serve", "--otlp.metrics.timeout=1s", "--otlp.metrics.interval and --otlp.metrics.timeout apply with --otlp.metrics only")
	add("serve", "--otlp.profiles.interval=30s", "--otlp.profiles.interval and --otlp.profiles.timeout apply with --otlp.profiles only")
	add("serve", "--duration=3s", "--duration applies to dump and profile record, not serve")
	add("serve", "--interval=1s", "--interval applies to hist and top, not serve")
	add("serve", "--collector.bpf.ttl=0s", "--collector.bpf.ttl 0s: must be 1s to 24h0m0s")
	add("serve", "--collector.bpf.max-programs=0", "--collector.bpf.max-programs 0: must be 1 to 16384")
	add("serve", "--collector.bpf.max-maps=16385", "--collector.bpf.max-maps 16385: must be 1 to 16384")
	add("serve", "--collector.bpf=no", "--collector.bpf=no: a switch takes no value (give --collector.bpf or --no-collector.bpf)")
	add("dump", "--collector.bpf", "--collector.bpf applies to serve, not dump")
	add("serve", "--audit.interval=50ms", "--audit.interval 50ms: must be 100ms to 1h0m0s")
	add("serve", "--audit.interval=2h", "--audit.interval 2h0m0s: must be 100ms to 1h0m0s")
	add("serve", "--audit=no", "--audit=no: a switch takes no value (give --audit or --no-audit)")
	add("dump", "--audit.interval=1s", "--audit.interval applies to serve, not dump")
	cases = append(cases,
		tc{[]string{"kube-ready", "--kube.namespace=monitoring"}, "required flag(s) '--kube.daemonset' not provided"},
		tc{[]string{"kube-ready", "--kube.namespace=Mon", "--kube.daemonset=ke"}, `--kube.namespace "Mon": not a Kubernetes namespace name`},
		tc{[]string{"kube-ready", "--kube.namespace=m", "--kube.daemonset=k_e"}, `--kube.daemonset "k_e": not a Kubernetes object name`},
		tc{[]string{"kube-ready", "--kube.namespace=m", "--kube.daemonset=ke", "--timeout=2h"}, "--timeout 2h0m0s: must be more than 0 and at most 1h0m0s"},
		tc{[]string{"kube-ready", "--kube.namespace=m", "--kube.daemonset=ke", "--kube.kubeconfig=" + dir}, "--kube.kubeconfig " + `"` + dir + `": not a regular file`},
		tc{[]string{"--programs=timers", "--otlp.metrics", "--otlp.metrics.interval=1ms"}, "--otlp.metrics.interval 1ms: must be"},
		tc{[]string{"--programs=timers", "--otlp.profiles", "--otlp.profiles.interval=1ms"}, "--otlp.profiles.interval 1ms: must be"},
		tc{[]string{"--programs=timers", "--otlp.metrics", "--config.check"}, "--otlp.metrics applies to serve only, not --config.check"},
		tc{[]string{"--config.dir=" + file, "--config.names=mine"}, `--config.dir "` + file + `": not a directory`},
	)
	// dump
	add("dump", "--duration=abc", `--duration "abc": time: invalid duration "abc"`)
	add("dump", "--duration=0s", "--duration 0s: must be more than 0")
	add("dump", "--duration=48h", "--duration 48h0m0s: must be more than 0 and at most 24h0m0s")
	add("dump", "--format=xml", `--format "xml": enum value must be one of text,json, got 'xml'`)
	cases = append(cases, tc{[]string{"dump", "--programs=biolatncy"}, `--programs: no bundled program "biolatncy" (did you mean biolatency?)`})
	add("dump", "--programs=runqlat", "flag 'programs' cannot be repeated")
	add("dump", "--web.listen-address=:1", "--web.listen-address applies to serve, not dump")
	add("dump", "--web.config.file=x", "--web.config.file applies to serve, not dump")
	add("dump", "--config.check", "--config.check applies to serve, not dump")
	add("dump", "--config.strict", "--config.strict applies to serve, not dump")
	add("dump", "--otlp.metrics", "--otlp.metrics applies to serve, not dump")
	add("dump", "--otlp.profiles", "--otlp.profiles applies to serve, not dump")
	add("dump", "--bpf.cpu-budget=0.1", "--bpf.cpu-budget applies to serve, not dump")
	add("dump", "--count=1", "--count applies to hist and top, not dump")
	// hist and top
	for _, cmd := range []string{"hist", "top"} {
		add(cmd, "--interval=1ms", "--interval 1ms: must be 100ms to 1h0m0s")
		add(cmd, "--interval=abc", `--interval "abc": time: invalid duration`)
		add(cmd, "--count=-1", "--count -1: must be 0 (until Ctrl-C) to 1000000")
		add(cmd, "--count=lots", `--count "lots": strconv.`)
		add(cmd, "--programs=timers", "--programs applies to serve and dump, not "+cmd)
		add(cmd, "--config.names=x", "--config.names applies to serve and dump, not "+cmd)
		add(cmd, "--web.listen-address=:1", "--web.listen-address applies to serve, not "+cmd)
		add(cmd, "--duration=1s", "--duration applies to dump and profile record, not "+cmd)
		cases = append(cases, tc{[]string{cmd}, "required argument"})
	}
	cases = append(cases,
		tc{[]string{"hist", "biolatncy"}, `hist: no bundled program "biolatncy"`},
		tc{[]string{"top", "biolatency.bio_latency_seconds"}, "top takes a program name, not a metric"},
		tc{[]string{"top", "bpf", "--config.dir=" + dir}, "--config.dir applies to top <program> only, not top bpf"},
		tc{[]string{"top", "--btf.path=/x", "bpf"}, "--btf.path applies to top <program> only, not top bpf"},
		tc{[]string{"hist", "bpf"}, `hist: no bundled program "bpf"`},
		tc{[]string{"privileged-helper", "--programs=timers"}, "--programs applies to serve and dump, not privileged-helper"},
		tc{[]string{"nosuchcommand"}, `unexpected argument "nosuchcommand" (commands: help, serve, dump, hist, top, new, compare, profile record, profile diff, kube-ready)`},
		tc{[]string{"dupm"}, `unexpected argument "dupm" (did you mean dump?)`},
		// profile, profile diff, top cpu and serve's --profile.*
		tc{[]string{"top", "cpu", "--frequency=0"}, "--frequency 0: must be 1 to 999"},
		tc{[]string{"top", "bpf", "--frequency=99"}, "--frequency applies to top cpu only, not top bpf"},
		tc{[]string{"top", "syscalls", "--frequency=99"}, "--frequency applies to top cpu only, not top syscalls"},
		tc{[]string{"top", "timers", "--frequency=0"}, "--frequency applies to top cpu only, not top timers"},
		tc{[]string{"top", "bpf", "--frequency=0"}, "--frequency applies to top cpu only, not top bpf"},
		tc{[]string{"top", "cpu", "--config.dir=/tmp"}, "--config.dir applies to top <program> only, not top cpu"},
		tc{[]string{"top", "cpu", "--interval=1ms"}, "--interval 1ms: must be 100ms to 1h0m0s"},
		tc{[]string{"profile", "--frequency=1000"}, "--frequency 1000: must be 1 to 999"},
		tc{[]string{"profile", "--duration=0s"}, "--duration 0s: must be more than 0"},
		tc{[]string{"profile", "--kernel-only", "--user-only"}, "--kernel-only and --user-only exclude each other"},
		tc{[]string{"profile", "--format=svg"}, `--format "svg": enum value must be one of pprof,folded`},
		tc{[]string{"profile", "--pid=abc"}, `--pid: pid "abc": want a process id`},
		tc{[]string{"profile", "--bpf.memory-budget=lots"}, "--bpf.memory-budget"},
		tc{[]string{"profile", "--web.listen-address=:1"}, "--web.listen-address applies to serve, not profile record"},
		tc{[]string{"profile", "diff", "a"}, "required argument 'new' not provided"},
		tc{[]string{"profile", "diff", "a", "b", "--top=0"}, "--top 0: must be 1 to 10000"},
		tc{[]string{"profile", "diff", "a", "b", "--sort=name"}, `--sort "name": enum value must be one of total,self`},
		tc{[]string{"profile", "diff", "a", "b", "--timeout=0s"}, "--timeout 0s: must be positive"},
		tc{[]string{"profile", "diff", "a", "b", "--max-bytes=2GiB"}, `--max-bytes "2GiB": must be 1KiB to 1GiB`},
		tc{[]string{"profile", "diff", "a,,c", "b"}, `base "a,,c": an empty input in the comma-separated list`},
		tc{[]string{"profile", "diff", "a", "b,"}, `new "b,": an empty input in the comma-separated list`},
		tc{[]string{"--programs=timers", "--profile.frequency=0"}, "--profile.frequency 0: must be 1 to 999"},
		tc{[]string{"--programs=timers", "--profile.max-duration=2h"}, "--profile.max-duration 2h0m0s: must be 1s to 1h0m0s"},
	)

	t.Logf("%d bad command lines", len(cases))
	for _, c := range cases {
		code, stderr := runArgs(t, c.args...)
		line := strings.TrimSuffix(stderr, "\n")
		if code != ExitBadFlags || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(line, "kernel_exporter: error: ") || !strings.HasSuffix(line, ", try --help") {
			t.Errorf("%q: exit %d, stderr %q; want %d and one line \"kernel_exporter: error: ..., try --help\"", c.args, code, stderr, ExitBadFlags)
			continue
		}
		if !strings.Contains(line, c.want) {
			t.Errorf("%q: stderr %q, want it to contain %q", c.args, line, c.want)
		}
	}
}

// TestHelp checks that --help lists the global flags, the flags of serve
// (the default command) and the commands, on stdout, exit 0, and that
// help of one command lists its own flags.
func TestHelp(t *testing.T) {
	var out, errOut strings.Builder
	if code := run([]string{"--help"}, &out, &errOut); code != 0 || errOut.Len() != 0 {
		t.Fatalf("--help: exit %d, stderr %q", code, errOut.String())
	}
	for _, want := range []string{"--log.level", "Flags of serve, the default command:", "--web.listen-address", "--programs", "dump", "hist", "top"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--help lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "privileged-helper") || strings.Contains(out.String(), "bpf.budget-period") {
		t.Errorf("--help shows a hidden command or flag:\n%s", out.String())
	}
	out.Reset()
	if code := run([]string{"dump", "--help"}, &out, &errOut); code != 0 {
		t.Fatalf("dump --help: exit %d", code)
	}
	for _, want := range []string{"--duration", "--format", "--programs", "--log.level"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("dump --help lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "--web.listen-address") || strings.Contains(out.String(), "Flags of serve") {
		t.Errorf("dump --help lists serve's flags:\n%s", out.String())
	}
	// profile's default subcommand is record: profile --help lists
	// record's flags, as README's profile examples use them.
	out.Reset()
	if code := run([]string{"profile", "--help"}, &out, &errOut); code != 0 {
		t.Fatalf("profile --help: exit %d", code)
	}
	for _, want := range []string{"Flags of profile record, the default subcommand:", "--duration=30s", "-o, --output=OUTPUT", "--format=FORMAT", "--frequency=99", "profile diff"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("profile --help lacks %q:\n%s", want, out.String())
		}
	}
}

// TestCommandAfterFlags checks that flags may come before the command:
// kernel_exporter --config.dir /x dump parses as kernel_exporter dump
// --config.dir /x.
func TestCommandAfterFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--programs=timers", "dump", "--duration=abc"}, `--duration "abc"`},
		{[]string{"--config.dir", "/nonexistent", "--log.level=debug", "dump", "--config.names=a"}, `--config.dir "/nonexistent": not a directory`},
		{[]string{"--interval=1ms", "top", "syscalls"}, "--interval 1ms: must be"},
		{[]string{"--log.level", "debug", "hist", "--count=-1", "biolatency"}, "--count -1: must be"},
		// A value that is a command's name stays a value.
		{[]string{"--config.dir", "dump", "--config.names=a", "--programs=none"}, `--config.dir "dump": not a directory`},
	} {
		code, stderr := runArgs(t, tc.args...)
		if code != ExitBadFlags || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", tc.args, code, stderr, ExitBadFlags, tc.want)
		}
	}
}

// TestGoodFlags checks that valid flags pass every check (checkOnly: exit
// 0, nothing on stderr).
func TestGoodFlags(t *testing.T) {
	t.Setenv("NODE_NAME", "Jenkins Agent 1") // not checked: only the flag is
	dir := t.TempDir()
	for _, args := range [][]string{
		nil,
		{"serve"},
		{"dump"},
		{"dump", "--duration=1s", "--format=json", "--programs=runqlat"},
		{"hist", "biolatency.bio_latency_seconds", "--interval=100ms", "--count=3"},
		{"top", "syscalls"},
		{"top", "bpf", "--interval=2s", "--count=3"},
		{"--no-collector.bpf"},
		{"--no-audit"},
		{"--audit.interval=2s"},
		{"--collector.bpf.ttl=1s", "--collector.bpf.max-programs=1", "--collector.bpf.max-maps=16384", "--bpf.cpu-budget=0"},
		{"--programs=all"},
		{"--programs=all,exec_trace"},
		{"--programs=exec_trace,timers"},
		{"--programs=none", "--config.dir=" + dir, "--config.names=mine"},
		{"--programs=none"}, // the host BPF collector serves
		{"--config.dir=" + dir, "dump", "--config.names=mine"},
		{"--config.check", "--verbose"},
		{"--otlp.metrics", "--otlp.metrics.interval=5s", "--otlp.metrics.timeout=2s"},
		{"--web.listen-address=[::1]:9100", "--web.listen-address=127.0.0.1:http"},
		{"--web.listen-address=vsock://:9100"},
		{"--web.listen-address=fd://0"},
		{"--kube.node-name=node-1.example.com"},
		{"--decoder.cache-size=1", "--config.load-timeout=1h", "--bpf.cpu-budget=0"},
		{"--log.level=debug", "dump", "--log.format=json"},
	} {
		if code, stderr := runArgs(t, args...); code != 0 || stderr != "" {
			t.Errorf("%q: exit %d, stderr %q; want 0 and nothing", args, code, stderr)
		}
	}
}

// TestTopViewsReserved checks that no bundled program has the name of one
// of top's built-in views, which top would show instead of it.
func TestTopViewsReserved(t *testing.T) {
	for _, v := range topViews {
		if slices.Contains(programs.Names(), v.name) {
			t.Errorf("bundled program %q has the name of top's built-in view", v.name)
		}
	}
}
