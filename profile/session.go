// SPDX-License-Identifier: Apache-2.0

package profile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/kernel-exporter/kernel_exporter/budget"
	"github.com/kernel-exporter/kernel_exporter/profile/symbolize"
)

// grace is how long a read waits after flipping the generation before it
// reads the old one: the programs that read the old value run in
// interrupt context or with preemption off, for microseconds. (A virtual
// CPU the host deschedules mid-program can outlast it: that sample's
// count then lands in the next read of its generation, and on-CPU its
// stack may be lost.)
const grace = 2 * time.Millisecond

// Errors of Run.
var (
	// ErrBusy: the session is already running.
	ErrBusy = errors.New("a profile is already being taken")
	// ErrStopped: Stop ended the profile (the error wraps its cause too).
	ErrStopped = errors.New("profile stopped")
)

// Session takes profiles with one set of Options: each Run loads the BPF
// program, attaches it, collects until the duration ends or the context is
// done, detaches and unloads everything, and returns the profile. Runs are
// one at a time.
type Session struct {
	o   Options
	sym *symbolize.Symbolizer

	run   sync.Mutex // held by Run
	mu    sync.Mutex
	prog  *ebpf.Program // while attached
	stop  context.CancelCauseFunc
	start time.Time
}

// NewSession checks o and returns a session. The error names the field
// out of bounds.
func NewSession(o Options) (*Session, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	sym := o.Symbolizer
	if sym == nil {
		sym = symbolize.New(symbolize.Options{Logger: o.Logger})
	}
	return &Session{o: o, sym: sym}, nil
}

// Options returns the session's options with their defaults set.
func (s *Session) Options() Options { return s.o }

// Programs returns the session's BPF program while it is attached (for the
// CPU budget's run-time statistics), else nil.
func (s *Session) Programs() []budget.Program {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.prog == nil {
		return nil
	}
	return []budget.Program{s.prog}
}

// Started returns when the running profile started, and false when none
// is running.
func (s *Session) Started() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.start, s.prog != nil
}

// Stop ends the running profile early with cause: Run returns the profile
// so far and an error wrapping cause. It reports whether one was running.
func (s *Session) Stop(cause error) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stop == nil {
		return false
	}
	s.stop(cause)
	return true
}

// Run takes one profile: until Options.Duration has passed (0: no
// limit), or ctx is done, whichever comes first; a profile ended by
// ctx is returned whole, without error. It returns ErrBusy when a Run is
// in progress, a *budget.MemoryError when the maps do not fit the memory
// budget, an error wrapping the cause given to Stop, or the error of
// loading or attaching the program (wrapping loader.ErrUnsupported when
// this kernel or machine lacks what it needs). Nothing stays loaded or
// attached when it returns.
func (s *Session) Run(ctx context.Context) (*Profile, error) {
	if !s.run.TryLock() {
		return nil, ErrBusy
	}
	defer s.run.Unlock()
	o := s.o
	sp, err := loadSpec()
	if err != nil {
		return nil, err
	}
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, err
	}
	est, err := prepare(sp, o, cpus)
	if err != nil {
		return nil, err
	}
	ledger := o.Ledger
	if ledger == nil {
		ledger = budget.NewLedger(o.MemoryBudget, nil)
	}
	if err := ledger.Reserve(o.Name(), est); err != nil {
		return nil, err
	}
	defer ledger.Release(o.Name())
	sym, err := s.sym.NewSession()
	if err != nil {
		o.Logger.Warn("profile: kernel symbols unavailable: kernel frames show as addresses", "err", err)
	}
	objs, err := load(sp, o)
	if err != nil {
		return nil, err
	}
	defer objs.Close()
	c := newCollector(o, objs, sym)
	l, event, err := attach(objs, o)
	if err != nil {
		return nil, err
	}
	runCtx, stop := context.WithCancelCause(context.Background())
	defer stop(nil)
	s.mu.Lock()
	s.prog, s.stop, s.start = objs.prog, stop, time.Now()
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.prog, s.stop = nil, nil
		s.mu.Unlock()
	}()
	p := &Profile{Kind: o.Kind, Event: event, Start: time.Now()}
	if o.Kind == CPU {
		p.Frequency = o.Frequency
	}
	c.profile, c.agg, c.last = p, newAggregator(p), p.Start
	if o.OnStart != nil {
		o.OnStart()
	}
	var end <-chan time.Time
	if o.Duration > 0 {
		t := time.NewTimer(o.Duration)
		defer t.Stop()
		end = t.C
	}
	tick := time.NewTicker(o.Interval)
	defer tick.Stop()
	var runErr error
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-runCtx.Done():
			runErr = fmt.Errorf("%w: %w", ErrStopped, context.Cause(runCtx))
			break loop
		case <-end:
			break loop
		case <-tick.C:
			if err := c.read(false); err != nil {
				runErr = err
				break loop
			}
		}
	}
	l.Close()
	p.Duration = time.Since(p.Start)
	s.mu.Lock()
	s.prog = nil
	s.mu.Unlock()
	time.Sleep(grace)
	if err := c.read(true); err != nil && runErr == nil {
		runErr = err
	}
	c.readStats()
	if sym != nil {
		p.Stats.Symbols = sym.Stats()
	}
	// What the profile read and threw away (maps, symbol tables of new
	// files, the counts' buffers) goes back to the system now, not over
	// the next minutes: the exporter's resident memory returns to its
	// level before the profile plus the caches.
	c = nil
	debug.FreeOSMemory()
	return p, runErr
}

// collector reads the maps of a running session into its profile.
type collector struct {
	o       Options
	objs    *objects
	sym     *symbolize.Session
	gen     uint32
	profile *Profile
	agg     *aggregator

	keys   []rawKey
	values []rawValue
	frames []uint64
	stack  []*Frame
	// Resolved stacks by hash (user stacks by pid and hash): a stack is
	// read from the map and resolved once.
	kernelStacks *lru.Cache[uint64, []*Frame]
	userStacks   *lru.Cache[userStack, []*Frame]
	// missing counts stacks gone from the map before they were read.
	missing uint64
	// last is when the previous interval ended (the attach, at first).
	last time.Time
}

type userStack struct {
	pid  uint32
	hash uint64
	// comm names the frames in no file (symbolize.UnknownName).
	comm string
}

// maxCachedStacks bounds the resolved stacks a collector keeps, kernel and
// user each.
const maxCachedStacks = 4096

func newCollector(o Options, objs *objects, sym *symbolize.Session) *collector {
	n := int(objs.Counts0.MaxEntries())
	k, _ := lru.New[uint64, []*Frame](maxCachedStacks)
	u, _ := lru.New[userStack, []*Frame](maxCachedStacks)
	return &collector{
		o: o, objs: objs, sym: sym,
		keys: make([]rawKey, n), values: make([]rawValue, n), frames: make([]uint64, maxDepth),
		kernelStacks: k, userStacks: u,
	}
}

// read reads and empties the counts of the generation in use, after
// switching the programs to the other one. final (the programs detached)
// reads both generations without switching.
func (c *collector) read(final bool) error {
	gens := []uint32{c.gen}
	if final {
		gens = append(gens, c.gen+1)
	} else {
		c.gen++
		if err := c.objs.Gen.Set(c.gen); err != nil {
			return fmt.Errorf("switch generation: %w", err)
		}
		time.Sleep(grace)
	}
	var interval *Profile
	if c.o.OnInterval != nil {
		now := time.Now()
		interval = &Profile{Kind: c.profile.Kind, Event: c.profile.Event, Frequency: c.profile.Frequency, Start: c.last, Duration: now.Sub(c.last)}
		c.last = now
	}
	for _, g := range gens {
		counts := c.objs.Counts0
		if g&1 == 1 {
			counts = c.objs.Counts1
		}
		n, err := drain(counts, c.keys, c.values)
		if err != nil {
			return err
		}
		for i := range n {
			s, ok := c.sample(&c.keys[i], &c.values[i])
			if !ok {
				continue
			}
			c.add(s)
			if interval != nil {
				interval.Samples = append(interval.Samples, s)
			}
		}
	}
	if c.sym != nil {
		c.sym.Refresh()
	}
	if interval != nil {
		c.o.OnInterval(interval)
	}
	return nil
}

// drain reads and deletes every entry of counts into keys and values
// (which hold the map's max_entries) and returns how many it read.
func drain(counts *ebpf.Map, keys []rawKey, values []rawValue) (int, error) {
	var cursor ebpf.MapBatchCursor
	n, err := counts.BatchLookupAndDelete(&cursor, keys, values, nil)
	switch {
	case err == nil, errors.Is(err, ebpf.ErrKeyNotExist):
		return n, nil
	case !errors.Is(err, ebpf.ErrNotSupported):
		return 0, fmt.Errorf("read the counts: %w", err)
	}
	// Kernels before 5.6: one key at a time.
	n = 0
	var k rawKey
	for n < len(keys) && counts.NextKey(nil, &k) == nil {
		if err := counts.Lookup(&k, &values[n]); err != nil {
			break
		}
		_ = counts.Delete(&k)
		keys[n] = k
		n++
	}
	return n, nil
}

// sample turns one counts entry into a sample with resolved frames; false
// when the filter leaves it out.
func (c *collector) sample(k *rawKey, v *rawValue) (Sample, bool) {
	s := Sample{PID: k.PID, Cgroup: k.Cgroup, Comm: comm(k.Comm[:]), Count: int64(v.Count), Value: int64(v.Value)}
	if len(c.o.Filter.Comms) > 0 && !slices.Contains(c.o.Filter.Comms, s.Comm) {
		return s, false
	}
	stack := c.stack[:0]
	if k.KStack != 0 {
		stack = append(stack, c.kernelStack(k.KStack)...)
	}
	if k.UStack != 0 {
		stack = append(stack, c.userStack(k.PID, s.Comm, k.UStack)...)
	}
	c.stack = stack
	s.Stack = slices.Clone(stack)
	return c.o.Filter.apply(s)
}

func (c *collector) kernelStack(hash uint64) []*Frame {
	if f, ok := c.kernelStacks.Get(hash); ok {
		return f
	}
	if !c.lookup(hash) || c.sym == nil {
		return nil
	}
	f := c.sym.Kernel(nil, c.frames)
	if c.o.Kind == OffCPU {
		t := trimSwitch(f)
		c.sym.Uncount(f[:len(f)-len(t)])
		f = t
	}
	c.kernelStacks.Add(hash, f)
	return f
}

func (c *collector) userStack(pid uint32, comm string, hash uint64) []*Frame {
	key := userStack{pid: pid, hash: hash, comm: comm}
	if f, ok := c.userStacks.Get(key); ok {
		return f
	}
	if !c.lookup(hash) || c.sym == nil {
		return nil
	}
	deferred := c.sym.Deferred()
	f := c.sym.User(nil, pid, comm, c.frames)
	if c.sym.Deferred() == deferred {
		c.userStacks.Add(key, f) // else resolved again once the table is read
	}
	return f
}

// trimSwitch drops the innermost frames of an off-CPU kernel stack that
// are the tracing of sched_switch itself (the BPF program, bpf_trace_run4,
// __traceiter_sched_switch...): the stack starts at __schedule.
func trimSwitch(f []*Frame) []*Frame {
	for i, fr := range f {
		if fr.Function == "__schedule" {
			return f[i:]
		}
	}
	for i, fr := range f {
		if fr.Resolved && !strings.Contains(fr.Function, "bpf") && !strings.Contains(fr.Function, "trace") {
			return f[i:]
		}
	}
	return f
}

// lookup reads the stack of hash into c.frames; false (counted in
// missing) if the LRU pushed it out before it was read.
func (c *collector) lookup(hash uint64) bool {
	clear(c.frames)
	if c.objs.Stacks.Lookup(hash, c.frames) != nil {
		c.missing++
		return false
	}
	return true
}

// add adds s to the profile.
func (c *collector) add(s Sample) {
	if !c.o.Discard {
		c.agg.add(sampleKey(&s), s)
	}
}

// readStats sums the per-CPU counters of the stats map into the profile.
func (c *collector) readStats() {
	st := &c.profile.Stats
	for i, dst := range []*uint64{&st.Samples, &st.Idle, &st.Filtered, &st.KernelStacksLost, &st.UserStacksLost, &st.CountsFull, &st.StartFull, &st.Short} {
		var per []uint64
		if err := c.objs.Stats.Lookup(uint32(i), &per); err != nil {
			continue
		}
		for _, v := range per {
			*dst += v
		}
	}
	st.StacksMissing = c.missing
}

// comm returns a NUL-padded comm as a string.
func comm(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}
