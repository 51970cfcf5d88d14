// SPDX-License-Identifier: Apache-2.0

package loader

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// TestMissingPrivileges: the error names the command, the required
// capabilities missing with what each is for, the optional ones the
// command also uses, and every capability to grant (held ones too: setcap
// replaces a file's set); CAP_SYS_ADMIN stands for CAP_BPF and
// CAP_PERFMON, and an optional capability alone is no error.
func TestMissingPrivileges(t *testing.T) {
	need := append(append([]Privilege{}, PrivLoad...), PrivConfigs...)
	for _, tc := range []struct {
		name    string
		need    []Privilege
		have    CapSet
		uid     int
		want    []string
		notWant []string
	}{
		{name: "nobody", need: need, uid: 65534, want: []string{
			"kernel_exporter dump needs CAP_BPF (to create BPF maps and load programs) and CAP_PERFMON (to load tracing programs and open perf events) (or CAP_SYS_ADMIN, which stands for both), which this process lacks (uid 65534, effective capabilities: none)",
			"; it also uses CAP_SYSLOG (for kernel function names, from /proc/kallsyms) and CAP_DAC_READ_SEARCH (to read tracepoint ids in /sys/kernel/tracing)",
			": run it as root, or grant them: setcap cap_dac_read_search,cap_syslog,cap_perfmon,cap_bpf+ep ",
			", or AmbientCapabilities=CAP_DAC_READ_SEARCH CAP_SYSLOG CAP_PERFMON CAP_BPF in its systemd unit, as deploy/kernel_exporter.service does",
		}},
		{name: "bpf only", need: need, have: 1 << CapBPF, uid: 1000, want: []string{
			"needs CAP_PERFMON (to load tracing programs and open perf events) (or CAP_SYS_ADMIN, which stands for it), which this process lacks (uid 1000, effective capabilities: CAP_BPF)",
			"setcap cap_dac_read_search,cap_syslog,cap_perfmon,cap_bpf+ep",
		}, notWant: []string{"CAP_BPF (to"}},
		{name: "root without caps", need: PrivListBPF, uid: 0, want: []string{
			"kernel_exporter dump needs CAP_SYS_ADMIN (to list the host's BPF programs and maps by id and turn on their run-time statistics), which this process lacks: it runs as root but without them",
			": grant them: setcap cap_sys_admin+ep",
		}, notWant: []string{"run it as root", "stands for"}},
		{name: "sys_admin", need: need, have: 1 << CapSysAdmin},
		{name: "optional missing only", need: need, have: 1<<CapBPF | 1<<CapPerfmon},
		{name: "nothing needed", need: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := missingPrivileges("dump", tc.need, tc.have, tc.uid)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("error %v, want none", err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, os.ErrPermission) {
				t.Errorf("error does not match os.ErrPermission")
			}
			msg := err.Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q lacks %q", msg, w)
				}
			}
			for _, w := range append(tc.notWant, "MEMLOCK", "rlimit") {
				if strings.Contains(msg, w) {
					t.Errorf("error %q holds %q", msg, w)
				}
			}
		})
	}
}
