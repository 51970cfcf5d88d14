// SPDX-License-Identifier: Apache-2.0

package suggest

import (
	"slices"
	"strings"
	"testing"
)

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"abc", "", 3},
		{"", "abc", 3},
		{"biolatency", "biolatency", 0},
		{"biolatncy", "biolatency", 1},   // deletion
		{"biolatenccy", "biolatency", 1}, // insertion
		{"biolatemcy", "biolatency", 1},  // substitution
		{"biolatnecy", "biolatency", 1},  // adjacent swap
		{"runqlat", "timers", 7},
		{"kitten", "sitting", 3},
	} {
		if got := Distance(tc.a, tc.b); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := Distance(tc.b, tc.a); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d (symmetric)", tc.b, tc.a, got, tc.want)
		}
	}
}

func TestClosest(t *testing.T) {
	known := []string{"biolatency", "runqlat", "runqlat_cgroup", "timers", "softirq", "softirq_raise", "tcp_retransmit", "exec", "exec_trace"}
	for _, tc := range []struct {
		name string
		want []string
	}{
		{"biolatncy", []string{"biolatency"}},
		{"BIOLATENCY", []string{"biolatency"}}, // case is one more way to mistype
		{"runqlta", []string{"runqlat"}},
		{"timer", []string{"timers"}},
		{"exce", []string{"exec"}},
		{"softirqs", []string{"softirq"}},
		{"biolatency", nil}, // known: nothing to suggest
		{"nosuch", nil},
		{"x", nil},
		{"", nil},
		{strings.Repeat("a", maxName+1), nil},
		{"\xff\xfe", nil},
	} {
		if got := Closest(tc.name, known); !slices.Equal(got, tc.want) {
			t.Errorf("Closest(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
	// Nearest first, at most MaxSuggestions.
	got := Closest("abcd", []string{"abce", "abcf", "abc", "abcdef", "xbcd", "abcg"})
	if len(got) != MaxSuggestions || got[0] != "abce" {
		t.Errorf("Closest(abcd) = %q, want %d names starting with abce", got, MaxSuggestions)
	}
}

func TestDidYouMean(t *testing.T) {
	known := []string{"alpha", "alphb", "beta"}
	if got, want := DidYouMean("beta1", known, nil), " (did you mean beta?)"; got != want {
		t.Errorf("DidYouMean(beta1) = %q, want %q", got, want)
	}
	if got, want := DidYouMean("alphc", known, func(s string) string { return "--" + s }), " (did you mean --alpha or --alphb?)"; got != want {
		t.Errorf("DidYouMean(alphc) = %q, want %q", got, want)
	}
	if got := DidYouMean("zzz", known, nil); got != "" {
		t.Errorf("DidYouMean(zzz) = %q, want \"\"", got)
	}
}
