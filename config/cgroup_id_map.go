// SPDX-License-Identifier: Apache-2.0

package config

import (
	"fmt"
	"regexp"

	"gopkg.in/yaml.v3"
)

// CgroupIDMap is a config's cgroup_id_map section, in ebpf_exporter v2's
// shape:
//
//	cgroup_id_map:
//	  name: runqlat_cgroup_allow   # a BPF map of the object
//	  type: hash                   # or cgrp_storage
//	  regexps:                     # cgroup paths to put in the map
//	    - ^/system\.slice/.*
//
// The exporter (package cgroupmap) keeps the map current with the cgroups
// (v2) whose path matches at least one regexp, from start-up on and as
// cgroups come and go, so that a program can count only the cgroups of
// interest. With type hash the map's keys are the ids of those cgroups
// (u64, the kernel's cgroup_id(), as bpf_get_current_cgroup_id returns);
// with type cgrp_storage (BPF_MAP_TYPE_CGRP_STORAGE, Linux 6.2) each of
// those cgroups has the u64 value 1 in the map, which the program reads with
// bpf_cgrp_storage_get. Paths are those of the cgroup decoder: relative to
// the root of the cgroup2 mount, "/" for the root, e.g.
// "/system.slice/cron.service". Regexps are Go (RE2) syntax and unanchored
// (a match anywhere in the path counts), as in ebpf_exporter.
type CgroupIDMap struct {
	// Name is the BPF map: for type hash a HASH or LRU_HASH whose key is 8
	// bytes (the cgroup id), its values written as 1 (1, 2, 4 or 8 bytes
	// in host byte order; other widths as zeros); for type cgrp_storage a
	// CGRP_STORAGE with a 4-byte key and an 8-byte value.
	Name string
	// Type is CgroupIDMapHash (the default when the section has no type,
	// as in ebpf_exporter) or CgroupIDMapCgrpStorage.
	Type string
	// Regexps are 1 to MaxCgroupIDMapRegexps patterns, each at most
	// MaxRegexpLen bytes and MaxRegexpCost estimated instructions.
	Regexps []*regexp.Regexp
}

// The types of a cgroup_id_map.
const (
	CgroupIDMapHash        = "hash"
	CgroupIDMapCgrpStorage = "cgrp_storage"
)

// MaxCgroupIDMapRegexps bounds the patterns of a cgroup_id_map.
const MaxCgroupIDMapRegexps = 64

// CgroupIDMap returns the config's cgroup_id_map section, nil when it has
// none. Errors (*Error) name the file, line and field: a section that is
// not a mapping, an unknown key, a missing or invalid name, a type other
// than hash or cgrp_storage, no regexps, too many, or one that is too long, too costly or
// does not compile. Values from the file are quoted only as short tokens.
func (c *Config) CgroupIDMap() (*CgroupIDMap, error) {
	n := &c.CgroupIDMapNode
	if n.IsZero() {
		return nil, nil
	}
	const path = "cgroup_id_map"
	if n.Kind != yaml.MappingNode {
		return nil, c.Errorf(path, "must be a mapping with keys name, type and regexps")
	}
	out := &CgroupIDMap{}
	var have [3]bool
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch k.Value {
		case "name":
			if v.Kind != yaml.ScalarNode || v.Value == "" {
				return nil, c.Errorf(path+".name", "must name a BPF map of the object")
			}
			if len(v.Value) > MaxNameLen || !metricNameRe.MatchString(v.Value) {
				return nil, c.Errorf(path+".name", "invalid map name %s", Quote(v.Value))
			}
			out.Name, have[0] = v.Value, true
		case "type":
			if v.Kind != yaml.ScalarNode {
				return nil, c.Errorf(path+".type", "must be hash or cgrp_storage")
			}
			if v.Value != CgroupIDMapHash && v.Value != CgroupIDMapCgrpStorage {
				return nil, c.Errorf(path+".type", "map type %s is not supported: use hash (a BPF_MAP_TYPE_HASH keyed by the u64 cgroup id) or cgrp_storage (a BPF_MAP_TYPE_CGRP_STORAGE, Linux 6.2)", Quote(v.Value))
			}
			out.Type, have[1] = v.Value, true
		case "regexps":
			if v.Kind != yaml.SequenceNode {
				return nil, c.Errorf(path+".regexps", "must be a list of regular expressions")
			}
			if len(v.Content) > MaxCgroupIDMapRegexps {
				return nil, c.Errorf(path+".regexps", "%d regexps, more than the limit of %d", len(v.Content), MaxCgroupIDMapRegexps)
			}
			for j, r := range v.Content {
				rp := fmt.Sprintf("%s.regexps[%d]", path, j)
				re, err := c.cgroupRegexp(rp, r)
				if err != nil {
					return nil, err
				}
				out.Regexps = append(out.Regexps, re)
			}
			have[2] = true
		default:
			return nil, c.Errorf(path, "unknown key %s (known keys: name, type, regexps)", Quote(k.Value))
		}
	}
	if !have[0] {
		return nil, c.Errorf(path, "missing name (the BPF map to fill)")
	}
	if len(out.Regexps) == 0 {
		return nil, c.Errorf(path+".regexps", "no regexps: the map would stay empty")
	}
	if !have[1] {
		out.Type = CgroupIDMapHash // as ebpf_exporter, for configs written before it had types
	}
	return out, nil
}

func (c *Config) cgroupRegexp(path string, n *yaml.Node) (*regexp.Regexp, error) {
	if n.Kind != yaml.ScalarNode || n.Value == "" {
		return nil, c.Errorf(path, "must be a non-empty regular expression")
	}
	if len(n.Value) > MaxRegexpLen {
		return nil, c.Errorf(path, "longer than %d bytes (%d)", MaxRegexpLen, len(n.Value))
	}
	cost, err := regexpCost(n.Value)
	if err != nil {
		return nil, c.Errorf(path, "invalid regexp: %s", regexpReason(err))
	}
	if cost > MaxRegexpCost {
		return nil, c.Errorf(path, "regexp too costly: about %d instructions, more than %d", cost, MaxRegexpCost)
	}
	re, err := regexp.Compile(n.Value)
	if err != nil {
		return nil, c.Errorf(path, "invalid regexp: %s", regexpReason(err))
	}
	return re, nil
}
