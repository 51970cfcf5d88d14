// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

// Bounds of what a Resolver keeps. The kubelet runs at most a few hundred
// pods on a node (--max-pods defaults to 110), so the default cache holds
// every pod of a node with room for the recently deleted ones.
const (
	// DefaultCacheSize is the number of pods a Resolver keeps when
	// Options.CacheSize is not positive, and MaxCacheSize the most it
	// accepts. Each pod costs about 300 bytes plus 150 bytes per
	// container.
	DefaultCacheSize = 1024
	MaxCacheSize     = 100000

	// MaxContainers is how many containers of a pod are kept (init,
	// ephemeral and restarted ones included); the others are named by
	// their ids.
	MaxContainers = 64

	// maxNameLen bounds each name kept (Kubernetes names are at most 253
	// bytes), maxIDLen each container id (64 hex digits today).
	maxNameLen = 253
	maxIDLen   = 128
)

// Options configure a Resolver.
type Options struct {
	// Config reaches the API server. When nil, it is read from
	// Kubeconfig as RESTConfig does; nil from there too means no API
	// access: every pod is named by its UID.
	Config     *Config
	Kubeconfig string
	// Source lists and watches the node's pods instead of the API
	// server of Config (tests pass one over a fake clientset).
	Source Source
	// NodeName is the node whose pods are watched (the downward API's
	// spec.nodeName). Without it nothing is watched: watching every pod
	// of a cluster is not bounded.
	NodeName string
	// CacheSize bounds the pods kept: CacheSize live ones and CacheSize
	// deleted ones (DefaultCacheSize if not positive; at most
	// MaxCacheSize).
	CacheSize int
	Logger    *slog.Logger
}

// Names are the labels of a pod's container.
type Names struct {
	Namespace string
	Pod       string
	Container string
	// Resolved says the pod was found; otherwise Pod is its UID,
	// Container the container id and Namespace empty.
	Resolved bool
	// Complete says the pod was found and so was the container (or no
	// container was asked for).
	Complete bool
}

// Resolver names the pods of one node from a watch of the API server.
// Lookup is safe for concurrent use and never waits for the API.
type Resolver struct {
	log      *slog.Logger
	node     string
	live     *lru.Cache[string, *podMeta] // uid (and static pod hash) → pod
	gone     *lru.Cache[string, *podMeta] // deleted pods, named until evicted
	mu       sync.Mutex                   // serializes the store's writes
	synced   atomic.Bool
	warnOnce sync.Once
	cancel   context.CancelFunc
	done     chan struct{}
}

// podMeta is what is kept of a pod; it is never modified once built.
type podMeta struct {
	uid, namespace, name string
	mirror               string // the static pod hash, "" if not a mirror pod
	containers           []containerMeta
}

type containerMeta struct{ id, name string }

// NewResolver returns a Resolver and starts its watch, if it has API
// access (Options.Source, Config or Kubeconfig, and NodeName); Close stops
// it. Without access (none given, or a kubeconfig that cannot be read) it
// logs once why pods are named by UID, and returns a Resolver that does
// just that. The error is that of building a client from the config.
func NewResolver(opts Options) (*Resolver, error) {
	size := opts.CacheSize
	if size <= 0 {
		size = DefaultCacheSize
	}
	size = min(size, MaxCacheSize)
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	live, _ := lru.New[string, *podMeta](size) // size > 0: no error
	gone, _ := lru.New[string, *podMeta](size)
	r := &Resolver{log: log, node: opts.NodeName, live: live, gone: gone, done: make(chan struct{})}
	src := opts.Source
	cfg := opts.Config
	if src == nil && cfg == nil {
		var err error
		if cfg, err = RESTConfig(opts.Kubeconfig); err != nil {
			r.fallback(err.Error())
		}
	}
	if src == nil && cfg != nil && r.node != "" {
		var err error
		if src, err = NewSource(cfg, r.node); err != nil {
			return nil, err
		}
	}
	switch {
	case src == nil && cfg == nil:
		r.fallback("no Kubernetes API access (no kubeconfig and not in a cluster)")
	case r.node == "":
		r.fallback("no node name (set NODE_NAME or --kube.node-name)")
		src = nil
	}
	if src == nil {
		close(r.done)
		return r, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() {
		defer close(r.done)
		r.run(ctx, src)
	}()
	return r, nil
}

// Backoff between failed lists and watches, as client-go's reflector
// (800 ms doubling to 30 s), with jitter.
const (
	minBackoff = 800 * time.Millisecond
	maxBackoff = 30 * time.Second
)

// run lists the node's pods, then follows them with watches from the
// list's resource version, and lists again when a watch fails or its
// version expired, until ctx is done. API errors are logged once (see
// fallback) and retried after a backoff.
func (r *Resolver) run(ctx context.Context, src Source) {
	wait := minBackoff
	sleep := func() bool {
		t := time.NewTimer(wait/2 + rand.N(wait/2))
		defer t.Stop()
		wait = min(2*wait, maxBackoff)
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		}
	}
	for ctx.Err() == nil {
		pods, rv, err := src.List(ctx)
		if err != nil {
			if ctx.Err() == nil {
				r.fallback("Kubernetes API: " + err.Error())
			}
			if !sleep() {
				return
			}
			continue
		}
		(*podStore)(r).replace(pods)
		wait = minBackoff
		for ctx.Err() == nil {
			start := time.Now()
			err := src.Watch(ctx, rv, func(e Event) error {
				if v := e.Pod.Metadata.ResourceVersion; v != "" {
					rv = v
				}
				switch e.Type {
				case "ADDED", "MODIFIED":
					(*podStore)(r).put(e.Pod)
				case "DELETED":
					(*podStore)(r).delete(e.Pod)
				}
				return nil
			})
			if err == nil {
				// The server ended the watch: watch again from rv
				// (after a backoff when it ended at once).
				if time.Since(start) < time.Second && !sleep() {
					return
				}
				continue
			}
			if ctx.Err() == nil && !errors.Is(err, ErrExpired) {
				r.log.Debug("kube: watch of pods failed: listing again", "err", err)
				if !sleep() {
					return
				}
			}
			break
		}
	}
}

// fallback logs, once, why pods are named by UID.
func (r *Resolver) fallback(why string) {
	r.warnOnce.Do(func() {
		r.log.Warn("kube: pods are labelled by UID and containers by id", "reason", why)
	})
}

// Close stops the watch and waits for it to end. The cache stays readable.
func (r *Resolver) Close() {
	if r.cancel != nil {
		r.cancel()
	}
	<-r.done
}

// Synced says the first list of the node's pods is in the cache.
func (r *Resolver) Synced() bool { return r.synced.Load() }

// Lookup names a pod's container from the cache: the pod by UID (or, for
// a static pod, by the hash its mirror pod carries), then the container by
// id among its containers' statuses. A pod not known is named by its UID
// and its container by containerID (Resolved false); a known pod's
// container not (yet) in its status by containerID. Deleted pods keep
// their names until evicted.
func (r *Resolver) Lookup(podUID, containerID string) Names {
	p, ok := r.live.Get(podUID)
	if !ok {
		p, ok = r.gone.Get(podUID)
	}
	if !ok {
		return Names{Pod: podUID, Container: containerID}
	}
	n := Names{Namespace: p.namespace, Pod: p.name, Container: containerID, Resolved: true, Complete: containerID == ""}
	for _, c := range p.containers {
		if containerID != "" && c.id == containerID {
			n.Container, n.Complete = c.name, true
			break
		}
	}
	return n
}

// Watching says the Resolver has API access: it watches pods (even while
// the API server does not answer). Without it, pods stay named by UID.
func (r *Resolver) Watching() bool { return r.cancel != nil }

// podStore keeps a podMeta of each pod in the Resolver's caches.
type podStore Resolver

func (s *podStore) put(pod *Pod) {
	p := newPodMeta(pod)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.add(p)
}

// add caches p under its UID and mirror hash. s.mu is held.
func (s *podStore) add(p *podMeta) {
	if old, ok := s.live.Peek(p.uid); ok && old.mirror != p.mirror && old.mirror != "" {
		s.live.Remove(old.mirror)
	}
	s.live.Add(p.uid, p)
	s.gone.Remove(p.uid)
	if p.mirror != "" {
		s.live.Add(p.mirror, p)
		s.gone.Remove(p.mirror)
	}
}

// remove moves p from the live pods to the deleted ones. s.mu is held.
func (s *podStore) remove(p *podMeta) {
	for _, k := range []string{p.uid, p.mirror} {
		if k != "" {
			s.live.Remove(k)
			s.gone.Add(k, p)
		}
	}
}

func (s *podStore) delete(pod *Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.live.Peek(pod.Metadata.UID); ok {
		s.remove(p)
	}
}

// replace makes list the live pods: those no longer in it are deleted.
func (s *podStore) replace(list []*Pod) {
	pods := make([]*podMeta, 0, len(list))
	keep := make(map[string]bool, len(list))
	for _, pod := range list {
		p := newPodMeta(pod)
		pods = append(pods, p)
		keep[p.uid] = true
	}
	s.mu.Lock()
	for _, uid := range s.live.Keys() {
		if p, ok := s.live.Peek(uid); ok && uid == p.uid && !keep[uid] {
			s.remove(p)
		}
	}
	for _, p := range pods {
		s.add(p)
	}
	s.mu.Unlock()
	s.synced.Store(true)
}

// newPodMeta keeps of pod its UID, namespace, name, mirror hash and the
// ids and names of its containers (current and last terminated ones, of
// regular, init and ephemeral containers; at most MaxContainers).
func newPodMeta(pod *Pod) *podMeta {
	md := &pod.Metadata
	p := &podMeta{
		uid:       clip(md.UID, maxNameLen),
		namespace: clip(md.Namespace, maxNameLen),
		name:      clip(md.Name, maxNameLen),
	}
	if h := md.Annotations[mirrorPodAnnotation]; h != "" && validUID(h, '-') {
		p.mirror = h
	}
	add := func(id, name string) {
		id = containerID(id)
		if id == "" || len(p.containers) >= MaxContainers {
			return
		}
		p.containers = append(p.containers, containerMeta{id: id, name: clip(name, maxNameLen)})
	}
	for _, list := range [][]ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses, pod.Status.EphemeralContainerStatuses} {
		for _, c := range list {
			add(c.ContainerID, c.Name)
			if t := c.LastState.Terminated; t != nil {
				add(t.ContainerID, c.Name)
			}
		}
	}
	return p
}

// containerID returns the id of a status' containerID
// ("containerd://<id>", "cri-o://<id>", "docker://<id>"), or "" when it is
// empty, has no scheme or is longer than maxIDLen.
func containerID(s string) string {
	_, id, ok := strings.Cut(s, "://")
	if !ok || id == "" || len(id) > maxIDLen {
		return ""
	}
	return strings.Clone(id)
}

// clip returns s, cut to at most n bytes, as a copy that does not keep the
// decoded object alive.
func clip(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	return strings.Clone(s)
}
