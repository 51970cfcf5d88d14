// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"fmt"
	"strings"

	"github.com/kernel-exporter/kernel_exporter/collector"
	"github.com/kernel-exporter/kernel_exporter/loader"
)

// ParseAttachTo turns --attach.to flag values into Options.AttachTo. Each
// value is "<config>=<function>" (every program of the config's attach_to
// now attaches to function) or "<config>.<program>=<function>" (one
// program). Every config named must be one of sources.
func ParseAttachTo(values []string, sources []Source) (map[string][]string, error) {
	out := map[string][]string{}
	for _, v := range values {
		lhs, fn, ok := strings.Cut(v, "=")
		if !ok || lhs == "" || fn == "" {
			return nil, fmt.Errorf("--attach.to %q: want <config>=<function> or <config>.<program>=<function>", v)
		}
		name, prog, dotted := strings.Cut(lhs, ".")
		if name == "" || dotted && prog == "" {
			return nil, fmt.Errorf("--attach.to %q: want <config>=<function> or <config>.<program>=<function>", v)
		}
		found := false
		for _, s := range sources {
			found = found || s.Name == name
		}
		if !found {
			return nil, fmt.Errorf("--attach.to %q: config %q is not being started", v, name)
		}
		spec := fn
		if prog != "" {
			spec = prog + "=" + fn
		}
		out[name] = append(out[name], spec)
	}
	return out, nil
}

// alternativeStates converts the loader's report for the status page.
func alternativeStates(alts []loader.Alternative) []collector.AlternativeState {
	var out []collector.AlternativeState
	for _, a := range alts {
		s := collector.AlternativeState{Name: a.Name, Chosen: a.ChosenName()}
		for i, err := range a.Errors {
			if err != nil {
				s.Passed = append(s.Passed, fmt.Sprintf("%s: %v", a.Choices[i], err))
			}
		}
		out = append(out, s)
	}
	return out
}
