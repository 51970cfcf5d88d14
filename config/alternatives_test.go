// SPDX-License-Identifier: Apache-2.0

package config

import (
	"reflect"
	"strings"
	"testing"
)

const altConfig = `alternatives:
  - name: latency
    programs:
      - [lat_fentry, lat_fexit]
      - [lat_kprobe, lat_kretprobe]
      - lat_tp
  - name: extra
    optional: true
    programs: [extra_fentry]
requires:
  kernel: "5.15"
  features: [btf, kprobes]
attach_to:
  lat_fentry: do_sendfile
  lat_kprobe: do_sendfile
` + goodCounter

func TestAlternativesParse(t *testing.T) {
	c, err := Parse("alt.yaml", []byte(altConfig))
	if err != nil {
		t.Fatal(err)
	}
	want := []Alternative{
		{Name: "latency", Programs: []Choice{{"lat_fentry", "lat_fexit"}, {"lat_kprobe", "lat_kretprobe"}, {"lat_tp"}}},
		{Name: "extra", Optional: true, Programs: []Choice{{"extra_fentry"}}},
	}
	if !reflect.DeepEqual(c.Alternatives, want) {
		t.Errorf("alternatives = %+v, want %+v", c.Alternatives, want)
	}
	if got := c.Alternatives[0].Programs[0].String(); got != "lat_fentry+lat_fexit" {
		t.Errorf("choice string = %q", got)
	}
	if c.Requires.Kernel != "5.15" || !reflect.DeepEqual(c.Requires.Features, []string{"btf", "kprobes"}) {
		t.Errorf("requires = %+v", c.Requires)
	}
	if c.AttachTo["lat_kprobe"] != "do_sendfile" {
		t.Errorf("attach_to = %v", c.AttachTo)
	}
}

// TestAlternativesErrors checks the exact message of each mistake.
func TestAlternativesErrors(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"missing name", "alternatives:\n  - programs: [a]\n" + goodCounter,
			`bad.yaml:2: alternatives[0].name: missing group name`},
		{"bad name", "alternatives:\n  - name: a b\n    programs: [a]\n" + goodCounter,
			`bad.yaml:2: alternatives[0].name: invalid group name (a string of 3 bytes) (at most 128 letters, digits, _ . -)`},
		{"duplicate group", "alternatives:\n  - name: a\n    programs: [x]\n  - name: a\n    programs: [y]\n" + goodCounter,
			`bad.yaml:4: alternatives[1].name: group "a" already defined at alternatives[0]`},
		{"no programs", "alternatives:\n  - name: a\n" + goodCounter,
			`bad.yaml:2: alternatives[0].programs: group "a" has no programs`},
		{"program twice", "alternatives:\n  - name: a\n    programs: [x, [y, x]]\n" + goodCounter,
			`bad.yaml:3: alternatives[0].programs[1]: program "x" already listed at alternatives[0].programs[0]: a program may be in one choice only`},
		{"empty choice", "alternatives:\n  - name: a\n    programs: [[]]\n" + goodCounter,
			`bad.yaml:3: alternatives[0].programs[0]: empty choice`},
		{"nested choice", "alternatives:\n  - name: a\n    programs: [[[x]]]\n" + goodCounter,
			`bad.yaml:3: wrong type: a choice is a program name or a list of program names`},
		{"unknown key", "alternatives:\n  - name: a\n    programz: [x]\n" + goodCounter,
			`bad.yaml:3: unknown key "programz" in alternatives entry (did you mean "programs"?)`},
		{"bad kernel", "requires:\n  kernel: five\n" + goodCounter,
			`bad.yaml:2: requires.kernel: invalid kernel version "five": want major.minor[.patch], e.g. "5.15"`},
		{"kernel with suffix", "requires:\n  kernel: 5.15-rc1\n" + goodCounter,
			`bad.yaml:2: requires.kernel: invalid kernel version "5.15-rc1": want major.minor[.patch], e.g. "5.15"`},
		{"unknown feature", "requires:\n  features: [btf, kprobez]\n" + goodCounter,
			`bad.yaml:2: requires.features[1]: unknown feature "kprobez" (known: btf, fentry, kprobes, raw_tracepoints, tp_btf, tracepoints, uprobes)`},
		{"bad function", "attach_to:\n  p: do sendfile\n" + goodCounter,
			`bad.yaml:2: attach_to.p: invalid kernel function name (a string of 11 bytes)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("bad.yaml", []byte(tc.yaml))
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			if err.Error() != tc.want {
				t.Errorf("error\n got: %s\nwant: %s", err, tc.want)
			}
		})
	}
}

func TestParseKernelVersion(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want KernelVersion
	}{
		{"6.1.0-18-cloud-amd64", KernelVersion{6, 1, 0}},
		{"6.18.44-fc-v669", KernelVersion{6, 18, 44}},
		{"5.15", KernelVersion{5, 15, 0}},
		{"4.19.282", KernelVersion{4, 19, 282}},
	} {
		got, err := ParseKernelVersion(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseKernelVersion(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	if _, err := ParseKernelVersion("linux"); err == nil {
		t.Error("ParseKernelVersion(linux): no error")
	}
	if !(KernelVersion{5, 8, 0}).Less(KernelVersion{5, 10, 0}) || (KernelVersion{6, 1, 0}).Less(KernelVersion{5, 15, 0}) || (KernelVersion{5, 15, 0}).Less(KernelVersion{5, 15, 0}) {
		t.Error("Less is wrong")
	}
}

func TestOverrideAttachTo(t *testing.T) {
	c, err := Parse("alt.yaml", []byte(altConfig))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.OverrideAttachTo("vfs_read"); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.AttachTo, map[string]string{"lat_fentry": "vfs_read", "lat_kprobe": "vfs_read"}) {
		t.Errorf("after override all: %v", c.AttachTo)
	}
	if err := c.OverrideAttachTo("lat_fexit=vfs_write"); err != nil {
		t.Fatal(err)
	}
	if c.AttachTo["lat_fexit"] != "vfs_write" || c.AttachTo["lat_fentry"] != "vfs_read" {
		t.Errorf("after override one: %v", c.AttachTo)
	}
	if err := c.OverrideAttachTo("p=bad name"); err == nil || !strings.Contains(err.Error(), `invalid kernel function name "bad name"`) {
		t.Errorf("bad function: %v", err)
	}
	plain, _ := Parse("timers.yaml", []byte(goodCounter))
	if err := plain.OverrideAttachTo("vfs_read"); err == nil || !strings.Contains(err.Error(), "no attach_to entries") {
		t.Errorf("override without attach_to: %v", err)
	}
}
