// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"bufio"
	"bytes"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kernel-exporter/kernel_exporter/internal/otelcoltest"
	"github.com/kernel-exporter/kernel_exporter/internal/proftest"
)

// TestProfileOTLP runs serve with --otlp.profiles (2 s profiles at 99 Hz)
// against the OpenTelemetry Collector the tests build (profiles pipeline,
// feature gate service.profilesSupport, debug exporter), once over
// http/protobuf and once over grpc. A frame-pointer workload with a unique
// comm burns the CPU for 4 s (70% in burn_a); the collector must print
// samples under that comm and pid whose values add up to the workload's
// CPU time (/proc/<pid>/schedstat) times 99 within 30%, and the
// dictionaries it received must name burn_a and burn_b (user symbols
// resolved before sending). The debug exporter does not print stacks:
// the stacks' shape is checked by package otlpprofile's round trip.
func TestProfileOTLP(t *testing.T) {
	col := otelcoltest.Start(t)
	src, err := os.ReadFile(proftest.Build(t, filepath.Join(repoRoot, "profile/testdata/workload.c")))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ proto, endpoint string }{
		{"http/protobuf", col.Endpoint(otelcoltest.HTTP)},
		{"grpc", col.Endpoint(otelcoltest.GRPC)},
	} {
		t.Run(strings.ReplaceAll(c.proto, "/", "_"), func(t *testing.T) {
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", c.endpoint)
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", c.proto)
			comm := randomName(t, "kxotlp-") // 15 bytes
			bin := filepath.Join(t.TempDir(), comm)
			if err := os.WriteFile(bin, src, 0o755); err != nil {
				t.Fatal(err)
			}
			e := Start(t, "--programs=timers", "--otlp.profiles", "--otlp.profiles.interval=2s", "--profile.frequency=99")
			w := proftest.Start(t, bin, "burn", "0.7", "4")
			w.Begin()
			elapsed := w.Wait()
			cpu := schedstatSeconds(t, w.PID)
			want := cpu * 99
			// The last profile holding the work ends up to one interval
			// after it, and is sent then: wait for two intervals, then for
			// the values to arrive (15 s at most).
			time.Sleep(4 * time.Second)
			var got otlpSeen
			for end := time.Now().Add(15 * time.Second); ; time.Sleep(500 * time.Millisecond) {
				got = readOTLPProfiles(t, filepath.Join(col.Dir, "debug.out"), comm)
				if got.values >= 0.7*want || time.Now().After(end) {
					break
				}
			}
			w.End()
			t.Logf("%s: %s ran %v, %.2f CPU s; collector: %d samples of it, values %v (want %.0f), pids %v, burn_a named %v, burn_b named %v",
				c.proto, comm, elapsed, cpu, got.samples, got.values, want, got.pids, got.strings["burn_a"], got.strings["burn_b"])
			if math.Abs(got.values-want) > 0.3*want {
				t.Errorf("values under thread.name=%s add up to %v, want %.0f ± 30%%\n%s", comm, got.values, want, e.Logs())
			}
			if len(got.pids) != 1 || got.pids[0] != int64(w.PID) {
				t.Errorf("samples of %s carry process.pid %v, want [%d]", comm, got.pids, w.PID)
			}
			if !got.strings["burn_a"] || !got.strings["burn_b"] {
				t.Errorf("the string tables received do not name burn_a and burn_b")
			}
		})
	}
}

type otlpSeen struct {
	samples int
	values  float64
	pids    []int64
	strings map[string]bool
}

var otlpPID = regexp.MustCompile(`-> process\.pid: .*?(\d+)\)?$`)

// readOTLPProfiles reads the debug exporter's detailed profile output:
// every string of the string tables, and the samples whose thread.name is
// comm (the attributes follow "Values: [n]").
func readOTLPProfiles(t *testing.T, path, comm string) otlpSeen {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := otlpSeen{strings: map[string]bool{}}
	var value float64
	var pid int64
	inStrings := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if inStrings {
			if v, ok := strings.CutPrefix(l, "    "); ok {
				s.strings[v] = true
				continue
			}
			inStrings = false
		}
		switch trimmed := strings.TrimSpace(l); {
		case l == "String table:":
			inStrings = true
		case strings.HasPrefix(trimmed, "Values: ["):
			v := strings.TrimSuffix(strings.TrimPrefix(trimmed, "Values: ["), "]")
			value, _ = strconv.ParseFloat(strings.Fields(v + " 0")[0], 64)
			pid = -1
		case otlpPID.MatchString(trimmed):
			pid, _ = strconv.ParseInt(otlpPID.FindStringSubmatch(trimmed)[1], 10, 64)
		case trimmed == "-> thread.name: "+comm:
			s.samples++
			s.values += value
			if !containsInt(s.pids, pid) {
				s.pids = append(s.pids, pid)
			}
		}
	}
	return s
}

func containsInt(xs []int64, x int64) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
