// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"strings"
	"testing"
)

// TestProgramsNoneServesHostBPF (issue 31): --programs=none refused to
// start although the host BPF collector has metrics to serve. Started
// with it, the exporter runs no config of its own and serves a program
// another process loads (bpfspin) as kernel_bpf_program_info with its
// id; with --no-collector.bpf as well, nothing would be served, and it
// refuses to start with exit 2 and the reason.
func TestProgramsNoneServesHostBPF(t *testing.T) {
	s := startBPFSpin(t, 0)
	e := Start(t, "--programs=none")
	info := waitListed(t, e, s.prog)
	if info["name"] != "bpfstats_spin" || info["owner"] != "bpfspin" {
		t.Errorf("kernel_bpf_program_info of bpfspin's program %d: labels %v, want name=bpfstats_spin, owner=bpfspin", s.prog, info)
	}
	ms := e.Scrape()
	if n := ms.Series("kernel_exporter_config_up", nil); n != 0 {
		t.Errorf("--programs=none: %d kernel_exporter_config_up series, want 0", n)
	}
	if v := ms.Value("kernel_bpf_programs", nil); v < 1 {
		t.Errorf("kernel_bpf_programs = %v, want >= 1 (bpfspin's)", v)
	}

	_, stderr, code := runExporter(t, "--programs=none", "--no-collector.bpf")
	if want := "nothing to run: --programs=none runs no bundled program and no --config.names is given: --no-collector.bpf turns off the host BPF collector"; code != 2 || !strings.Contains(stderr, want) {
		t.Errorf("--programs=none --no-collector.bpf: exit %d, stderr %q; want 2 and %q", code, stderr, want)
	}
}
