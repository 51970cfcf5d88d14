// SPDX-License-Identifier: Apache-2.0

package profile

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
)

// Node is one frame of a flame graph: the samples whose stacks pass
// through the path from the root to it. The root is "all".
type Node struct {
	Name   string
	Kernel bool
	// Module of the frame ("" for the root and process levels).
	Module string
	// Self is the value of the samples whose stack ends here; Total of
	// those that pass through here (Self plus the children's Total).
	Self, Total int64
	// Children, sorted by name (as flamegraph.pl draws them).
	Children []*Node

	index map[nodeKey]*Node
}

type nodeKey struct {
	kernel bool
	name   string
}

// TreeOptions configure Tree.
type TreeOptions struct {
	// ByProcess adds a level under the root per process: "comm (pid)"; a
	// per-process view.
	ByProcess bool
	// ByComm adds a level per comm (as folded stacks start).
	ByComm bool
	// ByCgroup adds a level per cgroup: CgroupName's name for its id, or
	// "cgroup 1234" (before the process or comm level when both are set).
	ByCgroup   bool
	CgroupName func(id uint64) string
}

// Tree returns the flame graph of p: a root "all" whose children are the
// outermost frames, down to the innermost.
func (p *Profile) Tree(o TreeOptions) *Node {
	root := &Node{Name: "all"}
	for i := range p.Samples {
		s := &p.Samples[i]
		n := root
		n.Total += s.Value
		if o.ByCgroup {
			name := ""
			if o.CgroupName != nil {
				name = o.CgroupName(s.Cgroup)
			}
			if name == "" {
				name = "cgroup " + strconv.FormatUint(s.Cgroup, 10)
			}
			n = n.child(false, name, "")
			n.Total += s.Value
		}
		if o.ByProcess {
			n = n.child(false, s.Comm+" ("+strconv.FormatUint(uint64(s.PID), 10)+")", "")
			n.Total += s.Value
		} else if o.ByComm {
			n = n.child(false, s.Comm, "")
			n.Total += s.Value
		}
		for j := len(s.Stack) - 1; j >= 0; j-- {
			f := s.Stack[j]
			n = n.child(f.Kernel, f.Function, f.Module)
			n.Total += s.Value
		}
		n.Self += s.Value
	}
	root.sort()
	return root
}

func (n *Node) child(kernel bool, name, module string) *Node {
	k := nodeKey{kernel, name}
	if c, ok := n.index[k]; ok {
		return c
	}
	if n.index == nil {
		n.index = map[nodeKey]*Node{}
	}
	c := &Node{Name: name, Kernel: kernel, Module: module}
	n.index[k] = c
	n.Children = append(n.Children, c)
	return c
}

func (n *Node) sort() {
	n.index = nil
	slices.SortFunc(n.Children, func(a, b *Node) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), cmpBool(a.Kernel, b.Kernel))
	})
	for _, c := range n.Children {
		c.sort()
	}
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

// FunctionStat is the value of one function in a profile.
type FunctionStat struct {
	Function string
	Kernel   bool
	// Module of the function's first frame seen.
	Module string
	// Self: samples where it is the innermost frame; Total: samples
	// whose stack holds it (once, however often it recurses).
	Self, Total int64
}

// Functions returns every function of p (by name and kernel or user) with
// its self and total values, sorted by total, highest first, then by name.
func (p *Profile) Functions() []FunctionStat {
	idx := map[nodeKey]int{}
	var out []FunctionStat
	seen := map[nodeKey]bool{}
	for i := range p.Samples {
		s := &p.Samples[i]
		clear(seen)
		for j, f := range s.Stack {
			k := nodeKey{f.Kernel, f.Function}
			n, ok := idx[k]
			if !ok {
				n = len(out)
				idx[k] = n
				out = append(out, FunctionStat{Function: f.Function, Kernel: f.Kernel, Module: f.Module})
			}
			if j == 0 {
				out[n].Self += s.Value
			}
			if !seen[k] {
				seen[k] = true
				out[n].Total += s.Value
			}
		}
	}
	slices.SortFunc(out, func(a, b FunctionStat) int {
		return cmp.Or(cmp.Compare(b.Total, a.Total), strings.Compare(a.Function, b.Function), cmpBool(a.Kernel, b.Kernel))
	})
	return out
}
