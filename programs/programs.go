// SPDX-License-Identifier: Apache-2.0

// Package programs embeds the bundled BPF programs: for each name, a
// compiled CO-RE object <name>.bpf.o and its config <name>.yaml, built from
// <name>.bpf.c by "make bpf". See docs/programs.md for what each one measures.
package programs

import (
	"embed"
	"io/fs"
	"sort"
	"strings"
)

// FS holds <name>.yaml and <name>.bpf.o for every bundled program.
//
//go:embed *.yaml *.bpf.o
var FS embed.FS

// Default is the set that runs when --programs is not given.
var Default = []string{"timers", "biolatency", "runqlat"}

// Names returns the names of all bundled programs, sorted.
func Names() []string {
	entries, _ := fs.Glob(FS, "*.yaml")
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e, ".yaml"))
	}
	sort.Strings(names)
	return names
}
