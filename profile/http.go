// SPDX-License-Identifier: Apache-2.0

package profile

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kernel-exporter/kernel_exporter/budget"
	"github.com/kernel-exporter/kernel_exporter/profile/symbolize"
)

// The paths Handler serves.
const (
	PathCPU    = "/profile/cpu"
	PathOffCPU = "/profile/offcpu"
	// PathFlame, PathDiff and PathRecent serve the flame graph page
	// (/ui/profile/): a kept profile's flame graph, the comparison of two
	// (or of one and an uploaded file), and the list of kept profiles.
	PathFlame  = "/profile/flame"
	PathDiff   = "/profile/diff"
	PathRecent = "/profile/recent"
)

// Defaults and bounds of the HTTP endpoints.
const (
	// DefaultMaxHTTPDuration bounds ?seconds=.
	DefaultMaxHTTPDuration = 5 * time.Minute
	// writeMargin is added to the profile's length for the response's
	// write deadline (symbols, encoding, a slow client).
	writeMargin = time.Minute
	// MaxUpload bounds a profile uploaded to POST /profile/diff, and
	// MaxUploadUncompressed what a gzipped one holds.
	MaxUpload             = 16 << 20
	MaxUploadUncompressed = 64 << 20
)

// HandlerOptions configure a Handler.
type HandlerOptions struct {
	// Symbolizer is shared by every profile (nil: one made for the
	// handler), so that kernel and ELF symbols are read once.
	Symbolizer *symbolize.Symbolizer
	// Ledger is the memory budget profiles book their maps in (nil: no
	// budget).
	Ledger *budget.Ledger
	// Frequency is the default of ?frequency= (DefaultFrequency when 0).
	Frequency int
	// MaxDuration bounds ?seconds= (DefaultMaxHTTPDuration when 0).
	MaxDuration time.Duration
	Logger      *slog.Logger
}

// Handler serves GET /profile/cpu and /profile/offcpu: it takes a profile
// of ?seconds= (default 30) and returns it as pprof (gzipped protobuf;
// ?format=folded for folded stacks; ?format=tree for the flame graph page:
// the JSON of FlameGraph, the profile kept for /profile/flame and
// /profile/diff). Query parameters (unknown ones are refused with 400):
//
//	seconds    1 to MaxDuration's seconds (default 30)
//	format     pprof (default), folded or tree
//	view       format=tree: comm (default), process, cgroup or stack
//	frequency  /profile/cpu: samples per second per CPU, 1 to 999
//	min_block  /profile/offcpu: shortest block counted, as 1ms, 0 to 1m
//	pid        process id (repeatable, or comma-separated)
//	comm       thread name (repeatable)
//	cgroup     cgroup v2 id or path (/system.slice/x.service; repeatable)
//	stacks     kernel or user: only those frames (default both)
//	idle       1: keep the idle tasks' samples
//
// One profile is taken at a time, whichever the endpoint: another request
// meanwhile gets 429 with Retry-After. A profile stopped by the CPU budget
// gets 503, as do new ones until the budget re-attaches profiles. The BPF
// program is loaded and attached only while a profile is taken.
//
// For the flame graph page it also serves, from the profiles kept
// (MaxRecentProfiles):
//
//	GET  /profile/flame?id=N[&view=V]     FlameGraph of kept profile N
//	GET  /profile/diff?base=N&new=M       DiffGraph of two kept profiles
//	POST /profile/diff?new=M (or base=N)  DiffGraph of a kept profile and the
//	                                      body: a profile file (pprof or
//	                                      folded), application/octet-stream,
//	                                      at most MaxUpload bytes
//	GET  /profile/recent                  []RecentProfile, newest first
//
// Uploads are parsed one at a time (429 meanwhile); a content type other
// than application/octet-stream gets 415, so that a browser cannot post
// one from another site without a CORS preflight, which is not answered.
type Handler struct {
	o      HandlerOptions
	sym    *symbolize.Symbolizer
	recent recent
	upload sync.Mutex

	mu       sync.Mutex
	running  *Session
	ends     time.Time
	detached map[string]string // budget name -> reason
}

// NewHandler returns a handler; it loads nothing until a request.
func NewHandler(o HandlerOptions) *Handler {
	if o.Frequency == 0 {
		o.Frequency = DefaultFrequency
	}
	if o.MaxDuration <= 0 {
		o.MaxDuration = DefaultMaxHTTPDuration
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	sym := o.Symbolizer
	if sym == nil {
		sym = symbolize.New(symbolize.Options{Logger: o.Logger})
	}
	return &Handler{o: o, sym: sym, detached: map[string]string{}}
}

// Routes returns the handler under each of its paths, for a server's mux.
func (h *Handler) Routes() map[string]http.Handler {
	return map[string]http.Handler{PathCPU: h, PathOffCPU: h, PathFlame: h, PathDiff: h, PathRecent: h}
}

// DisabledText is what DisabledRoutes answer.
const DisabledText = "Profiles are not enabled (--profile.enable): they show what runs on the host, so serve takes them only when asked."

// DisabledRoutes returns a handler under each path of Routes, and under
// extra (the flame graph page), for a server without --profile.enable:
// 403 and DisabledText, as /-/reload answers without
// --web.enable-lifecycle, rather than a bare 404 that reads as a wrong
// path.
func DisabledRoutes(extra ...string) map[string]http.Handler {
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, DisabledText, http.StatusForbidden)
	})
	routes := map[string]http.Handler{}
	for p := range (&Handler{}).Routes() {
		routes[p] = h
	}
	for _, p := range extra {
		routes[p] = h
	}
	return routes
}

// BudgetConfigs returns the running profile's program under its name
// (Options.Name), for the CPU budget's measuring windows; nil when no
// profile is being taken.
func (h *Handler) BudgetConfigs() []budget.Config {
	h.mu.Lock()
	s := h.running
	h.mu.Unlock()
	if s == nil {
		return nil
	}
	progs := s.Programs()
	if len(progs) == 0 {
		return nil
	}
	return []budget.Config{{Name: s.Options().Name(), Programs: progs}}
}

// Detach stops the running profile named name (see BudgetConfigs) with
// reason, and refuses new profiles of its kind until Reattach. It reports
// whether name is a profile's.
func (h *Handler) Detach(name, reason string) bool {
	if !strings.HasPrefix(name, "profile:") {
		return false
	}
	h.mu.Lock()
	h.detached[name] = reason
	s := h.running
	h.mu.Unlock()
	if s != nil && s.Options().Name() == name {
		s.Stop(errors.New(reason))
	}
	return true
}

// Reattach allows profiles named name again. It reports whether name is a
// profile's.
func (h *Handler) Reattach(name string) bool {
	if !strings.HasPrefix(name, "profile:") {
		return false
	}
	h.mu.Lock()
	delete(h.detached, name)
	h.mu.Unlock()
	return true
}

// httpError is an error with its status.
type httpError struct {
	code int
	msg  string
}

func (e *httpError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &httpError{http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

// ServeHTTP serves the paths of Routes.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	kind := CPU
	switch r.URL.Path {
	case PathCPU:
	case PathOffCPU:
		kind = OffCPU
	case PathFlame:
		h.serveFlame(w, r)
		return
	case PathDiff:
		h.serveDiff(w, r)
		return
	case PathRecent:
		h.serveRecent(w, r)
		return
	default:
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "use GET", http.StatusMethodNotAllowed)
		return
	}
	o, format, view, err := h.parse(kind, r.URL.Query())
	if err != nil {
		writeError(w, err)
		return
	}
	o.Symbolizer, o.Ledger, o.Logger = h.sym, h.o.Ledger, h.o.Logger
	s, err := NewSession(o)
	if err != nil {
		writeError(w, badRequest("%v", err))
		return
	}
	h.mu.Lock()
	if reason, ok := h.detached[o.Name()]; ok {
		h.mu.Unlock()
		writeError(w, &httpError{http.StatusServiceUnavailable, "profiles are off: " + reason})
		return
	}
	if h.running != nil {
		wait := max(time.Until(h.ends), time.Second)
		h.mu.Unlock()
		w.Header().Set("Retry-After", strconv.Itoa(int((wait+time.Second-1)/time.Second)))
		writeError(w, &httpError{http.StatusTooManyRequests, "a profile is already being taken: one at a time"})
		return
	}
	h.running, h.ends = s, time.Now().Add(o.Duration)
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.running = nil
		h.mu.Unlock()
	}()
	// The server's write timeout is shorter than a long profile.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(o.Duration + writeMargin))
	p, err := s.Run(r.Context())
	if r.Context().Err() != nil {
		return // the client went away: nobody to answer
	}
	if err != nil {
		var me *budget.MemoryError
		code := http.StatusInternalServerError
		if errors.As(err, &me) || errors.Is(err, ErrStopped) {
			code = http.StatusServiceUnavailable
		}
		h.o.Logger.Warn("profile failed", "path", r.URL.Path, "err", err)
		writeError(w, &httpError{code, err.Error()})
		return
	}
	var buf bytes.Buffer
	if format == "tree" {
		g, err := h.flame(p, view)
		if err != nil {
			writeError(w, err)
			return
		}
		g.ID = h.recent.add(p, o.Filter).ID
		writeJSON(w, g)
		return
	}
	if format == "folded" {
		err = p.WriteFolded(&buf, FoldedOptions{})
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	} else {
		err = p.WritePprof(&buf)
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", string(kind)+".pb.gz"))
	}
	if err != nil {
		writeError(w, &httpError{http.StatusInternalServerError, err.Error()})
		return
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	_, _ = w.Write(buf.Bytes())
}

func writeError(w http.ResponseWriter, err error) {
	var he *httpError
	if !errors.As(err, &he) {
		he = &httpError{http.StatusInternalServerError, err.Error()}
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	http.Error(w, he.msg, he.code)
}

// parse reads the query of a profile request: the options, the format and
// the view (format=tree).
func (h *Handler) parse(kind Kind, q url.Values) (o Options, format, view string, err error) {
	o, format, err = h.parseOptions(kind, q)
	if err != nil {
		return o, "", "", err
	}
	if vs, ok := q["view"]; ok {
		if format != "tree" {
			return o, "", "", badRequest("view applies to format=tree only")
		}
		if len(vs) != 1 {
			return o, "", "", badRequest("view: give it once")
		}
		if _, err := ParseView(vs[0]); err != nil {
			return o, "", "", badRequest("%v", err)
		}
		view = vs[0]
	}
	return o, format, view, nil
}

// parseOptions reads the query of a profile request but its view.
func (h *Handler) parseOptions(kind Kind, q url.Values) (Options, string, error) {
	o := Options{Kind: kind, Duration: DefaultDuration, Frequency: h.o.Frequency}
	format := "pprof"
	allowed := []string{"seconds", "format", "pid", "comm", "cgroup", "stacks", "idle", "view"}
	if kind == CPU {
		allowed = append(allowed, "frequency")
	} else {
		allowed = append(allowed, "min_block")
	}
	for k, vs := range q {
		if !slices.Contains(allowed, k) {
			return o, "", badRequest("unknown parameter %q (%s takes %s)", k, kind, strings.Join(allowed, ", "))
		}
		if len(vs) > MaxFilterValues {
			return o, "", badRequest("%s: more than %d values", k, MaxFilterValues)
		}
	}
	one := func(k string) (string, bool, error) {
		vs, ok := q[k]
		if !ok {
			return "", false, nil
		}
		if len(vs) != 1 {
			return "", false, badRequest("%s: give it once", k)
		}
		return vs[0], true, nil
	}
	if v, ok, err := one("seconds"); err != nil {
		return o, "", err
	} else if ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || time.Duration(n)*time.Second > h.o.MaxDuration {
			return o, "", badRequest("seconds %q: must be 1 to %d", v, int(h.o.MaxDuration/time.Second))
		}
		o.Duration = time.Duration(n) * time.Second
	}
	if o.Duration > h.o.MaxDuration {
		o.Duration = h.o.MaxDuration
	}
	if v, ok, err := one("format"); err != nil {
		return o, "", err
	} else if ok {
		if v != "pprof" && v != "folded" && v != "tree" {
			return o, "", badRequest("format %q: want pprof, folded or tree", v)
		}
		format = v
	}
	if v, ok, err := one("frequency"); err != nil {
		return o, "", err
	} else if ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxFrequency {
			return o, "", badRequest("frequency %q: must be 1 to %d", v, MaxFrequency)
		}
		o.Frequency = n
	}
	if v, ok, err := one("min_block"); err != nil {
		return o, "", err
	} else if ok {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > MaxMinBlock {
			return o, "", badRequest("min_block %q: want a duration from 0 to %v, as 1ms", v, MaxMinBlock)
		}
		o.MinBlock = d
		if d == 0 {
			o.MinBlock = time.Nanosecond
		}
	}
	if v, ok, err := one("stacks"); err != nil {
		return o, "", err
	} else if ok {
		switch v {
		case "kernel":
			o.Filter.KernelOnly = true
		case "user":
			o.Filter.UserOnly = true
		case "both":
		default:
			return o, "", badRequest("stacks %q: want kernel, user or both", v)
		}
	}
	if v, ok, err := one("idle"); err != nil {
		return o, "", err
	} else if ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return o, "", badRequest("idle %q: want 1 or 0", v)
		}
		o.Filter.IncludeIdle = b
	}
	f, err := ParseFilterValues(q["pid"], q["comm"], q["cgroup"])
	if err != nil {
		return o, "", badRequest("%v", err)
	}
	o.Filter.PIDs, o.Filter.Comms, o.Filter.Cgroups = f.PIDs, f.Comms, f.Cgroups
	return o, format, nil
}

// ParseFilterValues reads pids (each may be comma-separated), comms and
// cgroups (ids or paths, see CgroupID) into a Filter. Errors name the
// value.
func ParseFilterValues(pids, comms, cgroups []string) (Filter, error) {
	var f Filter
	for _, v := range pids {
		for _, p := range strings.Split(v, ",") {
			n, err := strconv.ParseUint(strings.TrimSpace(p), 10, 32)
			if err != nil || n == 0 {
				return f, fmt.Errorf("pid %q: want a process id", p)
			}
			f.PIDs = append(f.PIDs, uint32(n))
		}
	}
	f.Comms = append(f.Comms, comms...)
	for _, c := range cgroups {
		id, err := CgroupID(c)
		if err != nil {
			return f, err
		}
		f.Cgroups = append(f.Cgroups, id)
	}
	return f, f.Check()
}
