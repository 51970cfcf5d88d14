// SPDX-License-Identifier: Apache-2.0

package bpfstats

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kernel-exporter/kernel_exporter/collector"
	"github.com/kernel-exporter/kernel_exporter/loader"
)

// Defaults and bounds of a Collector's options (--collector.bpf.*).
const (
	// DefaultTTL is how long the series of a program gone from the host
	// are still served (with their last values), so that the increase of
	// its last window is seen by rate().
	DefaultTTL = 5 * time.Minute
	MinTTL     = time.Second
	MaxTTL     = 24 * time.Hour
	// DefaultMaxPrograms and DefaultMaxMaps bound the programs and maps
	// served one by one; the others are summed into one overflow series
	// per metric. Each program costs 6 series, each map 4.
	DefaultMaxPrograms = 2048
	DefaultMaxMaps     = 4096
	// DefaultRefresh: a scrape lists the host's objects again only when
	// the last scrape's listing is older (concurrent scrapes share one).
	DefaultRefresh = time.Second
	// listTimeout bounds one listing.
	listTimeout = 30 * time.Second
)

// Options configure a Collector.
type Options struct {
	// Lister lists the host's objects: the privileged helper's client, or
	// an *Enumerator in a process that holds CAP_SYS_ADMIN.
	Lister Lister
	// TTL, MaxPrograms, MaxMaps, Refresh: see the defaults above (0 takes
	// the default).
	TTL                  time.Duration
	MaxPrograms, MaxMaps int
	Refresh              time.Duration
	// Ours returns the exporter's own programs: config name by program
	// id (OursFromStatus). Nil: none.
	Ours func() map[uint32]string
	// Pod returns "<namespace>/<pod>" for a cgroup path that is a
	// Kubernetes pod's, "" otherwise; nil when the kube decoders are off.
	Pod func(cgroupPath string) string
	// ProcRoot is "/proc" unless tests change it.
	ProcRoot string
	Logger   *slog.Logger
	// Now is the clock (nil: time.Now), for tests.
	Now func() time.Time
	// StatsOn: this process keeps run-time statistics on for its whole
	// life (--bpf.stats), so every interval between two listings was
	// counted in full.
	StatsOn bool
	// SysctlOn reports whether kernel.bpf_stats_enabled is 1 (nil: read
	// /proc/sys/kernel/bpf_stats_enabled), for tests.
	SysctlOn func() bool
	// Probe tells whether statistics were on for a whole interval,
	// whoever held them on (a *StatsProbe; nil: none, only the sysctl
	// and StatsOn are known). See exact.go.
	Probe Probe
	// FirstListed, when set, is called once, at the end of the first
	// scrape or measuring window that listed: the serving process gives
	// back there what that one-off work (taking in a first listing,
	// making every series) used (exporter.ReleaseMemory).
	FirstListed func()
}

// Collector serves every BPF program and map of the host as metrics (see
// the package doc). Its counters advance at the end of each measuring
// window of the CPU budget (WindowStart, WindowEnd); a scrape lists the
// objects again for what else it serves. It is safe for concurrent use.
type Collector struct {
	opts   Options
	log    *slog.Logger
	owners *owners

	mu    sync.Mutex
	progs map[uint32]*progState
	maps  map[uint32]*mapState
	// Programs and maps served one by one.
	progSlots, mapSlots slots
	overflow            overflowSums
	listed              *Listing // the last listing
	listedAt            time.Time
	listMid             time.Time // the middle of the last listing
	scrapeListed        time.Time // when a scrape last listed
	listTook            time.Duration
	listErrs            uint64
	released            bool // FirstListed was called
	lastErrAt           time.Time
	// The window in progress: when its first listing started (zero: none).
	winStart time.Time
	// The last window: its length, end, and share of the period (the
	// sampled ratio; 0 before the first window ends).
	winLen   time.Duration
	winEnd   time.Time
	winRatio float64
	winCPU   float64 // CPU s/s of every program in it
	// winBase is when the window in progress listed its base.
	winBase time.Time
	// Exact intervals (see exact.go): statistics were on at the last
	// listing (lastOn); the run of exact intervals in progress started
	// at exactFrom (zero: the last interval was not exact); the last
	// exact interval ended at exactUntil.
	lastOn, exactNow bool
	// The probe's reading at the last listing (probeOK: taken), and
	// where our windows stand: one is open (winOpen), its first or last
	// listing is being made (winStarting, winEnding), and whether the
	// interval after the last listing started inside one (prevInWindow).
	probeOK, probeLast                         bool // probeLast: the last interval's verdict
	probeKernel, probeOwn                      uint64
	winOpen, winStarting, winEnding, prevInWin bool
	winExact                                   bool      // the window in progress began exact
	listedPrev                                 time.Time // the last listing (zero: none)
	exactFrom, exactUntil                      time.Time
}

// slots are the programs (or maps) served one by one, at most max: an
// object takes a slot when it comes while one is free, else it goes to the
// overflow sums; a slot freed goes to the overflowed object of lowest id.
type slots struct{ used, max int }

// take takes a slot, false when none is free.
func (s *slots) take() bool {
	if s.used >= s.max {
		return false
	}
	s.used++
	return true
}

func (s *slots) free() { s.used-- }

// slotted is a program's or map's state: whether it is in the overflow
// sums rather than served one by one.
type slotted interface {
	*progState | *mapState
	overflowed() *bool
}

func (st *progState) overflowed() *bool { return &st.overflow }
func (st *mapState) overflowed() *bool  { return &st.overflow }

// admit brings states to the ids of a listing, in its order: an unlisted
// state for which expire says so is deleted (its slot freed first, so
// that new objects can take it), overflowed states take the slots freed,
// lowest id first, and a new id gets a state made by fresh, served if a
// slot is free (seen records an overflow). It returns the listed states,
// in the listing's order.
func admit[S slotted](states map[uint32]S, ids []uint32, sl *slots, seen *bool, expire func(S) bool, fresh func() S) []S {
	listed := make(map[uint32]bool, len(ids))
	for _, id := range ids {
		listed[id] = true
	}
	for id, st := range states {
		if !listed[id] && expire(st) {
			if !*st.overflowed() {
				sl.free()
			}
			delete(states, id)
		}
	}
	for _, id := range ids {
		if st, ok := states[id]; ok && *st.overflowed() && sl.take() {
			*st.overflowed() = false
		}
	}
	out := make([]S, len(ids))
	for i, id := range ids {
		st, ok := states[id]
		if !ok {
			st = fresh()
			*st.overflowed() = !sl.take()
			*seen = *seen || *st.overflowed()
			states[id] = st
		}
		out[i] = st
	}
	return out
}

// overflowSums are the sums of the programs and maps not served one by
// one.
type overflowSums struct {
	seen           bool // a program or map went over its cap once
	runTime, runs  float64
	programs, maps int     // live ones (listed or not)
	insns, jited   float64 // of the live overflowed programs
	memory, max    float64 // of the live overflowed maps
}

// progState is what the collector keeps of one program.
type progState struct {
	p        Program
	owner    Owner
	config   string
	link     string // attach type and target, from its first link
	linkType string
	links    int
	overflow bool
	goneAt   time.Time // zero while listed
	// base holds the raw statistics at the start of the window in
	// progress; ok is false when the program was not listed then.
	base struct {
		ok            bool
		runTime, runs uint64
	}
	// last holds the raw statistics at the last listing; ok is false
	// when the program was not listed then.
	last struct {
		ok            bool
		runTime, runs uint64
	}
	// runTime (seconds) and runs are what is served: the kernel's counts
	// over exact intervals, plus the scaled counts of sampled windows.
	runTime, runs float64
	// counted: listed once at least (its counters started).
	counted bool
	// winEndRaw holds the raw statistics at the last window's end.
	winEndRaw struct {
		ok            bool
		runTime, runs uint64
	}
	// rate is the CPU s/s of its last window, perRun the ns per run.
	rate, perRun float64
	series       progSeries
}

// mapState is what the collector keeps of one map.
type mapState struct {
	m        Map
	owner    Owner
	config   string
	users    []uint32
	overflow bool
	series   mapSeries
}

// New returns a Collector with opts; nothing is listed until a scrape or
// a window.
func New(opts Options) *Collector {
	if opts.TTL <= 0 {
		opts.TTL = DefaultTTL
	}
	if opts.MaxPrograms <= 0 {
		opts.MaxPrograms = DefaultMaxPrograms
	}
	if opts.MaxMaps <= 0 {
		opts.MaxMaps = DefaultMaxMaps
	}
	if opts.Refresh <= 0 {
		opts.Refresh = DefaultRefresh
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	c := &Collector{opts: opts, log: log, owners: newOwners(opts.ProcRoot, opts.Pod),
		progs: map[uint32]*progState{}, maps: map[uint32]*mapState{},
		progSlots: slots{max: opts.MaxPrograms}, mapSlots: slots{max: opts.MaxMaps}}
	c.probeInterval() // the probe's first reading: the first listing's interval starts here
	return c
}

// CheckOptions returns an error naming the flag for a value out of range.
func CheckOptions(ttl time.Duration, maxPrograms, maxMaps int) error {
	if ttl < MinTTL || ttl > MaxTTL {
		return fmt.Errorf("--collector.bpf.ttl %v: must be %v to %v", ttl, MinTTL, MaxTTL)
	}
	if maxPrograms < 1 || maxPrograms > MaxPrograms {
		return fmt.Errorf("--collector.bpf.max-programs %d: must be 1 to %d", maxPrograms, MaxPrograms)
	}
	if maxMaps < 1 || maxMaps > MaxMaps {
		return fmt.Errorf("--collector.bpf.max-maps %d: must be 1 to %d", maxMaps, MaxMaps)
	}
	return nil
}

// list lists the host's objects and takes them in (update). Called with
// c.mu held. It returns nil when the listing failed (logged at most once
// a minute, counted).
func (c *Collector) list(ctx context.Context) *Listing {
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	t0 := c.opts.Now()
	l, err := c.opts.Lister.List(ctx)
	now := c.opts.Now()
	if err != nil {
		c.listErrs++
		if now.Sub(c.lastErrAt) >= time.Minute {
			c.lastErrAt = now
			c.log.Warn("host BPF collector: listing the host's BPF programs failed; serving the last listing", "err", err)
		}
		return nil
	}
	c.listTook = now.Sub(t0)
	// The statistics were read during the listing: its middle is when.
	c.listMid = t0.Add(c.listTook / 2)
	on := c.statsOn()
	probed := c.probeInterval()
	c.update(l, now)
	c.countExact(l, now, on, probed)
	return l
}

// update takes listing l, made at now, in: new programs and maps are
// admitted (one by one while under their caps, else to the overflow
// sums), gone ones marked, and those gone for TTL deleted.
func (c *Collector) update(l *Listing, now time.Time) {
	c.listed, c.listedAt = l, now
	var ours map[uint32]string
	if c.opts.Ours != nil {
		ours = c.opts.Ours()
	}
	holdersOK := l.HoldersErr == ""
	ph := programHolders(l)
	links := map[uint32][]Link{}
	for _, k := range l.Links {
		links[k.ProgID] = append(links[k.ProgID], k)
	}
	// Programs gone first, so that their slots are free for new ones. An
	// overflowed program's counts are in the overflow sums already:
	// nothing of it is served, so it goes at once; others after TTL.
	ids := make([]uint32, len(l.Programs))
	for i, p := range l.Programs {
		ids[i] = p.ID
	}
	progs := admit(c.progs, ids, &c.progSlots, &c.overflow.seen, func(st *progState) bool {
		if st.goneAt.IsZero() {
			st.goneAt = now
		}
		return st.overflow || now.Sub(st.goneAt) >= c.opts.TTL
	}, func() *progState { return &progState{} })
	c.overflow.programs, c.overflow.insns, c.overflow.jited = int(l.More[0]), 0, 0
	for i, p := range l.Programs {
		st := progs[i]
		st.p, st.goneAt = p, time.Time{}
		if holdersOK {
			h := ph[p.ID]
			st.owner = c.owners.resolve(h.PID, h.Comm, now)
		}
		st.config = ours[p.ID]
		st.links, st.linkType, st.link = len(links[p.ID]), "", ""
		if ks := links[p.ID]; len(ks) > 0 {
			if ks[0].HasAttach {
				st.linkType = AttachType(ks[0].AttachType)
			} else {
				st.linkType = LinkType(ks[0].Type)
			}
			st.link = ks[0].Target
		}
		if st.overflow {
			c.overflow.programs++
			c.overflow.insns += float64(p.VerifiedInsns)
			c.overflow.jited += float64(p.JitedBytes)
		}
	}

	mh := mapHolders(l, ph)
	users := mapUsers(l)
	c.overflow.maps, c.overflow.memory, c.overflow.max = int(l.More[1]), 0, 0
	// Maps have no counters: a gone map's series go at once.
	ids = make([]uint32, len(l.Maps))
	for i, m := range l.Maps {
		ids[i] = m.ID
	}
	maps := admit(c.maps, ids, &c.mapSlots, &c.overflow.seen, func(*mapState) bool { return true },
		func() *mapState { return &mapState{} })
	for i, m := range l.Maps {
		st := maps[i]
		st.m, st.users = m, users[m.ID]
		if holdersOK {
			h := mh[m.ID]
			st.owner = c.owners.resolve(h.PID, h.Comm, now)
		}
		st.config = ""
		for _, id := range st.users {
			if n := ours[id]; n != "" {
				st.config = n
				break
			}
		}
		if st.overflow {
			c.overflow.maps++
			c.overflow.memory += float64(m.Memlock)
			c.overflow.max += float64(m.MaxEntries)
		}
	}
}

// WindowStart is called by the CPU budget once BPF run-time statistics
// are on for a measuring window (budget.Observer): it lists the host's
// programs and keeps their statistics as the window's base. With
// continuous statistics, the last window's end is the base already.
func (c *Collector) WindowStart(ctx context.Context, continuous bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if continuous && !c.winStart.IsZero() {
		return
	}
	c.winStart = time.Time{}
	c.winOpen, c.winStarting, c.winExact = true, true, false
	l := c.list(ctx)
	c.winStarting = false
	if l == nil {
		return
	}
	c.winExact = !c.exactFrom.IsZero()
	c.firstDone()
	c.winStart, c.winBase = c.listMid, c.listedAt
	for _, st := range c.progs {
		st.base.ok = st.goneAt.IsZero()
		st.base.runTime, st.base.runs = st.p.RunTimeNs, st.p.RunCount
	}
}

// WindowEnd is called by the CPU budget at the end of a measuring window,
// before statistics go off (budget.Observer): it lists the programs again
// and adds to each program's counters what it ran during the window,
// scaled by the time since the previous window's end (period for the
// first) over the window's length. With continuous statistics
// (--bpf.stats) the scale is 1 and this end is the next window's base.
func (c *Collector) WindowEnd(ctx context.Context, period time.Duration, continuous bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	defer func() { c.winOpen = false }()
	if c.winStart.IsZero() {
		return
	}
	c.winEnding = true
	l := c.list(ctx)
	c.winEnding = false
	if l == nil {
		c.winStart = time.Time{}
		return
	}
	t1 := c.listMid
	elapsed := t1.Sub(c.winStart)
	if elapsed <= 0 {
		return
	}
	// A window stands for the time since the previous one ended (the
	// period, plus the time listing and reading took), measured; the
	// nominal period for the first window or after a gap.
	// Time counted exactly (exact.go) is not estimated again: a window
	// inside a run of exact intervals adds nothing, one that overlaps
	// the end or start of such a run adds nothing either (its estimate
	// would count that time twice), and otherwise a window stands for
	// the time since the previous window or the last exact interval
	// ended, whichever is later.
	exact := !c.exactFrom.IsZero() && !c.exactFrom.After(c.winBase)
	overlap := c.exactUntil.After(c.winBase)
	ref := c.winEnd
	if c.exactUntil.After(ref) {
		ref = c.exactUntil
	}
	cycle := period
	if d := t1.Sub(ref); !ref.IsZero() && d > elapsed && d <= 2*period {
		cycle = d
	}
	if !c.exactUntil.IsZero() && !c.exactUntil.Before(c.winBase) {
		// Exact up to this window's start (the probe saw another
		// holder's statistics): the window stands for itself.
		cycle = elapsed
	}
	scale := 1.0
	if !continuous && cycle > elapsed {
		scale = float64(cycle) / float64(elapsed)
	}
	add := !exact && !overlap
	// Exact since the previous window ended: the rates (landing page,
	// top five) are over that whole span, as the counters' rate() is,
	// not over this window alone.
	span, since := elapsed, !c.exactFrom.IsZero() && !c.winEnd.IsZero() && !c.exactFrom.After(c.winEnd)
	if since {
		span = t1.Sub(c.winEnd)
	}
	cpu := 0.0
	for _, st := range c.progs {
		st.rate, st.perRun = 0, 0
		prev := st.winEndRaw
		st.winEndRaw.ok = st.goneAt.IsZero()
		st.winEndRaw.runTime, st.winEndRaw.runs = st.p.RunTimeNs, st.p.RunCount
		if since && prev.ok && st.goneAt.IsZero() && st.p.RunTimeNs >= prev.runTime && st.p.RunCount >= prev.runs {
			dt, dn := float64(st.p.RunTimeNs-prev.runTime), float64(st.p.RunCount-prev.runs)
			st.rate = dt / float64(span)
			if dn > 0 {
				st.perRun = dt / dn
			}
			cpu += st.rate
			st.base.ok = continuous
			st.base.runTime, st.base.runs = st.p.RunTimeNs, st.p.RunCount
			continue
		}
		if !st.base.ok || !st.goneAt.IsZero() || st.p.RunTimeNs < st.base.runTime || st.p.RunCount < st.base.runs {
			st.base.ok = continuous && st.goneAt.IsZero()
			st.base.runTime, st.base.runs = st.p.RunTimeNs, st.p.RunCount
			continue
		}
		dt, dn := float64(st.p.RunTimeNs-st.base.runTime), float64(st.p.RunCount-st.base.runs)
		st.rate = dt / float64(elapsed)
		if dn > 0 {
			st.perRun = dt / dn
		}
		cpu += st.rate
		switch {
		case !add:
		case st.overflow:
			c.overflow.runTime += dt * scale / 1e9
			c.overflow.runs += dn * scale
		default:
			st.runTime += dt * scale / 1e9
			st.runs += dn * scale
		}
		st.base.ok = continuous
		st.base.runTime, st.base.runs = st.p.RunTimeNs, st.p.RunCount
	}
	c.winLen, c.winEnd, c.winCPU = span, t1, cpu
	c.winRatio = 1 / scale
	if !add {
		c.winRatio = 1
	}
	if continuous {
		c.winStart = t1
	} else {
		c.winStart = time.Time{}
	}
}

// Descriptors of the collector's metrics. Programs and maps are labelled
// by id, name, type and owner (the owning process' command name).
var (
	progLabels = []string{"id", "name", "type", "owner"}
	mapLabels  = []string{"id", "name", "type", "owner"}

	runSecondsDesc = prometheus.NewDesc("kernel_bpf_program_run_seconds_total",
		"CPU time the kernel spent running a BPF program of the host, summed over CPUs. "+
			"Exact while BPF run-time statistics are on all the time (kernel.bpf_stats_enabled=1, or --bpf.stats): the kernel's run_time_ns as it counts it. "+
			"Otherwise sampled: the run time counted during the CPU budget's measuring windows, times the period over the window (--bpf.budget-period / --bpf.budget-window, 30 with the defaults). "+
			"kernel_bpf_stats_sampled_ratio says which (mode=\"exact\" or \"sampled\") and the share of the time measured. rate() of it is the program's CPU seconds per second.", progLabels, nil)
	runsDesc = prometheus.NewDesc("kernel_bpf_program_runs_total",
		"Runs of a BPF program of the host, measured as kernel_bpf_program_run_seconds_total is: the kernel's run_cnt as it counts it while statistics are on all the time (exact), else the runs counted during the measuring windows times the period over the window (sampled).", progLabels, nil)
	insnsDesc = prometheus.NewDesc("kernel_bpf_program_verified_instructions",
		"Instructions the verifier processed when it loaded a BPF program of the host (Linux 5.16+; 0 before).", progLabels, nil)
	jitedDesc = prometheus.NewDesc("kernel_bpf_program_jited_bytes",
		"Size of a BPF program's JIT-compiled code (0 when not JIT-compiled).", progLabels, nil)
	progInfoDesc = prometheus.NewDesc("kernel_bpf_program_info",
		"A BPF program of the host; always 1. tag is the hash of its instructions; attach_type and attach_target come from its first BPF link (links counts them; empty without a link); "+
			"owner, pid, cgroup and pod are the process that holds it (lowest pid of those holding a descriptor of it or of its links; empty when none does); config is the kernel_exporter config that loaded it (empty: not ours).",
		[]string{"id", "name", "type", "tag", "attach_type", "attach_target", "links", "owner", "pid", "cgroup", "pod", "config"}, nil)
	mapMemoryDesc = prometheus.NewDesc("kernel_bpf_map_memory_bytes",
		"Kernel memory a BPF map of the host holds (memlock in its fdinfo).", mapLabels, nil)
	mapMaxDesc = prometheus.NewDesc("kernel_bpf_map_max_entries",
		"max_entries of a BPF map of the host (ring buffers: size in bytes).", mapLabels, nil)
	mapEntriesDesc = prometheus.NewDesc("kernel_bpf_map_entries",
		"Entries of a BPF map of the host where that is cheap to know: arrays (their max_entries), and hash maps as the kernel counts them (Linux 6.6+, bpf_map_sum_elem_count). Other maps have no series.", mapLabels, nil)
	mapInfoDesc = prometheus.NewDesc("kernel_bpf_map_info",
		"A BPF map of the host; always 1. programs lists the ids of the programs using it (at most 16, then \"+N\"); owner, pid, cgroup, pod as for programs (a map no process holds takes its first program's); config is the kernel_exporter config whose programs use it.",
		[]string{"id", "name", "type", "key_size", "value_size", "flags", "programs", "owner", "pid", "cgroup", "pod", "config"}, nil)
	programsDesc = prometheus.NewDesc("kernel_bpf_programs",
		"BPF programs loaded on the host at the last listing.", nil, nil)
	mapsDesc = prometheus.NewDesc("kernel_bpf_maps",
		"BPF maps on the host at the last listing.", nil, nil)
	progOverflowDesc = prometheus.NewDesc("kernel_bpf_programs_overflow",
		"BPF programs of the host not served one by one (over --collector.bpf.max-programs): summed into the series whose labels are all "+collector.OverflowValue+".", nil, nil)
	mapOverflowDesc = prometheus.NewDesc("kernel_bpf_maps_overflow",
		"BPF maps of the host not served one by one (over --collector.bpf.max-maps): summed into the series whose labels are all "+collector.OverflowValue+".", nil, nil)
	sampledDesc = prometheus.NewDesc("kernel_bpf_stats_sampled_ratio",
		"How the last counts of kernel_bpf_program_run_seconds_total and _runs_total were measured: mode=\"exact\" (value 1) when BPF run-time statistics were on all the time (kernel.bpf_stats_enabled=1 at every listing, or --bpf.stats) and the kernel's counts are served as they are; "+
			"mode=\"sampled\" with the share of the time the last measuring window covered (window / period), the counts being multiplied by its inverse. 0 before the first window ends or exact interval.", []string{"mode"}, nil)
	cpusDesc = prometheus.NewDesc("kernel_cpus_online",
		"Online CPUs of the host (/sys/devices/system/cpu/online): the CPU seconds per second they give, to make the rate of kernel_bpf_program_run_seconds_total a share of the host.", nil, nil)
	listDurationDesc = prometheus.NewDesc("kernel_exporter_bpf_list_duration_seconds",
		"Time the last listing of the host's BPF programs, maps and links took.", nil, nil)
	listErrorsDesc = prometheus.NewDesc("kernel_exporter_bpf_list_errors_total",
		"Listings of the host's BPF objects that failed (the last good one is served).", nil, nil)
)

var descs = []*prometheus.Desc{runSecondsDesc, runsDesc, insnsDesc, jitedDesc, progInfoDesc,
	mapMemoryDesc, mapMaxDesc, mapEntriesDesc, mapInfoDesc, programsDesc, mapsDesc,
	progOverflowDesc, mapOverflowDesc, sampledDesc, cpusDesc, listDurationDesc, listErrorsDesc}

// Describe sends every descriptor.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range descs {
		ch <- d
	}
}

// Collect lists the host's objects again when the last listing is older
// than Options.Refresh, and sends their series.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refresh()
	gauge := func(d *prometheus.Desc, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lv...)
	}
	counter := func(d *prometheus.Desc, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, lv...)
	}
	for id, st := range c.progs {
		if st.overflow {
			continue
		}
		st.collect(id, ch)
	}
	for id, st := range c.maps {
		if st.overflow {
			continue
		}
		st.collect(id, ch)
	}
	if o := c.overflow; o.seen {
		ov := []string{collector.OverflowValue, collector.OverflowValue, collector.OverflowValue, collector.OverflowValue}
		counter(runSecondsDesc, o.runTime, ov...)
		counter(runsDesc, o.runs, ov...)
		gauge(insnsDesc, o.insns, ov...)
		gauge(jitedDesc, o.jited, ov...)
		gauge(mapMemoryDesc, o.memory, ov...)
		gauge(mapMaxDesc, o.max, ov...)
	}
	if l := c.listed; l != nil {
		gauge(programsDesc, float64(len(l.Programs))+float64(l.More[0]))
		gauge(mapsDesc, float64(len(l.Maps))+float64(l.More[1]))
	}
	gauge(progOverflowDesc, float64(c.overflow.programs))
	gauge(mapOverflowDesc, float64(c.overflow.maps))
	if c.exactNow {
		gauge(sampledDesc, 1, "exact")
	} else {
		gauge(sampledDesc, c.winRatio, "sampled")
	}
	if cpus, err := loader.OnlineCPUs(); err == nil {
		gauge(cpusDesc, float64(len(cpus)))
	}
	gauge(listDurationDesc, c.listTook.Seconds())
	counter(listErrorsDesc, float64(c.listErrs))
	c.firstDone()
}

// refresh lists the host's objects for a scrape unless a scrape listed
// within Options.Refresh. Only a scrape's own listing makes the next
// scrapes wait: one a window made is not fresh enough for a scrape to
// serve exact counts as of the scrape. Called with c.mu held.
func (c *Collector) refresh() {
	now := c.opts.Now()
	if c.listed == nil || c.scrapeListed.IsZero() || now.Sub(c.scrapeListed) >= c.opts.Refresh {
		if c.list(context.Background()) != nil {
			c.scrapeListed = now
		}
	}
}

// firstDone starts Options.FirstListed once, at the end of the first
// Collect or window that listed: after the one-off work of taking in a
// first listing and making every series. Called with c.mu held.
func (c *Collector) firstDone() {
	if c.released || c.listed == nil {
		return
	}
	c.released = true
	if c.opts.FirstListed != nil {
		// Off the scrape's path: the scrape is not delayed by it.
		go c.opts.FirstListed()
	}
}

// isArray reports whether maps of type t always hold max_entries entries.
func isArray(t uint32) bool {
	switch MapType(t) {
	case "array", "percpu_array", "prog_array", "perf_event_array", "cgroup_array", "array_of_maps":
		return true
	}
	return false
}

// label makes text from outside (a command name, a path) a valid label
// value.
func label(s string) string { return collector.LabelValue(s) }

func pidLabel(pid uint32) string {
	if pid == 0 {
		return ""
	}
	return strconv.FormatUint(uint64(pid), 10)
}

// idList joins ids with commas, at most n of them, then "+<rest>".
func idList(ids []uint32, n int) string {
	var b strings.Builder
	for i, id := range ids {
		if i == n {
			fmt.Fprintf(&b, ",+%d", len(ids)-n)
			break
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatUint(uint64(id), 10))
	}
	return b.String()
}

// Summary is what the landing page shows of the host's BPF programs.
type Summary struct {
	// Measured: a window has ended; CPU is the CPU seconds per second
	// of every program in it (summed over CPUs), Window its length and
	// End its end.
	Measured bool
	CPU      float64
	Window   time.Duration
	End      time.Time
	// Programs and Maps on the host, and MapBytes their maps' memory,
	// at the last listing (Listed false before the first).
	Listed         bool
	Programs, Maps int
	MapBytes       uint64
	Top            []TopProgram
}

// TopProgram is one of the programs that used the most CPU in the last
// window.
type TopProgram struct {
	ID                        uint32
	Name, Type, Owner, Config string
	// CPU is CPU seconds per second; NsPerRun the mean run time.
	CPU, NsPerRun float64
}

// Summary returns the landing page's figures, with the n programs that
// used the most CPU in the last window. It does not list anything.
func (c *Collector) Summary(n int) Summary {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Summary{Measured: !c.winEnd.IsZero(), CPU: c.winCPU, Window: c.winLen, End: c.winEnd}
	if l := c.listed; l != nil {
		s.Listed = true
		s.Programs, s.Maps = len(l.Programs)+int(l.More[0]), len(l.Maps)+int(l.More[1])
		for _, m := range l.Maps {
			s.MapBytes += m.Memlock
		}
	}
	if !s.Measured {
		return s
	}
	for id, st := range c.progs {
		if st.goneAt.IsZero() && st.rate > 0 {
			s.Top = append(s.Top, TopProgram{ID: id, Name: st.p.Name, Type: ProgType(st.p.Type), Owner: st.owner.Comm,
				Config: st.config, CPU: st.rate, NsPerRun: st.perRun})
		}
	}
	slices.SortFunc(s.Top, func(a, b TopProgram) int {
		if c := cmp.Compare(b.CPU, a.CPU); c != 0 {
			return c
		}
		return cmpU32(a.ID, b.ID)
	})
	if len(s.Top) > n {
		s.Top = s.Top[:n]
	}
	return s
}

// Top5 returns a function of Summary(5) for the landing page
// (web.Options.HostBPF), nil for a nil collector.
func (c *Collector) Top5() func() Summary {
	if c == nil {
		return nil
	}
	return func() Summary { return c.Summary(5) }
}
