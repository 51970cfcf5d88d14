// SPDX-License-Identifier: Apache-2.0

package config

import (
	"strings"
	"testing"
)

// cgroupMapConfig is a valid config with the given cgroup_id_map section
// (already indented under the key).
func cgroupMapConfig(section string) string {
	return "cgroup_id_map:" + section + "\nmetrics:\n  counters:\n    - name: x_total\n      help: x\n      labels:\n        - name: a\n          size: 8\n          decoders:\n            - name: uint\n"
}

func TestCgroupIDMap(t *testing.T) {
	c, err := Parse("t.yaml", []byte(cgroupMapConfig("\n  name: allow\n  type: hash\n  regexps:\n    - ^/system\\.slice/\n    - kubepods")))
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.CgroupIDMap()
	if err != nil || s == nil {
		t.Fatalf("CgroupIDMap: %v, %v", s, err)
	}
	if s.Name != "allow" || (s.Type != CgroupIDMapHash && s.Type != CgroupIDMapCgrpStorage) || len(s.Regexps) != 2 {
		t.Fatalf("got %+v", s)
	}
	if !s.Regexps[1].MatchString("/kubepods/burstable/pod1") || s.Regexps[0].MatchString("/user.slice") {
		t.Error("regexps do not match as unanchored RE2 patterns")
	}
	if len(c.Ignored()) != 0 {
		t.Errorf("Ignored() = %v: cgroup_id_map is acted on", c.Ignored())
	}
	// No type: hash, as in ebpf_exporter; cgrp_storage when named.
	for section, want := range map[string]string{
		"\n  name: m\n  regexps: [a]":                       CgroupIDMapHash,
		"\n  name: m\n  type: cgrp_storage\n  regexps: [a]": CgroupIDMapCgrpStorage,
	} {
		c, err := Parse("t.yaml", []byte(cgroupMapConfig(section)))
		if err != nil {
			t.Fatal(err)
		}
		if s, err := c.CgroupIDMap(); err != nil || s.Type != want {
			t.Errorf("%q: %+v, %v; want type %s", section, s, err, want)
		}
	}
	none, err := Parse("t.yaml", []byte(strings.Replace(cgroupMapConfig(""), "cgroup_id_map:\n", "", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if s, err := none.CgroupIDMap(); s != nil || err != nil {
		t.Errorf("no section: %v, %v", s, err)
	}
}

func TestCgroupIDMapErrors(t *testing.T) {
	long := strings.Repeat("a", MaxRegexpLen+1)
	many := strings.Repeat("\n    - a", MaxCgroupIDMapRegexps+1)
	for _, tc := range []struct{ section, want string }{
		{" x", `t.yaml:1: cgroup_id_map: must be a mapping with keys name, type and regexps`},
		{"\n  type: hash\n  regexps: [a]", `cgroup_id_map: missing name`},
		{"\n  name: m\n  type: hash", `cgroup_id_map.regexps: no regexps`},
		{"\n  name: m", `cgroup_id_map.regexps: no regexps`},
		{"\n  name: m\n  type: hash\n  regexps: []", `cgroup_id_map.regexps: no regexps`},
		{"\n  name: m\n  type: lru_hash\n  regexps: [a]", `t.yaml:3: cgroup_id_map.type: map type "lru_hash" is not supported: use hash`},
		{"\n  name: 'a b'\n  type: hash\n  regexps: [a]", `cgroup_id_map.name: invalid map name (a string of 3 bytes)`},
		{"\n  name: [m]\n  type: hash\n  regexps: [a]", `cgroup_id_map.name: must name a BPF map`},
		{"\n  name: m\n  type: hash\n  regexps: a", `cgroup_id_map.regexps: must be a list`},
		{"\n  name: m\n  type: hash\n  regexps: ['(']", `t.yaml:4: cgroup_id_map.regexps[0]: invalid regexp: missing closing )`},
		{"\n  name: m\n  type: hash\n  regexps: ['']", `cgroup_id_map.regexps[0]: must be a non-empty regular expression`},
		{"\n  name: m\n  type: hash\n  regexps: [" + long + "]", `cgroup_id_map.regexps[0]: longer than 1024 bytes (1025)`},
		{"\n  name: m\n  type: hash\n  regexps: ['(abcdefghijklmnopqrstuvwxyz0123456789){300}']", `cgroup_id_map.regexps[0]: regexp too costly`},
		{"\n  name: m\n  type: hash\n  regexps:" + many, `cgroup_id_map.regexps: 65 regexps, more than the limit of 64`},
		{"\n  name: m\n  type: hash\n  regexps: [a]\n  secret: x", `cgroup_id_map: unknown key "secret" (known keys: name, type, regexps)`},
	} {
		_, err := Parse("t.yaml", []byte(cgroupMapConfig(tc.section)))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("section %.40q: error %v, want it to contain %q", tc.section, err, tc.want)
		}
	}
}

// FuzzCgroupIDMap parses arbitrary cgroup_id_map sections: never a panic,
// and a section that parses has a name, type hash or cgrp_storage and 1 to
// 64 regexps.
func FuzzCgroupIDMap(f *testing.F) {
	for _, s := range []string{
		"\n  name: m\n  type: hash\n  regexps: [a]",
		"\n  name: m\n  type: hash\n  regexps:\n    - ^/system\\.slice/[^/]+$\n    - ^/kubepods(\\.slice)?/",
		"\n  name: m\n  type: cgrp_storage\n  regexps: ['(']",
		" [1, 2]",
		"\n  name: &a m\n  type: *a\n  regexps: {}",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, section string) {
		c, err := Parse("t.yaml", []byte(cgroupMapConfig(section)))
		if err != nil {
			return
		}
		s, err := c.CgroupIDMap()
		if err != nil || s == nil {
			return
		}
		if s.Name == "" || (s.Type != CgroupIDMapHash && s.Type != CgroupIDMapCgrpStorage) || len(s.Regexps) == 0 || len(s.Regexps) > MaxCgroupIDMapRegexps {
			t.Fatalf("accepted %+v", s)
		}
	})
}
