// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"slices"

	"github.com/kernel-exporter/kernel_exporter/audit"
)

// AuditTargets returns the configs that are up or detached and have an
// audit section, in name order, for audit.Auditor: a detached config is
// still audited (its counters stop while the kernel's go on, which is
// what the audit is there to show).
func (e *Exporter) AuditTargets() []audit.Target {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []audit.Target
	for name, lc := range e.live {
		if len(lc.audit) == 0 {
			continue
		}
		out = append(out, audit.Target{Config: name, Read: lc.c.Read, Entries: lc.audit, MetricName: lc.ns})
	}
	slices.SortFunc(out, func(a, b audit.Target) int {
		if a.Config < b.Config {
			return -1
		}
		if a.Config > b.Config {
			return 1
		}
		return 0
	})
	return out
}
