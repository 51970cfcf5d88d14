// SPDX-License-Identifier: Apache-2.0

package profile

import (
	"fmt"
	"sync"
	"time"
)

// Bounds of the profiles a Handler keeps for the UI (/profile/flame,
// /profile/diff): the last MaxRecentProfiles taken with ?format=tree, at
// most MaxRecentBytes together by their estimated size (a profile larger
// than that alone is not kept).
const (
	MaxRecentProfiles = 8
	MaxRecentBytes    = 16 << 20
)

// RecentProfile describes a kept profile, as /profile/recent lists them.
type RecentProfile struct {
	ID        int     `json:"id"`
	Kind      Kind    `json:"kind"`
	Start     string  `json:"start"`
	Seconds   float64 `json:"seconds"`
	Frequency int     `json:"frequency,omitempty"`
	Filter    string  `json:"filter,omitempty"`
	Total     int64   `json:"total"`
	// Label is a one-line description: "#3 cpu 10s at 12:03:04 UTC (pid=123)".
	Label string `json:"label"`
}

type kept struct {
	RecentProfile
	p     *Profile
	bytes int
}

// recent keeps the last profiles, oldest first.
type recent struct {
	mu    sync.Mutex
	next  int
	list  []*kept
	bytes int
}

// add keeps p, taken with filter, and returns its description; ID 0 when
// it is too large to keep.
func (r *recent) add(p *Profile, filter Filter) RecentProfile {
	d := RecentProfile{Kind: p.Kind, Start: p.Start.UTC().Format(time.RFC3339), Seconds: p.Duration.Seconds(),
		Frequency: p.Frequency, Filter: filter.String(), Total: p.Total()}
	size := profileBytes(p)
	if size > MaxRecentBytes {
		d.Label = describe(d)
		return d
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.next++
	d.ID = r.next
	d.Label = describe(d)
	for len(r.list) > 0 && (len(r.list) >= MaxRecentProfiles || r.bytes+size > MaxRecentBytes) {
		r.bytes -= r.list[0].bytes
		r.list = r.list[1:]
	}
	r.list = append(r.list, &kept{RecentProfile: d, p: p, bytes: size})
	r.bytes += size
	return d
}

func describe(d RecentProfile) string {
	s := fmt.Sprintf("#%d %s %.0fs at %s", d.ID, d.Kind, d.Seconds, d.Start[len("2006-01-02T"):len("2006-01-02T15:04:05")]+" UTC")
	if d.ID == 0 {
		s = s[len("#0 "):]
	}
	if d.Filter != "" {
		s += " (" + d.Filter + ")"
	}
	return s
}

// get returns the kept profile id.
func (r *recent) get(id int) (*kept, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range r.list {
		if k.ID == id {
			return k, true
		}
	}
	return nil, false
}

// all describes the kept profiles, newest first.
func (r *recent) all() []RecentProfile {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]RecentProfile, 0, len(r.list))
	for i := len(r.list) - 1; i >= 0; i-- {
		out = append(out, r.list[i].RecentProfile)
	}
	return out
}

// profileBytes estimates the memory p holds: its samples, their stacks and
// the frames they point to.
func profileBytes(p *Profile) int {
	n := 128
	frames := map[*Frame]bool{}
	for i := range p.Samples {
		s := &p.Samples[i]
		n += 80 + len(s.Comm) + 8*len(s.Stack)
		for _, f := range s.Stack {
			if !frames[f] {
				frames[f] = true
				n += 96 + len(f.Function) + len(f.Module) + len(f.BuildID)
			}
		}
	}
	return n
}
