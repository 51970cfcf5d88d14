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
	"os"
	"strconv"

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

func (t *dict) str(s string) int32 {
	if i, ok := t.strings[s]; ok {
		return i
	}
	i := int32(t.d.StringTable().Len())
	t.d.StringTable().Append(s)
	t.strings[s] = i
	return i
}

func (t *dict) mapping(module string) int32 {
	if i, ok := t.mappings[module]; ok {
		return i
	}
	i := int32(t.d.MappingTable().Len())
	t.d.MappingTable().AppendEmpty().SetFilenameStrindex(t.str(module))
	t.mappings[module] = i
	return i
}

func (t *dict) function(name string) int32 {
	if i, ok := t.functions[name]; ok {
		return i
	}
	i := int32(t.d.FunctionTable().Len())
	f := t.d.FunctionTable().AppendEmpty()
	f.SetNameStrindex(t.str(name))
	f.SetSystemNameStrindex(t.str(name))
	t.functions[name] = i
	return i
}

func (t *dict) location(f *profile.Frame) int32 {
	k := [2]string{f.Module, f.Function}
	if i, ok := t.locations[k]; ok {
		return i
	}
	i := int32(t.d.LocationTable().Len())
	l := t.d.LocationTable().AppendEmpty()
	l.SetMappingIndex(t.mapping(f.Module))
	l.Lines().AppendEmpty().SetFunctionIndex(t.function(f.Function))
	t.locations[k] = i
	return i
}

func (t *dict) stack(frames []*profile.Frame) int32 {
	idx := make([]int32, len(frames))
	key := make([]byte, 0, 4*len(frames))
	for n, f := range frames {
		idx[n] = t.location(f)
		key = append(key, byte(idx[n]), byte(idx[n]>>8), byte(idx[n]>>16), byte(idx[n]>>24))
	}
	if i, ok := t.stacks[string(key)]; ok {
		return i
	}
	i := int32(t.d.StackTable().Len())
	t.d.StackTable().AppendEmpty().LocationIndices().FromRaw(idx)
	t.stacks[string(key)] = i
	return i
}

// attrInt and attrStr return the index of attribute key=v.
func (t *dict) attrInt(key string, v int64) int32 {
	k := key + "\x00i" + strconv.FormatInt(v, 10)
	if i, ok := t.attrs[k]; ok {
		return i
	}
	i := int32(t.d.AttributeTable().Len())
	a := t.d.AttributeTable().AppendEmpty()
	a.SetKeyStrindex(t.str(key))
	a.Value().SetInt(v)
	t.attrs[k] = i
	return i
}

func (t *dict) attrStr(key, v string) int32 {
	k := key + "\x00s" + v
	if i, ok := t.attrs[k]; ok {
		return i
	}
	i := int32(t.d.AttributeTable().Len())
	a := t.d.AttributeTable().AppendEmpty()
	a.SetKeyStrindex(t.str(key))
	a.Value().SetStr(v)
	t.attrs[k] = i
	return i
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
		ps.AttributeIndices().Append(t.attrInt("process.pid", int64(s.PID)), t.attrStr("thread.name", s.Comm))
	}
	return out
}
