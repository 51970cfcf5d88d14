// SPDX-License-Identifier: Apache-2.0

package main

import (
	"log/slog"
	"strconv"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/kernel-exporter/kernel_exporter/bpfstats"
	"github.com/kernel-exporter/kernel_exporter/exporter"
	"github.com/kernel-exporter/kernel_exporter/kube"
	"github.com/kernel-exporter/kernel_exporter/privsep"
)

// bpfFlags are serve's flags of the host BPF collector (package
// bpfstats).
type bpfFlags struct {
	on          bool
	ttl         time.Duration
	maxPrograms int
	maxMaps     int
}

// addBPFFlags declares the host BPF collector's flags on c.
func addBPFFlags(c *kingpin.CmdClause) *bpfFlags {
	f := &bpfFlags{}
	c.Flag("collector.bpf", "Serve every BPF program and map of the host as kernel_bpf_* metrics (run time and runs measured over the CPU budget's windows, owner process, map memory); --no-collector.bpf turns it off.").Default("true").BoolVar(&f.on)
	c.Flag("collector.bpf.ttl", "How long the series of a BPF program gone from the host are still served.").Default(bpfstats.DefaultTTL.String()).DurationVar(&f.ttl)
	c.Flag("collector.bpf.max-programs", "BPF programs of the host served one by one; the others are summed into one overflow series per metric.").Default(strconv.Itoa(bpfstats.DefaultMaxPrograms)).IntVar(&f.maxPrograms)
	c.Flag("collector.bpf.max-maps", "BPF maps of the host served one by one; the others are summed into one overflow series per metric.").Default(strconv.Itoa(bpfstats.DefaultMaxMaps)).IntVar(&f.maxMaps)
	return f
}

// check checks the collector's flags.
func (f *bpfFlags) check() error {
	return bpfstats.CheckOptions(f.ttl, f.maxPrograms, f.maxMaps)
}

// collector returns the host BPF collector of exp, or nil when it is off.
// It lists through the privileged helper; without one (it did not start,
// or --capabilities.keep=all keeps CAP_SYS_ADMIN here) it lists in this
// process.
//
// statsOn: --bpf.stats keeps statistics on for the process' life, so the
// kernel's counts are exact.
func (f *bpfFlags) collector(exp *exporter.Exporter, helper *privsep.Client, statsOn bool, probe bpfstats.Probe, log *slog.Logger) *bpfstats.Collector {
	if !f.on {
		return nil
	}
	lister := helper.Lister()
	if lister == nil {
		lister = bpfstats.NewEnumerator(bpfstats.Limits{})
	}
	return bpfstats.New(bpfstats.Options{Lister: lister, TTL: f.ttl, MaxPrograms: f.maxPrograms, MaxMaps: f.maxMaps,
		Ours: bpfstats.OursFromStatus(exp.Status), Pod: podOf(exp), Logger: log, StatsOn: statsOn, Probe: probe,
		FirstListed: func() { exporter.ReleaseMemory(log) }})
}

// statsProbe returns the statistics probe (bpfstats.StatsProbe), with
// which the host BPF collector and the CPU budget know that another
// process (bpftop) holds BPF run-time statistics on; nil when it cannot be
// made (logged). Made at start, while CAP_PERFMON is held.
func statsProbe(log *slog.Logger) bpfstats.Probe {
	p, err := bpfstats.NewStatsProbe()
	if err != nil {
		log.Info("no BPF statistics probe: counts are exact only while kernel.bpf_stats_enabled is 1 or with --bpf.stats", "err", err)
		return nil
	}
	return p
}

// podOf returns bpfstats.Options.Pod through the kube decoders' pod
// resolver: "<namespace>/<pod>" for a pod's cgroup, the pod's UID when
// the pod is not known (no --kube.node-name, or not yet seen), "" for a
// cgroup that is no pod's.
func podOf(exp *exporter.Exporter) func(string) string {
	return func(cgroup string) string {
		cg := kube.ParseCgroupPath(cgroup)
		if cg == nil {
			return ""
		}
		r, err := exp.KubeResolver()
		if err != nil {
			return cg.PodUID
		}
		n := r.Lookup(cg.PodUID, cg.ContainerID)
		if n.Namespace == "" {
			return n.Pod
		}
		return n.Namespace + "/" + n.Pod
	}
}
