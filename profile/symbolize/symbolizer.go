// SPDX-License-Identifier: Apache-2.0

package symbolize

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/bounded"
	"github.com/kernel-exporter/kernel_exporter/decoder"
)

// Frame is one resolved stack frame. Frames are interned by a Session: the
// same function of the same module is one *Frame, shared by every stack
// that holds it; treat it as read-only.
type Frame struct {
	// Function is the symbol's name ("tcp_sendmsg", "main.main",
	// "__libc_start_call_main"), or for an address that did not resolve,
	// its module and offset: "libfoo.so+0x1a2b" (the ELF virtual address
	// in the file), "[kernel.kallsyms]+0xffffffffc0001234"; or, in no
	// file, UnknownName's "[anon in java]", "[unknown in go]".
	Function string
	// Module is the file the code is in, as the process names it
	// ("/usr/lib/x86_64-linux-gnu/libc.so.6"), a pseudo-path ("[vdso]",
	// "[anon]", "[unknown]" when the process had no mapping there or was
	// gone), or KernelModule for the kernel.
	Module string
	// BuildID of Module (hex GNU build ID, or the Go build ID), if known.
	BuildID string
	// Kernel is set for kernel frames.
	Kernel bool
	// Resolved is false for a frame named by module and offset.
	Resolved bool
}

// KernelModule is the Module of kernel frames (perf's name for it).
const KernelModule = "[kernel.kallsyms]"

// Options configure a Symbolizer.
type Options struct {
	// ProcRoot is the proc mount ("/proc" when empty).
	ProcRoot string
	// CacheBytes bounds the memory of the ELF symbol tables kept between
	// sessions (DefaultCacheBytes when 0). At least the table in use is
	// kept whatever its size.
	CacheBytes int
	// LoadRate bounds the CPU time spent reading ELF symbol tables not
	// cached, in seconds per second (DefaultLoadRate when 0; negative: no
	// bound), with bursts of up to LoadBurst (DefaultLoadBurst when 0). A
	// file not read for the budget is tried again at the next Refresh;
	// meanwhile its frames show as module+0xoffset.
	LoadRate  float64
	LoadBurst time.Duration
	Logger    *slog.Logger
}

// Defaults of Options.
const (
	DefaultCacheBytes = 6 << 20
	// DefaultLoadRate and DefaultLoadBurst: 0.2% of one CPU on average
	// for reading new binaries' symbols, after a first second (enough for
	// the binaries of a host's first profile). A table costs 7 ms of CPU
	// on average on the 2-CPU VM; a host that builds and runs new
	// binaries all the time (a CI machine: 17 new files in 30 s while the
	// other builds ran) would otherwise spend 0.4% of a CPU on them.
	DefaultLoadRate  = 0.002
	DefaultLoadBurst = time.Second
)

// Bounds of the files a Symbolizer reads.
const (
	// MaxMapsFile bounds /proc/<pid>/maps (a large JVM has a few MiB).
	MaxMapsFile = 32 << 20
	// MaxModulesFile bounds /proc/modules.
	MaxModulesFile = 4 << 20
	// maxCacheEntries bounds the tables cached, whatever their size.
	maxCacheEntries = 4096
)

// fileIdentity is a file as fstat shows it: a file changed in place has a
// new size or modification time.
type fileIdentity struct {
	dev, ino, size uint64
	mtime          int64
}

// fileKey identifies an ELF file: the device and inode it was opened
// from, and its build ID ("" when it has none), so that a file replaced in
// place (same inode, new content) is read again.
type fileKey struct {
	dev, ino uint64
	buildID  string
}

// Symbolizer resolves addresses to functions: kernel addresses through
// /proc/kallsyms (modules included: the table is read again when
// /proc/modules changes), user addresses through the ELF symbol tables of
// the files each process maps, read through /proc/<pid>/root so that
// containers resolve. ELF tables are cached by (device, inode, build ID)
// in an LRU bounded by Options.CacheBytes. It is safe for concurrent use;
// the per-profile state lives in a Session.
type Symbolizer struct {
	procRoot string
	limit    int
	log      *slog.Logger

	// The load budget (a token bucket of seconds of reading).
	loadRate  float64
	loadBurst time.Duration
	tokens    time.Duration
	refilled  time.Time

	mu         sync.Mutex
	kernel     *decoder.KernelSymbols
	modulesSum uint64
	kernelRead time.Time
	// kernelFrames and kernelMisses count the kernel addresses looked up
	// since the table was read, and those outside it (a BPF program or
	// module loaded since).
	kernelFrames, kernelMisses atomic.Int64
	files                      *lru.Cache[fileKey, *Table]
	bytes                      int
	// seen maps a file as fstat shows it to its key, so that a file
	// already read is found without parsing its ELF headers again.
	seen     *lru.Cache[fileIdentity, fileKey]
	vdso     *Table
	vdsoDone bool
}

// New returns a Symbolizer; nothing is read until a Session needs it.
func New(o Options) *Symbolizer {
	s := &Symbolizer{procRoot: o.ProcRoot, limit: o.CacheBytes, log: o.Logger}
	if s.procRoot == "" {
		s.procRoot = "/proc"
	}
	if s.limit <= 0 {
		s.limit = DefaultCacheBytes
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.loadRate, s.loadBurst = o.LoadRate, o.LoadBurst
	if s.loadRate == 0 {
		s.loadRate = DefaultLoadRate
	}
	if s.loadBurst <= 0 {
		s.loadBurst = DefaultLoadBurst
	}
	s.tokens, s.refilled = s.loadBurst, time.Now()
	s.files, _ = lru.NewWithEvict(maxCacheEntries, func(_ fileKey, t *Table) { s.bytes -= t.Bytes() })
	s.seen, _ = lru.New[fileIdentity, fileKey](maxCacheEntries)
	return s
}

// CachedBytes returns the memory held by cached ELF tables.
func (s *Symbolizer) CachedBytes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes
}

// kallsyms is read again for the addresses it lacks when more than
// kernelRereadMisses of the kernel frames since the last read were
// missing, and that read is older than kernelReread: BPF programs come and
// go all the time (each has its kallsyms entry) and a read costs about
// 140 ms of CPU on this 2-CPU VM (the kernel writes 5.4 MB of text).
const (
	kernelReread       = 5 * time.Minute
	kernelRereadMisses = 0.01
)

// kernelSymbols returns the kernel's symbols, read again when the modules
// loaded changed since the last read, or when it lacked addresses (see
// kernelReread).
func (s *Symbolizer) kernelSymbols() (*decoder.KernelSymbols, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var sum uint64
	data, err := bounded.ReadFile(s.procRoot+"/modules", "kernel module list", MaxModulesFile)
	if err == nil {
		h := fnv.New64a()
		h.Write(data)
		sum = h.Sum64()
	}
	missing := float64(s.kernelMisses.Load()) > kernelRereadMisses*float64(s.kernelFrames.Load())
	if s.kernel != nil && sum == s.modulesSum && !(missing && time.Since(s.kernelRead) > kernelReread) {
		return s.kernel, nil
	}
	k, err := decoder.ReadKernelSymbols(s.procRoot)
	if err != nil {
		if s.kernel != nil {
			return s.kernel, nil // keep the previous table
		}
		return nil, err
	}
	s.kernel, s.modulesSum, s.kernelRead = k, sum, time.Now()
	s.kernelFrames.Store(0)
	s.kernelMisses.Store(0)
	return k, nil
}

// table returns the symbol table of f (as st shows it): the cached one of
// the same (device, inode, build ID), or one read now and cached. A file
// seen before unchanged (same size and modification time) is found
// without reading its headers.
func (s *Symbolizer) table(f *os.File, size int64, st *unix.Stat_t) (t *Table, read bool, err error) {
	id := fileIdentity{dev: st.Dev, ino: st.Ino, size: uint64(st.Size), mtime: st.Mtim.Nano()}
	s.mu.Lock()
	if key, ok := s.seen.Get(id); ok {
		if t, ok := s.files.Get(key); ok {
			s.mu.Unlock()
			return t, false, nil
		}
	}
	s.mu.Unlock()
	if !s.mayLoad() {
		// Not seen unchanged: it may be cached under its build ID,
		// but finding out means parsing its headers; wait for the budget.
		return nil, false, errDeferred
	}
	ef, buildID, err := openELF(f, size)
	if err != nil {
		return nil, false, err
	}
	key := fileKey{dev: st.Dev, ino: st.Ino, buildID: buildID}
	s.mu.Lock()
	t, ok := s.files.Get(key)
	if ok {
		s.seen.Add(id, key)
	}
	s.mu.Unlock()
	if ok {
		return t, false, nil
	}
	if !s.mayLoad() {
		return nil, false, errDeferred
	}
	// The budget counts this thread's CPU time, not the wall time
	// (which a loaded machine stretches).
	runtime.LockOSThread()
	start := threadCPU()
	t, err = readTable(ef, buildID)
	s.loaded(threadCPU() - start)
	runtime.UnlockOSThread()
	if err != nil {
		return nil, true, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen.Add(id, key)
	if old, ok := s.files.Get(key); ok {
		return old, true, nil
	}
	s.files.Add(key, t)
	s.bytes += t.Bytes()
	for s.bytes > s.limit && s.files.Len() > 1 {
		s.files.RemoveOldest()
	}
	return t, true, nil
}

// threadCPU returns the CPU time of the calling thread.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// errDeferred is the error of a table not read for the load budget.
var errDeferred = errors.New("symbol load budget spent: deferred")

// mayLoad reports whether the load budget allows reading a table now.
func (s *Symbolizer) mayLoad() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.loadRate < 0 {
		return true
	}
	now := time.Now()
	s.tokens = min(s.loadBurst, s.tokens+time.Duration(s.loadRate*float64(now.Sub(s.refilled))))
	s.refilled = now
	return s.tokens > 0
}

// loaded takes the time a read took from the load budget.
func (s *Symbolizer) loaded(d time.Duration) {
	s.mu.Lock()
	s.tokens -= d
	s.mu.Unlock()
}

// vdsoTable returns the symbols of the kernel's vDSO, read once from this
// process's own mapping: every 64-bit process of a kernel maps the same
// image.
func (s *Symbolizer) vdsoTable() *Table {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.vdsoDone {
		return s.vdso
	}
	s.vdsoDone = true
	data, err := bounded.ReadFile(s.procRoot+"/self/maps", "process maps", MaxMapsFile)
	if err != nil {
		return nil
	}
	maps, _ := ParseMaps(data)
	for _, m := range maps {
		if m.Path != "[vdso]" || m.End-m.Start > 1<<20 {
			continue
		}
		mem, err := os.Open(s.procRoot + "/self/mem")
		if err != nil {
			return nil
		}
		defer mem.Close()
		buf := make([]byte, m.End-m.Start)
		if _, err := mem.ReadAt(buf, int64(m.Start)); err != nil {
			return nil
		}
		t, err := ReadTable(readerAt(buf), int64(len(buf)))
		if err == nil {
			s.vdso = t
		}
		return s.vdso
	}
	return nil
}

type readerAt []byte

func (b readerAt) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off >= int64(len(b)) {
		return 0, errors.New("EOF")
	}
	n := copy(p, b[off:])
	if n < len(p) {
		return n, errors.New("EOF")
	}
	return n, nil
}

// Stats count the frames a Session resolved.
type Stats struct {
	KernelFrames, KernelResolved int64
	UserFrames, UserResolved     int64
	// Processes whose maps were read; ProcessesGone those already gone.
	Processes, ProcessesGone int
	// Files opened for their symbols, FilesRead those whose table was
	// not cached (read, in FileReadTime of CPU), FilesDeferred those not
	// read for the load budget (tried again at the next Refresh).
	Files, FilesRead, FilesDeferred int
	FileReadTime                    time.Duration
}

// Session is the state of one profile: the processes' mappings (read when
// one of their addresses is first resolved, and again at most once per
// Refresh when an address is outside them) and the interned frames. It is
// not safe for concurrent use.
type Session struct {
	s        *Symbolizer
	kernel   *decoder.KernelSymbols
	procs    map[uint32]*process
	frames   map[frameID]*Frame
	stats    Stats
	maxProcs int
	// deferredFrames counts frames named module+0xoffset because their
	// file's table was deferred (see Deferred).
	deferredFrames int64
}

// Deferred returns how many frames so far were left unresolved because the
// load budget deferred their file's table: a caller that caches resolved
// stacks should not cache one resolved while this grew.
func (ss *Session) Deferred() int64 { return ss.deferredFrames }

type frameID struct {
	kernel           bool
	module, function string
}

// process is what a Session knows of one process.
type process struct {
	maps []Mapping
	// tables are per mapping, weak: the Symbolizer's LRU alone keeps
	// tables alive, so that a session that sees many binaries holds no
	// more than the cache (one evicted is read again, within the budget).
	tables []weak.Pointer[Table]
	tried  []bool
	reread bool // maps read again since the last Refresh
	// deferred lists the mappings whose table the load budget deferred.
	deferred []int
	gone     bool
	readErr  error
}

// maxSessionProcs bounds the processes a Session keeps mappings of; past
// it, the oldest are forgotten (read again if seen again).
const maxSessionProcs = 8192

// NewSession starts a session. The kernel symbols are read (or re-read if
// modules changed) now; an error reading them is returned, and kernel
// addresses then show as [kernel.kallsyms]+0x... (the session still works).
func (s *Symbolizer) NewSession() (*Session, error) {
	k, err := s.kernelSymbols()
	return &Session{s: s, kernel: k, procs: map[uint32]*process{}, frames: map[frameID]*Frame{}, maxProcs: maxSessionProcs}, err
}

// Stats returns the counts so far.
func (ss *Session) Stats() Stats { return ss.stats }

// Refresh allows each process's mappings to be read once more when an
// address falls outside them (a library loaded since). Call it once per
// collection interval.
func (ss *Session) Refresh() {
	retry := ss.s.mayLoad() // deferred tables wait for the budget
	for _, p := range ss.procs {
		p.reread = false
		if !retry {
			continue
		}
		for _, i := range p.deferred {
			if i < len(p.tried) {
				p.tried[i] = false
			}
		}
		p.deferred = p.deferred[:0]
	}
}

// Uncount takes frames (resolved by this session, and then dropped by the
// caller, as the tracing frames of an off-CPU stack) out of the stats.
func (ss *Session) Uncount(frames []*Frame) {
	for _, f := range frames {
		switch {
		case f.Kernel:
			ss.stats.KernelFrames--
			if f.Resolved {
				ss.stats.KernelResolved--
			}
		default:
			ss.stats.UserFrames--
			if f.Resolved {
				ss.stats.UserResolved--
			}
		}
	}
}

// Forget drops what the session knows of pid (its mappings).
func (ss *Session) Forget(pid uint32) { delete(ss.procs, pid) }

func (ss *Session) intern(kernel, resolved bool, module, function, buildID string) *Frame {
	id := frameID{kernel: kernel, module: module, function: function}
	if f, ok := ss.frames[id]; ok {
		return f
	}
	f := &Frame{Function: function, Module: module, BuildID: buildID, Kernel: kernel, Resolved: resolved}
	ss.frames[id] = f
	return f
}

// Kernel appends to out the frames of the kernel stack addrs (innermost
// first, as bpf_get_stackid stores them; zeros end it) and returns it.
// Every frame but the first is a return address, looked up one byte
// before so that a call at the end of a function names that function.
func (ss *Session) Kernel(out []*Frame, addrs []uint64) []*Frame {
	for i, a := range addrs {
		if a == 0 {
			break
		}
		ss.stats.KernelFrames++
		ss.s.kernelFrames.Add(1)
		look := a
		if i > 0 {
			look--
		}
		if ss.kernel != nil {
			if name, ok := ss.kernel.Lookup(look); ok {
				ss.stats.KernelResolved++
				out = append(out, ss.intern(true, true, KernelModule, name, ""))
				continue
			}
		}
		ss.s.kernelMisses.Add(1)
		out = append(out, ss.intern(true, false, KernelModule, KernelModule+"+0x"+strconv.FormatUint(a, 16), ""))
	}
	return out
}

// User appends to out the frames of the user stack addrs of process pid,
// whose command name is comm (the sample's; "" when unknown), innermost
// first (zeros end it), and returns it. See Kernel for the return
// addresses, and UnknownName for the frames in no file.
func (ss *Session) User(out []*Frame, pid uint32, comm string, addrs []uint64) []*Frame {
	p := ss.process(pid)
	for i, a := range addrs {
		if a == 0 {
			break
		}
		ss.stats.UserFrames++
		f := ss.user(p, pid, comm, a, i > 0)
		if f.Resolved {
			ss.stats.UserResolved++
		}
		out = append(out, f)
	}
	return out
}

// process returns the state of pid, reading its mappings the first time.
func (ss *Session) process(pid uint32) *process {
	if p, ok := ss.procs[pid]; ok {
		return p
	}
	if len(ss.procs) >= ss.maxProcs {
		for k := range ss.procs { // forget one, any
			delete(ss.procs, k)
			break
		}
	}
	p := &process{}
	ss.readMaps(p, pid)
	ss.procs[pid] = p
	ss.stats.Processes++
	if p.gone {
		ss.stats.ProcessesGone++
	}
	return p
}

func (ss *Session) readMaps(p *process, pid uint32) {
	data, err := bounded.ReadFile(ss.s.procRoot+"/"+strconv.FormatUint(uint64(pid), 10)+"/maps", "process maps", MaxMapsFile)
	if err != nil {
		p.gone = errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ESRCH)
		p.readErr = err
		return
	}
	maps, err := ParseMaps(data)
	if err != nil {
		p.readErr = err
		return
	}
	p.maps, p.tables, p.tried = maps, make([]weak.Pointer[Table], len(maps)), make([]bool, len(maps))
	p.gone, p.readErr = false, nil
}

// UnknownName names a user frame in no file of its process: base is
// "[unknown]" (no mapping holds the address: the process exited before
// its mappings were read, or unmapped the code) or the pseudo-path of the
// memory ("[anon]", JIT code; "[heap]"). The process' command name, its
// binary's (up to 15 bytes), follows: "[unknown in go]"; base alone
// without one. The address is left out: it means nothing outside its
// process, and with it the frames of unrelated processes at the same
// address would add up as one function (a diff ranked "[unknown]+0x49f1e1"
// of short-lived processes first).
func UnknownName(base, comm string) string {
	if comm == "" {
		return base
	}
	return strings.TrimSuffix(base, "]") + " in " + comm + "]"
}

// user resolves one user address of process p.
func (ss *Session) user(p *process, pid uint32, comm string, addr uint64, ret bool) *Frame {
	i, ok := find(p.maps, addr)
	if !ok && !p.reread && !p.gone {
		p.reread = true
		ss.readMaps(p, pid)
		i, ok = find(p.maps, addr)
	}
	if !ok {
		return ss.intern(false, false, "[unknown]", UnknownName("[unknown]", comm), "")
	}
	m := &p.maps[i]
	t := p.tables[i].Value()
	if t == nil && p.tables[i] != (weak.Pointer[Table]{}) {
		p.tried[i] = false // evicted from the cache and collected: read again
	}
	if !p.tried[i] {
		var deferred bool
		p.tried[i] = true
		t, deferred = ss.mappingTable(pid, m)
		p.tables[i] = weak.Pointer[Table]{}
		if t != nil {
			p.tables[i] = weak.Make(t)
		}
		if deferred {
			p.deferred = append(p.deferred, i)
		}
	}
	if t == nil && slices.Contains(p.deferred, i) {
		ss.deferredFrames++
	}
	module := m.Path
	if module == "" {
		module = "[anon]"
	}
	if t == nil {
		if m.File() {
			off := addr - m.Start + m.Offset
			return ss.intern(false, false, module, path.Base(module)+"+0x"+strconv.FormatUint(off, 16), "")
		}
		return ss.intern(false, false, module, UnknownName(module, comm), "")
	}
	vaddr, ok := t.VAddr(addr - m.Start + m.Offset)
	if !ok {
		return ss.intern(false, false, module, path.Base(module)+"+0x"+strconv.FormatUint(addr-m.Start+m.Offset, 16), t.BuildID)
	}
	look := vaddr
	if ret {
		look--
	}
	if name, ok := t.Lookup(look); ok {
		return ss.intern(false, true, module, string(name), t.BuildID)
	}
	return ss.intern(false, false, module, path.Base(module)+"+0x"+strconv.FormatUint(vaddr, 16), t.BuildID)
}

// mappingTable returns the symbol table of mapping m of pid, nil when it
// has none that can be trusted: anonymous memory, a file that cannot be
// opened, or one that is not the file mapped (its device or inode differ:
// replaced since).
func (ss *Session) mappingTable(pid uint32, m *Mapping) (t *Table, deferred bool) {
	if m.Path == "[vdso]" {
		return ss.s.vdsoTable(), false
	}
	if !m.File() {
		return nil, false
	}
	f, size, err := ss.openMapped(pid, m)
	if err != nil {
		ss.s.log.Debug("profile: cannot open mapped file", "pid", pid, "path", m.Path, "err", err)
		return nil, false
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, false
	}
	runtime.LockOSThread()
	start := threadCPU()
	t, read, err := ss.s.table(f, size, &st)
	if read {
		ss.stats.FilesRead++
		ss.stats.FileReadTime += threadCPU() - start
	}
	runtime.UnlockOSThread()
	ss.stats.Files++
	if errors.Is(err, errDeferred) {
		ss.stats.FilesDeferred++
		return nil, true
	}
	if err != nil {
		ss.s.log.Debug("profile: no symbols", "pid", pid, "path", m.Path, "err", err)
		return nil, false
	}
	return t, false
}

// openMapped opens the file of mapping m as process pid sees it: its path
// inside /proc/<pid>/root, resolved within that root; else (deleted, or
// replaced by another file) /proc/<pid>/map_files/<start>-<end>, the
// mapped file itself. The file opened must have the mapping's inode.
func (ss *Session) openMapped(pid uint32, m *Mapping) (*os.File, int64, error) {
	base := ss.s.procRoot + "/" + strconv.FormatUint(uint64(pid), 10)
	var errs []error
	if !m.Deleted {
		f, size, err := bounded.OpenInRoot(base+"/root", m.Path, "mapped file", bounded.MaxTarget)
		if err == nil {
			if sameFile(f, m) {
				return f, size, nil
			}
			f.Close()
			err = fmt.Errorf("%s: not the mapped file (replaced since it was mapped)", m.Path)
		}
		errs = append(errs, err)
	}
	p := fmt.Sprintf("%s/map_files/%x-%x", base, m.Start, m.End)
	f, size, err := bounded.OpenLimit(p, "mapped file", bounded.MaxTarget)
	if err == nil {
		if sameFile(f, m) {
			return f, size, nil
		}
		f.Close()
		err = fmt.Errorf("%s: not the mapped file", p)
	}
	return nil, 0, errors.Join(append(errs, err)...)
}

// sameFile reports whether f has the inode of mapping m. The device is not
// compared: /proc/<pid>/maps shows overlayfs files with the device of the
// layer that holds them, while opening the path gives the overlay's.
func sameFile(f *os.File, m *Mapping) bool {
	var st unix.Stat_t
	return unix.Fstat(int(f.Fd()), &st) == nil && st.Ino == m.Inode
}
