// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	pprof "github.com/google/pprof/profile"

	"github.com/kernel-exporter/kernel_exporter/internal/proftest"
	"github.com/kernel-exporter/kernel_exporter/internal/testenv"
)

// startProfWorkload starts profile/testdata/workload.c with args,
// waiting for Begin (see package proftest).
func startProfWorkload(t *testing.T, args ...string) *proftest.Workload {
	t.Helper()
	return proftest.Start(t, proftest.Build(t, filepath.Join(repoRoot, "profile/testdata/workload.c")), args...)
}

// profileRun is one kernel_exporter profile process.
type profileRun struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
}

func startProfile(t *testing.T, args ...string) *profileRun {
	t.Helper()
	r := &profileRun{cmd: exec.Command(binary, append([]string{"profile"}, args...)...)}
	r.cmd.Stdout, r.cmd.Stderr = &r.stdout, &r.stderr
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *profileRun) wait(t *testing.T) {
	t.Helper()
	if err := r.cmd.Wait(); err != nil {
		t.Fatalf("kernel_exporter %v: %v\n%s", r.cmd.Args[1:], err, r.stderr.String())
	}
	t.Logf("kernel_exporter %s: %s", strings.Join(r.cmd.Args[1:], " "), strings.TrimSpace(r.stderr.String()))
}

// pprofTop runs go tool pprof -top on file and returns each function's
// flat and cumulative share, in percent.
func pprofTop(t *testing.T, file string) (flat, cum map[string]float64) {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		testenv.SkipOrFail(t, "no go command for go tool pprof")
	}
	out, err := exec.Command(goBin, "tool", "pprof", "-top", "-nodecount=1000", file).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool pprof -top %s: %v\n%s", file, err, out)
	}
	// "      flat  flat%   sum%        cum   cum%"
	// "     700ms 70.00% 70.00%      700ms 70.00%  burn_a"
	row := regexp.MustCompile(`^\s*\S+\s+([0-9.]+)%\s+[0-9.]+%\s+\S+\s+([0-9.]+)%\s+(.+)$`)
	flat, cum = map[string]float64{}, map[string]float64{}
	for _, l := range strings.Split(string(out), "\n") {
		if m := row.FindStringSubmatch(l); m != nil {
			f, _ := strconv.ParseFloat(m[1], 64)
			c, _ := strconv.ParseFloat(m[2], 64)
			flat[m[3]], cum[m[3]] = f, c
		}
	}
	if len(flat) == 0 {
		t.Fatalf("go tool pprof -top %s printed no function:\n%s", file, out)
	}
	return flat, cum
}

// foldedLine is one line of flamegraph.pl's input.
var foldedLine = regexp.MustCompile(`^[^;\n]+(;[^;\n]+)* [0-9]+$`)

// readFoldedFile reads a folded profile (flamegraph.pl's lines, each
// checked) whose every line must be of process comm, and returns the
// samples whose stack holds each function (once a line) and the total.
func readFoldedFile(t *testing.T, path, comm string) (map[string]int64, int64) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int64{}
	var all int64
	for _, l := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if !foldedLine.MatchString(l) {
			t.Fatalf("folded line %q is not frames;joined;by;semicolons, a space and a count", l)
		}
		i := strings.LastIndexByte(l, ' ')
		n, _ := strconv.ParseInt(l[i+1:], 10, 64)
		all += n
		frames := strings.Split(l[:i], ";")
		if frames[0] != comm {
			t.Errorf("folded line of another process than %s: %q", comm, l)
			continue
		}
		for _, f := range slices.Compact(slices.Sorted(slices.Values(frames[1:]))) {
			counts[f] += n
		}
	}
	return counts, all
}

// profilePrograms returns the ids of the programs named name loaded now.
func profilePrograms(t *testing.T, name string) map[ebpf.ProgramID]bool {
	out := map[ebpf.ProgramID]bool{}
	for id, n := range programIDs(t) {
		if n == name {
			out[id] = true
		}
	}
	return out
}

// TestProfileCLI profiles two frame-pointer processes that spend 70% and
// 30% of their time in burn_a (the rest in burn_b) with two kernel_exporter
// profile commands at once (10 s, --pid; 499 Hz so that the shares'
// sampling error stays under 2 points on a loaded 2-CPU machine, see
// profile's TestCPUProfileShares): go tool pprof -top reads
// the pprof one and finds burn_a's share within 10 points of 70%; the
// folded one has flamegraph.pl's line format and burn_a within 10 points of
// 30%; profile diff of the two ranks burn_a first among the functions that
// shrank (and burn_b first among those that grew), and its folded form has
// difffolded.pl's lines. An off-CPU profile of 100 sleeps of 10 ms reads
// in go tool pprof with do_nanosleep at the top. No program stays loaded.
func TestProfileCLI(t *testing.T) {
	dir := t.TempDir()
	base, newer := filepath.Join(dir, "base.pb.gz"), filepath.Join(dir, "new.folded")
	before := profilePrograms(t, "on_cpu")
	w70 := startProfWorkload(t, "burn", "0.7", "12")
	w30 := startProfWorkload(t, "burn", "0.3", "12")
	w70.Begin()
	w30.Begin()
	r1 := startProfile(t, "--duration=10s", "--frequency=499", "--pid="+strconv.Itoa(int(w70.PID)), "-o", base)
	r2 := startProfile(t, "--duration=10s", "--frequency=499", "--pid="+strconv.Itoa(int(w30.PID)), "-o", newer)
	var during map[ebpf.ProgramID]bool
	Eventually(t, 5*time.Second, func() bool {
		during = profilePrograms(t, "on_cpu")
		n := 0
		for id := range during {
			if !before[id] {
				n++
			}
		}
		return n >= 2
	}, "the two profile commands never had their on_cpu programs loaded")
	r1.wait(t)
	r2.wait(t)

	flat, _ := pprofTop(t, base)
	t.Logf("go tool pprof -top %s: burn_a %.1f%%, burn_b %.1f%%", filepath.Base(base), flat["burn_a"], flat["burn_b"])
	if a := flat["burn_a"]; a < 60 || a > 80 {
		t.Errorf("burn_a flat %.1f%%, want 60 to 80", a)
	}
	counts, all := readFoldedFile(t, newer, "workload")
	a := counts["burn_a"]
	t.Logf("%s: burn_a %d of %d samples", filepath.Base(newer), a, all)
	if all < 200 || float64(a)/float64(all) < 0.2 || float64(a)/float64(all) > 0.4 {
		t.Errorf("folded: burn_a %d of %d samples, want 20 to 40%% of at least 200", a, all)
	}

	diff := runCLI(t, "profile", "diff", base, newer)
	t.Logf("profile diff:\n%s", diff)
	grew, shrank := diffSections(diff)
	if len(shrank) == 0 || shrank[0] != "burn_a" || len(grew) == 0 || grew[0] != "burn_b" {
		t.Errorf("profile diff: grew %v, shrank %v; want burn_b and burn_a first", grew, shrank)
	}
	dfold := runCLI(t, "profile", "diff", "--format=folded", base, newer)
	diffLine := regexp.MustCompile(`^[^;\n]+(;[^;\n]+)* [0-9]+ [0-9]+$`)
	for _, l := range strings.Split(strings.TrimSuffix(dfold, "\n"), "\n") {
		if !diffLine.MatchString(l) {
			t.Errorf("difffolded line %q is not: frames, base count, new count", l)
			break
		}
	}

	// Off-CPU: the workload starts sleeping once the command has attached.
	off := filepath.Join(dir, "off.pb.gz")
	ws := startProfWorkload(t, "sleep", "100", "10")
	offBefore := profilePrograms(t, "off_cpu")
	r3 := startProfile(t, "--offcpu", "--duration=4s", "--pid="+strconv.Itoa(int(ws.PID)), "-o", off)
	offDuring := map[ebpf.ProgramID]bool{}
	Eventually(t, 5*time.Second, func() bool {
		for id := range profilePrograms(t, "off_cpu") {
			if !offBefore[id] {
				offDuring[id] = true
			}
		}
		return len(offDuring) > 0
	}, "the off-CPU profile command never had its off_cpu program loaded")
	ws.Begin()
	r3.wait(t)
	_, cum := pprofTop(t, off)
	t.Logf("off-CPU: do_nanosleep cum %.1f%%", cum["do_nanosleep"])
	if cum["do_nanosleep"] < 90 {
		t.Errorf("do_nanosleep holds %.1f%% of the sleeping process's off-CPU time, want at least 90%%", cum["do_nanosleep"])
	}

	Eventually(t, 10*time.Second, func() bool {
		on, offNow := profilePrograms(t, "on_cpu"), profilePrograms(t, "off_cpu")
		for id := range during {
			if !before[id] && on[id] {
				return false
			}
		}
		for id := range offDuring {
			if offNow[id] {
				return false
			}
		}
		return true
	}, "a program of the profile commands is still loaded after they exited")
}

// runCLI runs kernel_exporter with args and returns its standard output.
func runCLI(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kernel_exporter %v: %v\n%s", args, err, stderr.String())
	}
	return stdout.String()
}

// diffSections returns the functions of profile diff's two lists, in
// order.
func diffSections(out string) (grew, shrank []string) {
	var cur *[]string
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(l, "grew most:"):
			cur = &grew
		case strings.HasPrefix(l, "shrank most:"):
			cur = &shrank
		case cur != nil && strings.HasPrefix(l, "  ") && !strings.Contains(l, "FUNCTION"):
			f := strings.Fields(l)
			*cur = append(*cur, f[len(f)-1])
		}
	}
	return grew, shrank
}

// TestProfileHTTP: without --profile.enable, /profile/cpu, /profile/offcpu
// and the flame graph page answer 403 and name the flag. With it
// and a web config with basic auth: 401 without the password; with it, a
// 2 s CPU profile of a burning process is pprof holding burn_a, a second
// request meanwhile gets 429, ?format=folded is flamegraph.pl's lines, and
// /profile/offcpu answers.
func TestProfileHTTP(t *testing.T) {
	plain := Start(t, "--programs=timers")
	for _, p := range []string{"/profile/cpu?seconds=1", "/profile/offcpu", "/ui/profile/"} {
		resp, err := http.Get(plain.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), "Profiles are not enabled (--profile.enable)") {
			t.Errorf("%s without --profile.enable: %s %q, want 403 naming --profile.enable", p, resp.Status, b)
		}
	}
	plain.Stop()

	cfg := filepath.Join(t.TempDir(), "web.yml")
	if err := os.WriteFile(cfg, []byte("basic_auth_users:\n  prom: "+scrapeHash+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, url, logs := spawn(t, nil, "--programs=timers", "--profile.enable", "--web.config.file="+cfg)
	waitPort(t, url, logs)
	get := func(ctx context.Context, path string, auth bool) (int, []byte, http.Header) {
		req, _ := http.NewRequestWithContext(ctx, "GET", url+path, nil)
		if auth {
			req.SetBasicAuth("prom", scrapePassword)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v\n%s", path, err, logs)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b, resp.Header
	}
	if code, _, _ := get(context.Background(), "/profile/cpu?seconds=1", false); code != http.StatusUnauthorized {
		t.Errorf("/profile/cpu without the password: %d, want 401", code)
	}
	w := startProfWorkload(t, "burn", "0.7", "8")
	w.Begin()
	type result struct {
		code int
		body []byte
	}
	first := make(chan result, 1)
	go func() {
		code, body, _ := get(context.Background(), "/profile/cpu?seconds=3&frequency=99&pid="+strconv.Itoa(int(w.PID)), true)
		first <- result{code, body}
	}()
	Eventually(t, 5*time.Second, func() bool { return len(profilePrograms(t, "on_cpu")) > 0 }, "no on_cpu program while /profile/cpu runs")
	code, body, hdr := get(context.Background(), "/profile/offcpu?seconds=1", true)
	if code != http.StatusTooManyRequests || hdr.Get("Retry-After") == "" {
		t.Errorf("second profile meanwhile: %d %q (Retry-After %q), want 429 with Retry-After", code, body, hdr.Get("Retry-After"))
	}
	r := <-first
	if r.code != 200 {
		t.Fatalf("/profile/cpu: %d %s\n%s", r.code, r.body, logs)
	}
	pp, err := pprof.ParseData(r.body)
	if err != nil {
		t.Fatalf("/profile/cpu is not pprof: %v", err)
	}
	found := false
	for _, f := range pp.Function {
		found = found || f.Name == "burn_a"
	}
	if !found || len(pp.Sample) == 0 {
		t.Errorf("/profile/cpu: %d samples, burn_a found %v", len(pp.Sample), found)
	}
	code, body, _ = get(context.Background(), "/profile/cpu?seconds=1&format=folded&pid="+strconv.Itoa(int(w.PID)), true)
	if code != 200 {
		t.Fatalf("folded: %d %s", code, body)
	}
	for _, l := range strings.Split(strings.TrimSuffix(string(body), "\n"), "\n") {
		if !foldedLine.MatchString(l) {
			t.Errorf("folded line %q", l)
			break
		}
	}
	if code, body, _ = get(context.Background(), "/profile/offcpu?seconds=1", true); code != 200 {
		t.Errorf("/profile/offcpu: %d %s", code, body)
	} else if _, err := pprof.ParseData(body); err != nil {
		t.Errorf("/profile/offcpu is not pprof: %v", err)
	}
}

// TestProfileTopCPU runs kernel_exporter top cpu --count=3 (output not a
// terminal: frames one after the other) while a process burns CPU in
// burn_a and burn_b: three frames, each with its header, and the burning
// functions among the rows with their module.
func TestProfileTopCPU(t *testing.T) {
	w := startProfWorkload(t, "burn", "0.5", "10")
	w.Begin()
	out := runCLI(t, "top", "cpu", "--count=3", "--interval=1s", "--frequency=99")
	header := regexp.MustCompile(`(?m)^kernel_exporter top cpu  interval 1s  \d\d:\d\d:\d\d  \d+ functions$`)
	if n := len(header.FindAllString(out, -1)); n != 3 {
		t.Errorf("%d frames, want 3:\n%s", n, out)
	}
	row := regexp.MustCompile(`(?m)^\s+[0-9.]+\s+\d+\s+burn_[ab]\s+[0-9.]+%\s+workload$`)
	if !row.MatchString(out) {
		t.Errorf("no row of burn_a or burn_b in module workload:\n%s", out)
	}
}
