// SPDX-License-Identifier: Apache-2.0

package profile

import (
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"time"

	pprof "github.com/google/pprof/profile"

	"github.com/kernel-exporter/kernel_exporter/profile/symbolize"
)

// Sample types of the pprof profiles written: [samples count, cpu
// nanoseconds] for CPU profiles (as Go's own CPU profiles), [blocks count,
// offcpu nanoseconds] for off-CPU ones. The last is the default.
func sampleTypes(k Kind) []*pprof.ValueType {
	if k == OffCPU {
		return []*pprof.ValueType{{Type: "blocks", Unit: "count"}, {Type: "offcpu", Unit: "nanoseconds"}}
	}
	return []*pprof.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}}
}

// WritePprof writes p as a gzipped pprof protobuf profile
// (github.com/google/pprof/proto/profile.proto), which go tool pprof,
// Pyroscope and speedscope read. Each sample carries a "comm" label and
// "pid" and "cgroup" numeric labels (go tool pprof -tagroot=comm groups by
// process); each module is a mapping with its build ID; kernel frames are
// in the mapping [kernel.kallsyms]. For a CPU profile whose frequency is
// unknown, the cpu value is the sample count.
func (p *Profile) WritePprof(w io.Writer) error {
	pp, err := p.Pprof()
	if err != nil {
		return err
	}
	return pp.Write(w)
}

// Pprof returns p as a pprof profile (see WritePprof).
func (p *Profile) Pprof() (*pprof.Profile, error) {
	types := sampleTypes(p.Kind)
	pp := &pprof.Profile{
		SampleType:        types,
		DefaultSampleType: types[1].Type,
		TimeNanos:         p.Start.UnixNano(),
		DurationNanos:     int64(p.Duration),
	}
	period := p.Period()
	if p.Kind == CPU {
		pp.PeriodType = &pprof.ValueType{Type: "cpu", Unit: "nanoseconds"}
		pp.Period = period
		if period == 0 {
			period = 1
		}
	}
	if p.Event != "" {
		c := "event=" + p.Event
		if p.Frequency > 0 {
			c += " frequency=" + strconv.Itoa(p.Frequency) + "Hz"
		}
		pp.Comments = []string{c, "kernel_exporter profile"}
	}
	type modKey struct{ module, buildID string }
	mappings := map[modKey]*pprof.Mapping{}
	functions := map[[2]string]*pprof.Function{}
	locations := map[*Frame]*pprof.Location{}
	location := func(f *Frame) *pprof.Location {
		if l, ok := locations[f]; ok {
			return l
		}
		mk := modKey{f.Module, f.BuildID}
		m, ok := mappings[mk]
		if !ok {
			m = &pprof.Mapping{ID: uint64(len(pp.Mapping) + 1), File: f.Module, BuildID: f.BuildID, Limit: ^uint64(0),
				HasFunctions: true}
			mappings[mk] = m
			pp.Mapping = append(pp.Mapping, m)
		}
		fk := [2]string{f.Module, f.Function}
		fn, ok := functions[fk]
		if !ok {
			fn = &pprof.Function{ID: uint64(len(pp.Function) + 1), Name: f.Function, SystemName: f.Function, Filename: f.Module}
			functions[fk] = fn
			pp.Function = append(pp.Function, fn)
		}
		l := &pprof.Location{ID: uint64(len(pp.Location) + 1), Mapping: m, Line: []pprof.Line{{Function: fn}}}
		locations[f] = l
		pp.Location = append(pp.Location, l)
		return l
	}
	for i := range p.Samples {
		s := &p.Samples[i]
		ps := &pprof.Sample{
			Label:    map[string][]string{"comm": {s.Comm}},
			NumLabel: map[string][]int64{"pid": {int64(s.PID)}, "cgroup": {int64(s.Cgroup)}},
		}
		if p.Kind == CPU {
			ps.Value = []int64{s.Count, s.Count * period}
		} else {
			ps.Value = []int64{s.Count, s.Value}
		}
		for _, f := range s.Stack {
			ps.Location = append(ps.Location, location(f))
		}
		pp.Sample = append(pp.Sample, ps)
	}
	if err := pp.CheckValid(); err != nil {
		return nil, fmt.Errorf("pprof profile: %w", err)
	}
	return pp, nil
}

// FromPprof converts a pprof profile, ours or another tool's (Go's CPU
// profiles, perf data converted with pprof), into a Profile. The kind is
// OffCPU when a sample type is "offcpu", else CPU. Count is the first
// sample type; Value is, for a CPU profile, the first of unit "count"
// (samples, as Session.Run gives), else the default (else the last)
// sample type. Frames come from each
// location's lines (inlined functions expanded, innermost first); a
// location without lines is named module+0xoffset. Kernel frames are those
// of the [kernel.kallsyms] mapping (or named with perf's "_[k]" suffix).
func FromPprof(pp *pprof.Profile) (*Profile, error) {
	if len(pp.SampleType) == 0 {
		return nil, fmt.Errorf("pprof profile without sample types")
	}
	p := &Profile{Kind: CPU, Start: time.Unix(0, pp.TimeNanos), Duration: time.Duration(pp.DurationNanos)}
	vi := len(pp.SampleType) - 1
	for i, t := range pp.SampleType {
		if t.Type == "offcpu" {
			p.Kind = OffCPU
		}
		if pp.DefaultSampleType != "" && t.Type == pp.DefaultSampleType {
			vi = i
		}
	}
	if p.Kind == CPU {
		for i, t := range pp.SampleType {
			if t.Unit == "count" {
				vi = i
				break
			}
		}
	}
	if p.Kind == CPU && pp.Period > 0 && pp.PeriodType != nil && pp.PeriodType.Unit == "nanoseconds" {
		p.Frequency = int(time.Second / time.Duration(pp.Period))
	}
	for _, c := range pp.Comments {
		for _, f := range strings.Fields(c) {
			if ev, ok := strings.CutPrefix(f, "event="); ok {
				p.Event = ev
			}
		}
	}
	frames := newInterner()
	for _, s := range pp.Sample {
		if len(s.Value) != len(pp.SampleType) {
			return nil, fmt.Errorf("pprof sample with %d values for %d sample types", len(s.Value), len(pp.SampleType))
		}
		out := Sample{Value: s.Value[vi], Count: s.Value[0]}
		if c := s.Label["comm"]; len(c) > 0 {
			out.Comm = c[0]
		}
		if v := s.NumLabel["pid"]; len(v) > 0 && v[0] >= 0 && v[0] <= 1<<32-1 {
			out.PID = uint32(v[0])
		}
		if v := s.NumLabel["cgroup"]; len(v) > 0 && v[0] >= 0 {
			out.Cgroup = uint64(v[0])
		}
		for _, l := range s.Location {
			module, buildID := "", ""
			var start, offset uint64
			if l.Mapping != nil {
				module, buildID, start, offset = l.Mapping.File, l.Mapping.BuildID, l.Mapping.Start, l.Mapping.Offset
			}
			kernel := module == symbolize.KernelModule || strings.HasPrefix(module, "[kernel.kallsyms]")
			// In no file: named by the sample's command, never by an
			// address that means nothing outside its process.
			noFile := !kernel && (module == "" || strings.HasPrefix(module, "["))
			base := module
			if module == "" {
				base = "[unknown]"
			}
			if len(l.Line) == 0 {
				name := path.Base(module) + "+0x" + strconv.FormatUint(l.Address-start+offset, 16)
				if noFile {
					name = symbolize.UnknownName(base, out.Comm)
				}
				out.Stack = append(out.Stack, frames.get(kernel, false, module, name, buildID))
				continue
			}
			for _, line := range l.Line {
				name := "[unknown]"
				if line.Function != nil && line.Function.Name != "" {
					name = line.Function.Name
				}
				if noFile && strings.HasPrefix(name, base+"+0x") {
					// Written so by an earlier version.
					name = symbolize.UnknownName(base, out.Comm)
				}
				k := kernel
				if n, ok := strings.CutSuffix(name, kernelSuffix); ok {
					name, k = n, true
				}
				out.Stack = append(out.Stack, frames.get(k, true, module, name, buildID))
			}
		}
		p.Samples = append(p.Samples, out)
	}
	return p, nil
}

// interner makes one *Frame per (kernel, module, function).
type interner map[[3]string]*Frame

func newInterner() interner { return interner{} }

func (in interner) get(kernel, resolved bool, module, function, buildID string) *Frame {
	k := [3]string{"u", module, function}
	if kernel {
		k[0] = "k"
	}
	if f, ok := in[k]; ok {
		return f
	}
	f := &Frame{Function: function, Module: module, BuildID: buildID, Kernel: kernel, Resolved: resolved}
	in[k] = f
	return f
}
