// SPDX-License-Identifier: Apache-2.0

package profile

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Views of a flame graph: the levels between the root and the outermost
// frames (TreeOptions).
const (
	ViewComm    = "comm"    // one per comm, as folded stacks start (the default)
	ViewProcess = "process" // one per process: "comm (pid)"
	ViewCgroup  = "cgroup"  // one per cgroup (its path), then one per comm
	ViewStack   = "stack"   // none: the frames only
)

// ParseView returns the TreeOptions of view (ViewComm when ""); the error
// names the value.
func ParseView(view string) (TreeOptions, error) {
	switch view {
	case ViewComm, "":
		return TreeOptions{ByComm: true}, nil
	case ViewProcess:
		return TreeOptions{ByProcess: true}, nil
	case ViewCgroup:
		return TreeOptions{ByCgroup: true, ByComm: true}, nil
	case ViewStack:
		return TreeOptions{}, nil
	}
	return TreeOptions{}, fmt.Errorf("view %q: want %s, %s, %s or %s", view, ViewComm, ViewProcess, ViewCgroup, ViewStack)
}

// Bounds of the flame graphs sent as JSON (FlameTree, DiffTree): a frame
// narrower than MinFrameShare of the root is left out (at 2,000 pixels it
// would be a tenth of a pixel); if that still leaves more than
// MaxTreeNodes frames, the narrowest go until it does not.
const (
	MinFrameShare = 0.00005
	MaxTreeNodes  = 50_000
)

// FlameNode is one frame of a flame graph as the UI gets it: its name
// (n), kernel or not (k), module (m, user frames), total (t: the value of
// the samples whose stacks pass through it) and self value (s), and its
// children (c) sorted by name.
type FlameNode struct {
	Name     string       `json:"n"`
	Kernel   bool         `json:"k,omitempty"`
	Module   string       `json:"m,omitempty"`
	Total    int64        `json:"t"`
	Self     int64        `json:"s,omitempty"`
	Children []*FlameNode `json:"c,omitempty"`
}

// FlameGraph is a profile's flame graph as /profile/flame and
// /profile/cpu?format=tree send it.
type FlameGraph struct {
	// ID names the profile in the handler's recent profiles (for
	// /profile/flame and /profile/diff), 0 if it was not kept.
	ID        int     `json:"id"`
	Kind      Kind    `json:"kind"`
	Unit      string  `json:"unit"`
	Event     string  `json:"event,omitempty"`
	Frequency int     `json:"frequency,omitempty"`
	Start     string  `json:"start"`
	Seconds   float64 `json:"seconds"`
	// Filter says what the profile was taken of ("pid=123 comm=java"),
	// "" for the whole host.
	Filter string `json:"filter,omitempty"`
	View   string `json:"view"`
	// Total is the root's value; Pruned counts the frames left out (see
	// MinFrameShare).
	Total  int64      `json:"total"`
	Pruned int        `json:"pruned,omitempty"`
	Stats  FlameStats `json:"stats"`
	Tree   *FlameNode `json:"tree"`
}

// FlameStats are the counts of a profile the page shows under its graph.
type FlameStats struct {
	Samples       int64 `json:"samples"`
	UserFrames    int64 `json:"user_frames"`
	UserResolved  int64 `json:"user_resolved"`
	StacksLost    int64 `json:"stacks_lost,omitempty"`
	KernelFrames  int64 `json:"kernel_frames"`
	KernelResolve int64 `json:"kernel_resolved"`
}

// FlameTree returns the flame graph of p in view (see ParseView), with
// cgroup ids named by cgroupName (nil: "cgroup <id>"), narrow frames left
// out (MinFrameShare, MaxTreeNodes).
func FlameTree(p *Profile, view string, cgroupName func(uint64) string) (*FlameGraph, error) {
	o, err := ParseView(view)
	if err != nil {
		return nil, err
	}
	if view == "" {
		view = ViewComm
	}
	o.CgroupName = cgroupName
	root := p.Tree(o)
	g := &FlameGraph{Kind: p.Kind, Unit: p.Unit(), Event: p.Event, Frequency: p.Frequency,
		Start: p.Start.UTC().Format(time.RFC3339), Seconds: p.Duration.Seconds(), View: view, Total: root.Total}
	st := p.Stats
	g.Stats = FlameStats{Samples: int64(st.Samples), UserFrames: st.Symbols.UserFrames, UserResolved: st.Symbols.UserResolved,
		StacksLost:   int64(st.KernelStacksLost + st.UserStacksLost + st.StacksMissing),
		KernelFrames: st.Symbols.KernelFrames, KernelResolve: st.Symbols.KernelResolved}
	if g.Stats.Samples == 0 {
		for i := range p.Samples {
			g.Stats.Samples += p.Samples[i].Count
		}
	}
	min := pruneFloor(root.Total, countNodes(root), func(visit func(int64)) {
		walkNodes(root, func(n *Node) { visit(n.Total) })
	})
	g.Tree, g.Pruned = flameNode(root, min)
	return g, nil
}

// pruneFloor returns the smallest value a frame keeps: MinFrameShare of
// total, raised until at most MaxTreeNodes frames are at or above it.
// values visits every frame's value.
func pruneFloor(total int64, nodes int, values func(func(int64))) int64 {
	floor := int64(float64(total) * MinFrameShare)
	if nodes <= MaxTreeNodes {
		return floor
	}
	var all []int64
	values(func(v int64) { all = append(all, v) })
	slices.SortFunc(all, func(a, b int64) int { return cmp.Compare(b, a) })
	if len(all) > MaxTreeNodes {
		// Ties at the cut go too.
		floor = max(floor, all[MaxTreeNodes-1]+1)
	}
	return floor
}

func countNodes(n *Node) int {
	c := 1
	for _, ch := range n.Children {
		c += countNodes(ch)
	}
	return c
}

func walkNodes(n *Node, f func(*Node)) {
	f(n)
	for _, c := range n.Children {
		walkNodes(c, f)
	}
}

// flameNode converts n, leaving out the frames below floor (the root
// stays), and returns how many were left out.
func flameNode(n *Node, floor int64) (*FlameNode, int) {
	out := &FlameNode{Name: n.Name, Kernel: n.Kernel, Total: n.Total, Self: n.Self}
	if !n.Kernel && n.Module != "" {
		out.Module = n.Module
	}
	pruned := 0
	for _, c := range n.Children {
		if c.Total < floor || c.Total == 0 {
			pruned += countNodes(c)
			continue
		}
		fc, p := flameNode(c, floor)
		out.Children = append(out.Children, fc)
		pruned += p
	}
	return out, pruned
}

// DiffFlameNode is one frame of a differential flame graph as the UI gets
// it: name (n), kernel (k), its share of the base profile (b) and of the
// new one (w), children (c) sorted by name.
type DiffFlameNode struct {
	Name     string           `json:"n"`
	Kernel   bool             `json:"k,omitempty"`
	Base     float64          `json:"b"`
	New      float64          `json:"w"`
	Children []*DiffFlameNode `json:"c,omitempty"`
}

// DiffFunction is a row of the grew and shrank tables: shares of each
// profile's total (0 to 1), by total and by self.
type DiffFunction struct {
	Function  string  `json:"function"`
	Kernel    bool    `json:"kernel,omitempty"`
	Base      float64 `json:"base"`
	New       float64 `json:"new"`
	Delta     float64 `json:"delta"`
	SelfDelta float64 `json:"self_delta"`
}

// DiffGraph is a comparison as /profile/diff sends it: the merged tree
// (widths: new shares; colours: new - base) and the functions whose share
// grew and shrank most, by total.
type DiffGraph struct {
	Kind      Kind           `json:"kind"`
	Unit      string         `json:"unit"`
	Base      string         `json:"base"`
	New       string         `json:"new"`
	BaseTotal int64          `json:"base_total"`
	NewTotal  int64          `json:"new_total"`
	Pruned    int            `json:"pruned,omitempty"`
	Tree      *DiffFlameNode `json:"tree"`
	Grew      []DiffFunction `json:"grew"`
	Shrank    []DiffFunction `json:"shrank"`
}

// DiffTopFunctions is how many functions DiffGraph lists as grown and as
// shrunk.
const DiffTopFunctions = 20

// NewDiffGraph returns d for the UI, the profiles named base and new.
func NewDiffGraph(d *DiffResult, base, new string) *DiffGraph {
	unit := "samples"
	if d.Kind == OffCPU {
		unit = "nanoseconds"
	}
	g := &DiffGraph{Kind: d.Kind, Unit: unit, Base: base, New: new, BaseTotal: d.BaseTotal, NewTotal: d.NewTotal,
		Grew: []DiffFunction{}, Shrank: []DiffFunction{}}
	// Frames are kept by the larger of their two shares, in units of
	// 1e-9 of the root.
	share := func(n *DiffNode) int64 { return int64(max(n.Base, n.New) * 1e9) }
	var count func(*DiffNode) int
	count = func(n *DiffNode) int {
		c := 1
		for _, ch := range n.Children {
			c += count(ch)
		}
		return c
	}
	var walk func(*DiffNode, func(int64))
	walk = func(n *DiffNode, f func(int64)) {
		f(share(n))
		for _, c := range n.Children {
			walk(c, f)
		}
	}
	floor := pruneFloor(1e9, count(d.Tree), func(f func(int64)) { walk(d.Tree, f) })
	var conv func(*DiffNode) *DiffFlameNode
	conv = func(n *DiffNode) *DiffFlameNode {
		out := &DiffFlameNode{Name: n.Name, Kernel: n.Kernel, Base: n.Base, New: n.New}
		for _, c := range n.Children {
			if share(c) < floor || share(c) == 0 {
				g.Pruned += count(c)
				continue
			}
			out.Children = append(out.Children, conv(c))
		}
		return out
	}
	g.Tree = conv(d.Tree)
	row := func(r DiffRow) DiffFunction {
		return DiffFunction{Function: r.Function, Kernel: r.Kernel, Base: r.Base.Total, New: r.New.Total, Delta: r.Delta.Total, SelfDelta: r.Delta.Self}
	}
	for _, r := range d.Grew(DiffTopFunctions, ByTotal) {
		g.Grew = append(g.Grew, row(r))
	}
	for _, r := range d.Shrank(DiffTopFunctions, ByTotal) {
		g.Shrank = append(g.Shrank, row(r))
	}
	return g
}

// String describes f as query parameters would ("pid=1,2 comm=java
// stacks=kernel"), "" for the whole host.
func (f Filter) String() string {
	var parts []string
	if len(f.PIDs) > 0 {
		s := make([]string, len(f.PIDs))
		for i, p := range f.PIDs {
			s[i] = strconv.FormatUint(uint64(p), 10)
		}
		parts = append(parts, "pid="+strings.Join(s, ","))
	}
	for _, c := range f.Comms {
		parts = append(parts, "comm="+printable(c))
	}
	for _, c := range f.Cgroups {
		parts = append(parts, "cgroup="+strconv.FormatUint(c, 10))
	}
	switch {
	case f.KernelOnly:
		parts = append(parts, "stacks=kernel")
	case f.UserOnly:
		parts = append(parts, "stacks=user")
	}
	if f.IncludeIdle {
		parts = append(parts, "idle=1")
	}
	return strings.Join(parts, " ")
}
