// SPDX-License-Identifier: Apache-2.0

// Package otlpprofile sends profiles (package profile) over OTLP, the
// OpenTelemetry protocol, to a Collector: --otlp.profiles.
//
// The OTLP profiles signal is still in development upstream (its protobuf
// package is opentelemetry.proto.profiles.v1development): Collectors accept
// it only with the feature gate service.profilesSupport. A profile is sent
// as one ExportProfilesServiceRequest of opentelemetry-proto v1.10.0 (the
// version of the tests' Collector, v0.150.0), written field by field with
// protowire (encode.go): one resource (service.name kernel_exporter,
// service.version, host.name), one scope, one profile, whose samples share
// the request's dictionary: the string, function, mapping, location, stack
// and attribute tables, each with the zero entry the specification
// reserves at index 0.
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

	"github.com/kernel-exporter/kernel_exporter/profile"
)

// ScopeName names the instrumentation scope of every profile sent.
const ScopeName = "github.com/kernel-exporter/kernel_exporter/profile"

// Field numbers of opentelemetry.proto.profiles.v1development.ProfilesDictionary.
const (
	fDictMapping  = 1
	fDictLocation = 2
	fDictFunction = 3
	fDictString   = 5
	fDictAttr     = 6
	fDictStack    = 7
)

// table is one dictionary table: its entries, already encoded as repeated
// field num of ProfilesDictionary, and their count.
type table struct {
	num protoNum
	buf message
	n   int32
}

// add appends an entry (a message, or a string for the string table) and
// returns its index.
func (t *table) add(entry []byte) int32 {
	t.buf.bytes(t.num, entry)
	t.n++
	return t.n - 1
}

// dict builds the dictionary tables, each entry once.
type dict struct {
	strs, mappings, functions, locations, stacks, attrs table

	strIdx      map[string]int32
	mappingIdx  map[string]int32
	functionIdx map[string]int32
	locationIdx map[[2]string]int32
	stackIdx    map[string]int32
	attrIdx     map[string]int32
}

func newDict() *dict {
	t := &dict{
		strs: table{num: fDictString}, mappings: table{num: fDictMapping}, functions: table{num: fDictFunction},
		locations: table{num: fDictLocation}, stacks: table{num: fDictStack}, attrs: table{num: fDictAttr},
		strIdx: map[string]int32{}, mappingIdx: map[string]int32{}, functionIdx: map[string]int32{},
		locationIdx: map[[2]string]int32{}, stackIdx: map[string]int32{}, attrIdx: map[string]int32{},
	}
	// Index 0 of every table is the zero value: an empty string or message.
	t.str("")
	for _, tb := range []*table{&t.mappings, &t.functions, &t.locations, &t.stacks, &t.attrs} {
		tb.add(nil)
	}
	t.stackIdx[""] = 0 // an empty stack is the zero entry
	return t
}

// intern returns the index of key in m, or adds it with add (which
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
	return intern(t.strIdx, s, func() int32 { return t.strs.add([]byte(s)) })
}

// mapping: Mapping{filename_strindex 4}.
func (t *dict) mapping(module string) int32 {
	return intern(t.mappingIdx, module, func() int32 {
		var m message
		m.int32(4, t.str(module))
		return t.mappings.add(m)
	})
}

// function: Function{name_strindex 1, system_name_strindex 2}.
func (t *dict) function(name string) int32 {
	return intern(t.functionIdx, name, func() int32 {
		var m message
		s := t.str(name)
		m.int32(1, s)
		m.int32(2, s)
		return t.functions.add(m)
	})
}

// location: Location{mapping_index 1, lines 3: Line{function_index 1}}.
func (t *dict) location(f *profile.Frame) int32 {
	return intern(t.locationIdx, [2]string{f.Module, f.Function}, func() int32 {
		var m, line message
		m.int32(1, t.mapping(f.Module))
		line.int32(1, t.function(f.Function))
		m.bytes(3, line)
		return t.locations.add(m)
	})
}

// stack: Stack{location_indices 1, packed}.
func (t *dict) stack(frames []*profile.Frame) int32 {
	idx := make([]int32, len(frames))
	key := make([]byte, 0, 4*len(frames))
	for n, f := range frames {
		idx[n] = t.location(f)
		key = append(key, byte(idx[n]), byte(idx[n]>>8), byte(idx[n]>>16), byte(idx[n]>>24))
	}
	return intern(t.stackIdx, string(key), func() int32 {
		var m message
		m.packedInt32(1, idx)
		return t.stacks.add(m)
	})
}

// attr: KeyValueAndUnit{key_strindex 1, value 2: AnyValue}.
func (t *dict) attrInt(key string, v int64) int32 {
	return intern(t.attrIdx, key+"\x00i"+strconv.FormatInt(v, 10), func() int32 {
		var m message
		m.int32(1, t.str(key))
		m.bytes(2, anyInt(v))
		return t.attrs.add(m)
	})
}

func (t *dict) attrStr(key, v string) int32 {
	return intern(t.attrIdx, key+"\x00s"+v, func() int32 {
		var m message
		m.int32(1, t.str(key))
		m.bytes(2, anyString(v))
		return t.attrs.add(m)
	})
}

// encode returns the ProfilesDictionary message, its tables in field order.
func (t *dict) encode() message {
	var m message
	for _, tb := range []*table{&t.mappings, &t.locations, &t.functions, &t.strs, &t.attrs, &t.stacks} {
		m = append(m, tb.buf...)
	}
	return m
}

// AnyValue{string_value 1} and AnyValue{int_value 3}: members of a oneof,
// written even when zero.
func anyString(v string) message {
	var m message
	m.bytes(1, []byte(v))
	return m
}

func anyInt(v int64) message {
	var m message
	m.varintAlways(3, uint64(v))
	return m
}

// keyValue: common.v1.KeyValue{key 1, value 2}, a string value.
func keyValue(k, v string) message {
	var m message
	m.str(1, k)
	m.bytes(2, anyString(v))
	return m
}

// valueType: ValueType{type_strindex 1, unit_strindex 2}.
func valueType(typ, unit int32) message {
	var m message
	m.int32(1, typ)
	m.int32(2, unit)
	return m
}

// Encode returns p as an ExportProfilesServiceRequest (see the package
// doc), with resource attribute service.version set to version.
func Encode(p *profile.Profile, version string) []byte {
	t := newDict()

	// Profile: sample_type 1, samples 2, time_unix_nano 3 (fixed64),
	// duration_nano 4, period_type 5, period 6.
	var pr message
	switch p.Kind {
	case profile.OffCPU:
		pr.bytes(1, valueType(t.str("off_cpu"), t.str("nanoseconds")))
	default:
		pr.bytes(1, valueType(t.str("samples"), t.str("count")))
	}
	var attrs [2]int32
	for i := range p.Samples {
		s := &p.Samples[i]
		// Sample: stack_index 1, attribute_indices 2 (packed), values 4
		// (packed).
		var sm message
		sm.int32(1, t.stack(s.Stack))
		attrs[0], attrs[1] = t.attrInt("process.pid", int64(s.PID)), t.attrStr("thread.name", s.Comm)
		sm.packedInt32(2, attrs[:])
		sm.packedInt64(4, s.Value)
		pr.bytes(2, sm)
	}
	if !p.Start.IsZero() {
		pr.fixed64(3, uint64(p.Start.UnixNano()))
	}
	pr.varint(4, uint64(p.Duration.Nanoseconds()))
	if p.Kind != profile.OffCPU {
		pr.bytes(5, valueType(t.str("cpu"), t.str("nanoseconds")))
		if p.Frequency > 0 {
			pr.varint(6, uint64(1e9/int64(p.Frequency)))
		}
	}

	// Resource{attributes 1}.
	var res message
	res.bytes(1, keyValue("service.name", "kernel_exporter"))
	if version != "" {
		res.bytes(1, keyValue("service.version", version))
	}
	if h, err := os.Hostname(); err == nil {
		res.bytes(1, keyValue("host.name", h))
	}
	// InstrumentationScope{name 1, version 2}.
	var scope message
	scope.str(1, ScopeName)
	scope.str(2, version)
	// ScopeProfiles{scope 1, profiles 2}.
	var sp message
	sp.bytes(1, scope)
	sp.bytes(2, pr)
	// ResourceProfiles{resource 1, scope_profiles 2}.
	var rp message
	rp.bytes(1, res)
	rp.bytes(2, sp)

	// ExportProfilesServiceRequest{resource_profiles 1, dictionary 2}.
	var req message
	req.bytes(1, rp)
	req.bytes(2, t.encode())
	return req
}
