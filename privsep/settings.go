// SPDX-License-Identifier: Apache-2.0

package privsep

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/kernel-exporter/kernel_exporter/allowlist"
	"github.com/kernel-exporter/kernel_exporter/config"
	"github.com/kernel-exporter/kernel_exporter/exporter"
	"github.com/kernel-exporter/kernel_exporter/loader"
)

// Settings are what the worker may load, fixed when the exporter starts
// the helper (before it drops its capabilities): the configs it was
// started with and the load flags. They travel as the helper's arguments
// (Args, ParseArgs), so nothing the exporter sends later can change them.
type Settings struct {
	// Sources are the configs, by name: a directory, or "" for a bundled
	// program.
	Sources []exporter.Source
	// AttachTo holds the --attach.to overrides by config name;
	// DisableAttach and BTFPath are --attach.disable and --btf.path.
	AttachTo      map[string][]string
	DisableAttach []string
	BTFPath       string
	// Allowed is --config.allowed-digests-file's list, nil when not
	// given: the worker refuses what it does not list, as the exporter
	// does.
	Allowed *allowlist.List
}

// Argument keys.
const (
	argWorker  = "worker"
	argSource  = "source"
	argAttach  = "attach-to"
	argDisable = "disable"
	argBTF     = "btf"
	argAllow   = "allow-list"
	argDigest  = "allow"
)

// Bounds of the arguments.
const (
	maxArgs   = 4096
	maxArgLen = 4096
)

// Args encodes s as the helper's arguments: "source=<name>=<dir>" per
// config (dir empty for a bundled program), "attach-to=<name>=<value>",
// "disable=<kind>", "btf=<path>", and with an allow-list
// "allow-list=<source>" then "allow=<sha256 hex>" per digest. None starts
// with "-".
func (s Settings) Args() []string {
	var out []string
	for _, src := range s.Sources {
		out = append(out, argSource+"="+src.Name+"="+src.Dir)
	}
	names := make([]string, 0, len(s.AttachTo))
	for n := range s.AttachTo {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		for _, v := range s.AttachTo[n] {
			out = append(out, argAttach+"="+n+"="+v)
		}
	}
	for _, k := range s.DisableAttach {
		out = append(out, argDisable+"="+k)
	}
	if s.BTFPath != "" {
		out = append(out, argBTF+"="+s.BTFPath)
	}
	if s.Allowed != nil {
		out = append(out, argAllow+"="+s.Allowed.Source())
		for _, d := range s.Allowed.Digests() {
			out = append(out, argDigest+"="+d)
		}
	}
	return out
}

// ParseArgs decodes Args. Errors name the argument (a sanitized excerpt):
// more than 4096 arguments or one longer than 4096 bytes, an unknown
// key, a config name that fails config.CheckName or is given twice, an
// attach_to override for a config not given, an unknown attach kind, a
// value holding a NUL byte, a digest that is not one (or comes before
// allow-list).
func ParseArgs(args []string) (Settings, error) {
	var s Settings
	var digests []string
	allowSource, allowSet := "", false
	if len(args) > maxArgs {
		return s, fmt.Errorf("%d arguments: more than %d", len(args), maxArgs)
	}
	seen := map[string]bool{}
	for _, a := range args {
		if len(a) > maxArgLen {
			return s, fmt.Errorf("argument of %d bytes: more than %d", len(a), maxArgLen)
		}
		if strings.IndexByte(a, 0) >= 0 {
			return s, errors.New("argument holds a NUL byte")
		}
		key, val, ok := strings.Cut(a, "=")
		if !ok {
			return s, fmt.Errorf("argument %q: want key=value", excerpt(a))
		}
		switch key {
		case argSource, argAttach:
			name, rest, ok := strings.Cut(val, "=")
			if !ok {
				return s, fmt.Errorf("argument %q: want %s=<name>=<value>", excerpt(a), key)
			}
			if err := config.CheckName(name); err != nil {
				return s, fmt.Errorf("argument %q: %s", excerpt(a), cut(printable(err.Error()), 160))
			}
			if key == argSource {
				if seen[name] {
					return s, fmt.Errorf("config %s given twice", name)
				}
				seen[name] = true
				s.Sources = append(s.Sources, exporter.Source{Name: name, Dir: rest})
				continue
			}
			if !seen[name] {
				return s, fmt.Errorf("attach-to for config %s, which is not given (before it)", name)
			}
			if s.AttachTo == nil {
				s.AttachTo = map[string][]string{}
			}
			s.AttachTo[name] = append(s.AttachTo[name], rest)
		case argDisable:
			if !slices.Contains(loader.AttachKinds, val) {
				return s, fmt.Errorf("unknown attach kind %q", excerpt(val))
			}
			s.DisableAttach = append(s.DisableAttach, val)
		case argBTF:
			if val == "" {
				return s, errors.New("btf: empty path")
			}
			s.BTFPath = val
		case argAllow:
			allowSource, allowSet = val, true
		case argDigest:
			if !allowSet {
				return s, errors.New("allow before allow-list")
			}
			digests = append(digests, val)
		default:
			return s, fmt.Errorf("unknown argument %q", excerpt(key))
		}
	}
	if allowSet {
		l, err := allowlist.FromDigests(allowSource, digests)
		if err != nil {
			return s, fmt.Errorf("allow: %s", cut(printable(err.Error()), 160))
		}
		s.Allowed = l
	}
	return s, nil
}

// source returns the config named name.
func (s Settings) source(name string) (exporter.Source, bool) {
	for _, src := range s.Sources {
		if src.Name == name {
			return src, true
		}
	}
	return exporter.Source{}, false
}
