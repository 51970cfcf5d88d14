// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/kernel-exporter/kernel_exporter/audit"
	"github.com/kernel-exporter/kernel_exporter/exporter"
	"github.com/kernel-exporter/kernel_exporter/web"
)

// auditFlags are serve's flags of the self-audit (package audit).
type auditFlags struct {
	on       bool
	interval time.Duration
}

// addAuditFlags declares the audit's flags on c.
func addAuditFlags(c *kingpin.CmdClause) *auditFlags {
	f := &auditFlags{}
	c.Flag("audit", "Compare the events of each config with an audit section (biolatency, runqlat, softirq, oomkill, direct_reclaim) with the kernel's own count of them every --audit.interval, served as kernel_exporter_audit_ratio; --no-audit turns it off.").Default("true").BoolVar(&f.on)
	c.Flag("audit.interval", "How often the audit compares our events with the kernel's.").Default(audit.DefaultInterval.String()).DurationVar(&f.interval)
	return f
}

// check checks the audit's flags.
func (f *auditFlags) check() error {
	return audit.CheckInterval(f.interval)
}

// start registers the audit's metrics with exp and runs it until ctx is
// done; it returns the landing page's view of it, nil when it is off.
func (f *auditFlags) start(ctx context.Context, exp *exporter.Exporter, log *slog.Logger) func() map[string][]web.AuditState {
	if !f.on {
		return nil
	}
	a := audit.New(audit.Options{Interval: f.interval, Targets: exp.AuditTargets, Logger: log})
	exp.Registry.MustRegister(a)
	go a.Run(ctx)
	return func() map[string][]web.AuditState {
		out := map[string][]web.AuditState{}
		for c, ss := range a.States() {
			for _, s := range ss {
				out[c] = append(out[c], web.AuditState{Source: s.Source, Ratio: s.Ratio, HasRatio: s.HasRatio, InBand: s.InBand, Err: s.Err, Unavailable: s.Unavailable})
			}
		}
		return out
	}
}
