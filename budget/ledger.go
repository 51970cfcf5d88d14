// SPDX-License-Identifier: Apache-2.0

package budget

import (
	"fmt"
	"strings"
	"sync"

	"github.com/alecthomas/units"
)

// MemoryFlag is the command-line flag that sets the memory budget.
const MemoryFlag = "--bpf.memory-budget"

// DefaultMemoryBudget is the default of --bpf.memory-budget, in bytes:
// 256 MiB. Every bundled program together (--programs=all) is estimated at
// 24.7 MiB with 2 possible CPUs, 65.6 MiB with 256 and 189.2 MiB with 1024
// (per-CPU histograms grow with the CPUs); the default set at 1.4 to
// 1.9 MiB. So the default never refuses a bundled program on machines of
// up to 1024 CPUs, while one mistaken user map (a 4-million-entry hash is
// about 320 MiB) or a pile of them is refused before the kernel allocates
// it. TestDefaultMemoryBudget checks the figures.
const DefaultMemoryBudget = 256 << 20

// DefaultMemoryBudgetText is DefaultMemoryBudget as the flag's default.
const DefaultMemoryBudgetText = "256MiB"

// MinMemoryBudget and MaxMemoryBudget bound a budget other than 0: below
// 1 MiB is most likely a forgotten unit, above 1 TiB no budget at all.
const (
	MinMemoryBudget = 1 << 20
	MaxMemoryBudget = 1 << 40
)

// ParseMemoryBudget reads the value of --bpf.memory-budget: a number with
// a binary unit, as node_exporter's size flags take (alecthomas/units,
// the parser of kingpin's Bytes flags: 256MiB, 1.5GiB; B, KiB, MiB, GiB,
// TiB, and KB, MB, GB, TB read as the same powers of 1024), or 0 for no
// budget. The error names the flag and the value, and gives the bounds
// when the size is not 0 and not from MinMemoryBudget to MaxMemoryBudget.
func ParseMemoryBudget(s string) (uint64, error) {
	if s == "0" {
		return 0, nil
	}
	n, err := units.ParseBase2Bytes(s)
	if err != nil {
		if len(s) > 40 {
			s = s[:40] + "..."
		}
		return 0, fmt.Errorf("%s %q: not a size with a unit, as 256MiB or 1GiB (0: no budget)", MemoryFlag, s)
	}
	if n < 0 || n != 0 && (n < MinMemoryBudget || n > MaxMemoryBudget) {
		return 0, fmt.Errorf("%s %s: must be 0 (no budget) or from %s to %s", MemoryFlag, s, FormatBytes(MinMemoryBudget), FormatBytes(MaxMemoryBudget))
	}
	return uint64(n), nil
}

// Ledger enforces the memory budget: the estimated kernel memory of all
// configs' maps together stays under a limit. A config reserves its
// estimate before the kernel creates its maps (Reserve) and gives it back
// when its object is closed (Release). Configs load concurrently: the
// ledger is safe for concurrent use, and reservations are granted in the
// order they arrive, so when several configs together would go over the
// budget, whichever reserves last is refused.
type Ledger struct {
	limit    uint64 // bytes; 0: no budget
	exceeded *Exceeded

	mu   sync.Mutex
	held map[string]uint64 // config -> bytes reserved
	used uint64
}

// NewLedger returns a ledger with a budget of limit bytes (0: no budget,
// every reservation is granted and recorded). Refusals are counted in
// exceeded (with resource ResourceMemory) when it is not nil.
func NewLedger(limit uint64, exceeded *Exceeded) *Ledger {
	return &Ledger{limit: limit, exceeded: exceeded, held: map[string]uint64{}}
}

// MemoryError is the error of a refused reservation.
type MemoryError struct {
	Config string
	Need   Estimate // the config's maps
	Left   uint64   // bytes of the budget left when it was refused
	Limit  uint64   // the budget, in bytes
}

func (e *MemoryError) Error() string {
	return fmt.Sprintf("maps need %s (%s), over the memory budget: %s of %s left (%s)",
		FormatBytes(e.Need.Total), biggest(e.Need, 2), FormatBytes(e.Left), FormatBytes(e.Limit), MemoryFlag)
}

// biggest names the n largest maps of est and sums the others.
func biggest(est Estimate, n int) string {
	var parts []string
	var rest uint64
	for i, m := range est.Maps {
		if i < n {
			parts = append(parts, fmt.Sprintf("map %s: %s", m.Name, FormatBytes(m.Bytes)))
			continue
		}
		rest = add(rest, m.Bytes)
	}
	if k := len(est.Maps) - n; k > 0 {
		parts = append(parts, fmt.Sprintf("%d more: %s", k, FormatBytes(rest)))
	}
	if len(parts) == 0 {
		return "no maps"
	}
	return strings.Join(parts, ", ")
}

// Reserve books need for config. It fails with a *MemoryError, and counts
// kernel_exporter_budget_exceeded_total{config,resource="memory"}, when
// need.Total is more than what the budget has left; then nothing is
// booked. A config that holds a reservation already has it replaced (what
// it held counts as left).
func (l *Ledger) Reserve(config string, need Estimate) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	used := l.used - l.held[config]
	if l.limit > 0 {
		left := l.limit - min(used, l.limit)
		if need.Total > left {
			if l.exceeded != nil {
				l.exceeded.Inc(config, ResourceMemory)
			}
			return &MemoryError{Config: config, Need: need, Left: left, Limit: l.limit}
		}
	}
	l.held[config] = need.Total
	l.used = add(used, need.Total)
	return nil
}

// Release gives back what config holds: call it when the config's object
// is closed (its load failed or timed out, the exporter closes, or the CPU
// budget detached it). Releasing a config that holds nothing does nothing.
func (l *Ledger) Release(config string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.used -= l.held[config]
	delete(l.held, config)
}

// ReleaseAll gives back every reservation (the exporter closing).
func (l *Ledger) ReleaseAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	clear(l.held)
	l.used = 0
}

// Held returns the bytes config holds (0 if none).
func (l *Ledger) Held(config string) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held[config]
}

// Used returns the bytes reserved by all configs.
func (l *Ledger) Used() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.used
}

// Limit returns the budget in bytes (0: no budget).
func (l *Ledger) Limit() uint64 { return l.limit }

// FormatBytes writes n bytes with a binary unit: "256 MiB", "1.1 GiB",
// "912 bytes".
func FormatBytes(n uint64) string {
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	if n < 1024 {
		return fmt.Sprintf("%d bytes", n)
	}
	u, d := 0, uint64(1024)
	for u+1 < len(units) && n/d >= 1024 {
		u, d = u+1, d*1024
	}
	if n%d == 0 {
		return fmt.Sprintf("%d %s", n/d, units[u])
	}
	return fmt.Sprintf("%.1f %s", float64(n)/float64(d), units[u])
}
