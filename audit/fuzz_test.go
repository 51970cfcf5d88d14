// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzKernelFiles runs every parser of the kernel files the audit reads
// (/sys/block/<disk>/stat, /proc/stat, /proc/schedstat, /proc/softirqs,
// /proc/net/snmp, /proc/vmstat) on the same input: none may panic, and an
// error never quotes the input (the marker SE!CRET never shows).
func FuzzKernelFiles(f *testing.F) {
	for _, s := range []string{
		" 124658 12356 4926290 50924 101031 193628 30650344 181889 0 28312 244938 59549 36 10301736 8047 12281 4076\n",
		"cpu  1 2 3\nctxt 6688081\nbtime 1\n",
		"version 17\ntimestamp 4295\ncpu0 0 0 5 1 4 2 100 200 300\ndomain0 MC 3 0 0\n",
		"                    CPU0       CPU1\n          HI:          0          0\n       TIMER:      55264      48044\n",
		"Tcp: RtoAlgorithm RtoMin RtoMax MaxConn RetransSegs\nTcp: 1 200 120000 -1 42\n",
		"oom_kill 0\nallocstall_normal 3\n",
		"ctxt SE!CRET\nversion 15\ncpu0 SE!CRET 1 2 3 4 5 6 7 SE!CRET\nTcp: SE!CRET\nTcp: 1\nSE!CRET: 1\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		check := func(what string, err error) {
			if err != nil && strings.Contains(err.Error(), "SE!CRET") && !bytes.Contains([]byte(what), []byte("SE!CRET")) {
				t.Fatalf("%s: error quotes the input: %v", what, err)
			}
		}
		fields, err := ParseDiskStat(b)
		check("disk stat", err)
		if err == nil && len(bytes.Fields(b)) < 16 {
			t.Fatalf("disk stat: %d fields accepted: %v", len(bytes.Fields(b)), fields)
		}
		_, err = ParseProcStatCtxt(b)
		check("/proc/stat", err)
		_, err = ParseSchedstatSwitchIns(b)
		check("/proc/schedstat", err)
		m, err := ParseSoftirqs(b)
		check("/proc/softirqs", err)
		if len(m) > 64 {
			t.Fatalf("/proc/softirqs: %d vectors", len(m))
		}
		_, err = ParseSNMP(b, "Tcp", "RetransSegs")
		check("/proc/net/snmp", err)
		_, err = ParseVmstat(b, "oom_kill", true)
		check("/proc/vmstat", err)
		_, err = ParseVmstat(b, "allocstall_", false)
		check("/proc/vmstat", err)
	})
}
