// SPDX-License-Identifier: Apache-2.0

package profile

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
)

// flame returns the flame graph of p in view, cgroups named by path.
func (h *Handler) flame(p *Profile, view string) (*FlameGraph, error) {
	var name func(uint64) string
	if view == ViewCgroup {
		var ids []uint64
		seen := map[uint64]bool{}
		for i := range p.Samples {
			if id := p.Samples[i].Cgroup; !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
		paths := CgroupPaths(ids)
		name = func(id uint64) string { return paths[id] }
	}
	g, err := FlameTree(p, view, name)
	if err != nil {
		return nil, badRequest("%v", err)
	}
	return g, nil
}

// serveFlame serves GET /profile/flame?id=N[&view=V].
func (h *Handler) serveFlame(w http.ResponseWriter, r *http.Request) {
	if !getOnly(w, r) {
		return
	}
	q := r.URL.Query()
	if err := onlyParams(q, "id", "view"); err != nil {
		writeError(w, err)
		return
	}
	k, err := h.keptParam(q, "id")
	if err != nil {
		writeError(w, err)
		return
	}
	g, err := h.flame(k.p, q.Get("view"))
	if err != nil {
		writeError(w, err)
		return
	}
	g.ID, g.Filter = k.ID, k.Filter
	writeJSON(w, g)
}

// serveRecent serves GET /profile/recent.
func (h *Handler) serveRecent(w http.ResponseWriter, r *http.Request) {
	if !getOnly(w, r) {
		return
	}
	if err := onlyParams(r.URL.Query()); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, h.recent.all())
}

// serveDiff serves GET /profile/diff?base=N&new=M and POST
// /profile/diff?new=M (or ?base=N) with the other profile as the body.
func (h *Handler) serveDiff(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if err := onlyParams(q, "base", "new"); err != nil {
		writeError(w, err)
		return
	}
	var base, new *Profile
	var baseName, newName string
	switch r.Method {
	case http.MethodGet:
		b, err := h.keptParam(q, "base")
		if err != nil {
			writeError(w, err)
			return
		}
		n, err := h.keptParam(q, "new")
		if err != nil {
			writeError(w, err)
			return
		}
		base, new, baseName, newName = b.p, n.p, b.Label, n.Label
	case http.MethodPost:
		_, hasBase := q["base"]
		_, hasNew := q["new"]
		if hasBase == hasNew {
			writeError(w, badRequest("POST: give new (the body is the base profile) or base (the body is the new one), not both"))
			return
		}
		param := "new"
		if hasBase {
			param = "base"
		}
		k, err := h.keptParam(q, param)
		if err != nil {
			writeError(w, err)
			return
		}
		up, err := h.readUpload(w, r, k.p.Kind)
		if err != nil {
			writeError(w, err)
			return
		}
		if hasBase {
			base, new, baseName, newName = k.p, up, k.Label, "uploaded profile"
		} else {
			base, new, baseName, newName = up, k.p, "uploaded profile", k.Label
		}
	default:
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "use GET or POST", http.StatusMethodNotAllowed)
		return
	}
	d, err := Diff(base, new)
	if err != nil {
		writeError(w, badRequest("%v", err))
		return
	}
	writeJSON(w, NewDiffGraph(d, baseName, newName))
}

// readUpload reads the body of r as a profile of kind k (pprof or folded
// stacks; a pprof profile says its own kind).
func (h *Handler) readUpload(w http.ResponseWriter, r *http.Request, k Kind) (*Profile, error) {
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "application/octet-stream" {
		return nil, &httpError{http.StatusUnsupportedMediaType, "send the profile as application/octet-stream"}
	}
	if !h.upload.TryLock() {
		w.Header().Set("Retry-After", "1")
		return nil, &httpError{http.StatusTooManyRequests, "another upload is being read: one at a time"}
	}
	defer h.upload.Unlock()
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxUpload))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, &httpError{http.StatusRequestEntityTooLarge, "the profile is larger than " + strconv.Itoa(MaxUpload) + " bytes"}
		}
		return nil, badRequest("read the profile: %v", err)
	}
	p, err := ParseLimit(data, k, MaxUploadUncompressed)
	if err != nil {
		return nil, badRequest("uploaded profile: %v", err)
	}
	return p, nil
}

// keptParam returns the kept profile whose id is query parameter name.
func (h *Handler) keptParam(q url.Values, name string) (*kept, error) {
	vs := q[name]
	if len(vs) != 1 {
		return nil, badRequest("%s: give one profile id", name)
	}
	id, err := strconv.Atoi(vs[0])
	if err != nil || id < 1 {
		return nil, badRequest("%s %q: want a profile id", name, vs[0])
	}
	k, ok := h.recent.get(id)
	if !ok {
		return nil, &httpError{http.StatusNotFound, "profile " + strconv.Itoa(id) + " is not kept (the last " + strconv.Itoa(MaxRecentProfiles) + " taken with format=tree are)"}
	}
	return k, nil
}

// getOnly answers 405 to methods but GET and reports whether r is a GET.
func getOnly(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet {
		return true
	}
	w.Header().Set("Allow", http.MethodGet)
	http.Error(w, "use GET", http.StatusMethodNotAllowed)
	return false
}

// onlyParams returns a 400 error for a query parameter not in allowed.
func onlyParams(q url.Values, allowed ...string) error {
	for k := range q {
		if !slices.Contains(allowed, k) {
			return badRequest("unknown parameter %q", k)
		}
	}
	return nil
}

// writeJSON writes v as the JSON answer.
func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	_, _ = w.Write(b)
}
