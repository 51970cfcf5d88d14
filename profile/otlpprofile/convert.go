// SPDX-License-Identifier: Apache-2.0

// Package otlpprofile sends profiles (package profile) over OTLP, the
// OpenTelemetry protocol, to a Collector: --otlp.profiles.
//
// The OTLP profiles signal is still in development upstream (its protobuf
// package is opentelemetry.proto.profiles.v1development): Collectors accept
// it only with the feature gate service.profilesSupport. A profile is sent
// as one ExportProfilesServiceRequest (written with the Collector's own
// pdata/pprofile, of the version the tests' Collector is built from): one
// resource (service.name kernel_exporter, host.name), one scope, one
// profile, whose samples share the request's dictionary: the string,
// function, mapping, location, stack and attribute tables, each with the
// zero entry the specification reserves at index 0.
//
// Each sample's stack is innermost first, as in pprof; each location has
// one line naming its function, and the mapping of its module (the ELF
// file, or "[kernel.kallsyms]" for kernel frames). A sample's attributes
// are process.pid and thread.name (the comm). Values: samples for a CPU
// profile (sample type samples/count, period type cpu/nanoseconds, period
// 1e9/frequency); nanoseconds off the CPU for an off-CPU one
// (off_cpu/nanoseconds).
package otlpprofile

import (
	"fmt"
	"os"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pprofile"

	"github.com/kernel-exporter/kernel_exporter/profile"
)

// ScopeName names the instrumentation scope of every profile sent.
const ScopeName = "github.com/kernel-exporter/kernel_exporter/profile"

// dict builds the dictionary tables, each entry once.
type dict struct {
	d         pprofile.ProfilesDictionary
	strings   map[string]int32
	mappings  map[string]int32
	functions map[string]int32
	locations map[[2]string]int32
	stacks    map[string]int32
	attrs     map[string]int32
}

func newDict(d pprofile.ProfilesDictionary) *dict {
	t := &dict{d: d, strings: map[string]int32{}, mappings: map[string]int32{}, functions: map[string]int32{},
		locations: map[[2]string]int32{}, stacks: map[string]int32{}, attrs: map[string]int32{}}
	// Index 0 of every table is the zero value.
	t.str("")
	d.MappingTable().AppendEmpty()
	d.FunctionTable().AppendEmpty()
	d.LocationTable().AppendEmpty()
	d.StackTable().AppendEmpty()
	d.AttributeTable().AppendEmpty()
	return t
}

// intern returns the index of key in m, or appends it with add (which
// returns the new entry's index) the first time.
func intern[K comparable](m map[K]int32, key K, add func() int32) int32 {
	if i, ok := m[key]; ok {
		return i
	}
	i := add()
	m[key] = i
	return i
}

func (t *dict) str(s string) int32 {
	return intern(t.strings, s, func() int32 {
		t.d.StringTable().Append(s)
		return int32(t.d.StringTable().Len() - 1)
	})
}

func (t *dict) mapping(module string) int32 {
	return intern(t.mappings, module, func() int32 {
		t.d.MappingTable().AppendEmpty().SetFilenameStrindex(t.str(module))
		return int32(t.d.MappingTable().Len() - 1)
	})
}

func (t *dict) function(name string) int32 {
	return intern(t.functions, name, func() int32 {
		f := t.d.FunctionTable().AppendEmpty()
		f.SetNameStrindex(t.str(name))
		f.SetSystemNameStrindex(t.str(name))
		return int32(t.d.FunctionTable().Len() - 1)
	})
}

func (t *dict) location(f *profile.Frame) int32 {
	return intern(t.locations, [2]string{f.Module, f.Function}, func() int32 {
		l := t.d.LocationTable().AppendEmpty()
		l.SetMappingIndex(t.mapping(f.Module))
		l.Lines().AppendEmpty().SetFunctionIndex(t.function(f.Function))
		return int32(t.d.LocationTable().Len() - 1)
	})
}

func (t *dict) stack(frames []*profile.Frame) int32 {
	idx := make([]int32, len(frames))
	key := make([]byte, 0, 4*len(frames))
	for n, f := range frames {
		idx[n] = t.location(f)
		key = append(key, byte(idx[n]), byte(idx[n]>>8), byte(idx[n]>>16), byte(idx[n]>>24))
	}
	return intern(t.stacks, string(key), func() int32 {
		t.d.StackTable().AppendEmpty().LocationIndices().FromRaw(idx)
		return int32(t.d.StackTable().Len() - 1)
	})
}

// attr returns the index of attribute key=v, v an int64 or a string.
func (t *dict) attr(key string, v any) int32 {
	return intern(t.attrs, fmt.Sprintf("%s\x00%T\x00%v", key, v, v), func() int32 {
		a := t.d.AttributeTable().AppendEmpty()
		a.SetKeyStrindex(t.str(key))
		switch v := v.(type) {
		case int64:
			a.Value().SetInt(v)
		case string:
			a.Value().SetStr(v)
		}
		return int32(t.d.AttributeTable().Len() - 1)
	})
}

// Convert returns p as OTLP profiles (see the package doc), with
// resource attribute service.version set to version.
func Convert(p *profile.Profile, version string) pprofile.Profiles {
	out := pprofile.NewProfiles()
	t := newDict(out.Dictionary())
	rp := out.ResourceProfiles().AppendEmpty()
	attrs := rp.Resource().Attributes()
	attrs.PutStr("service.name", "kernel_exporter")
	if version != "" {
		attrs.PutStr("service.version", version)
	}
	if h, err := os.Hostname(); err == nil {
		attrs.PutStr("host.name", h)
	}
	sp := rp.ScopeProfiles().AppendEmpty()
	sp.Scope().SetName(ScopeName)
	sp.Scope().SetVersion(version)
	pr := sp.Profiles().AppendEmpty()
	pr.SetTime(pcommon.NewTimestampFromTime(p.Start))
	pr.SetDurationNano(uint64(p.Duration.Nanoseconds()))
	switch p.Kind {
	case profile.OffCPU:
		pr.SampleType().SetTypeStrindex(t.str("off_cpu"))
		pr.SampleType().SetUnitStrindex(t.str("nanoseconds"))
	default:
		pr.SampleType().SetTypeStrindex(t.str("samples"))
		pr.SampleType().SetUnitStrindex(t.str("count"))
		pr.PeriodType().SetTypeStrindex(t.str("cpu"))
		pr.PeriodType().SetUnitStrindex(t.str("nanoseconds"))
		if p.Frequency > 0 {
			pr.SetPeriod(1e9 / int64(p.Frequency))
		}
	}
	for i := range p.Samples {
		s := &p.Samples[i]
		ps := pr.Samples().AppendEmpty()
		ps.SetStackIndex(t.stack(s.Stack))
		ps.Values().Append(s.Value)
		ps.AttributeIndices().Append(t.attr("process.pid", int64(s.PID)), t.attr("thread.name", s.Comm))
	}
	return out
}
