// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/kernel-exporter/kernel_exporter/bounded"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
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
	Config     *rest.Config
	Kubeconfig string
	// ListWatch lists and watches the node's pods instead of the API
	// server of Config (tests pass one over a fake clientset).
	ListWatch cache.ListerWatcher
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

// RESTConfig returns the configuration for the API server: from the
// kubeconfig file when kubeconfig is not empty (see MaxKubeconfig), else the in-cluster one
// (the pod's service account) when KUBERNETES_SERVICE_HOST is set, else
// nil (no API access). Errors are those of reading the file or the
// service account.
func RESTConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		return loadKubeconfig(kubeconfig)
	}
	if os.Getenv("KUBERNETES_SERVICE_HOST") == "" {
		return nil, nil
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("in-cluster config: %w", err)
	}
	return cfg, nil
}

// MaxKubeconfig bounds the kubeconfig file RESTConfig reads (one with
// embedded certificates is a few KiB).
const MaxKubeconfig = 1 << 20

// loadKubeconfig reads a kubeconfig file of at most MaxKubeconfig bytes
// through package bounded and builds its current context's config; the
// files it names (certificates, keys, token) are relative to its
// directory, as kubectl reads them. Errors name the file, never quote it.
func loadKubeconfig(path string) (*rest.Config, error) {
	data, err := bounded.ReadFile(path, "kubeconfig", MaxKubeconfig)
	if err != nil {
		return nil, err
	}
	kc, err := clientcmd.Load(data)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: not a kubeconfig file", path)
	}
	for _, c := range kc.Clusters {
		c.LocationOfOrigin = path
	}
	for _, a := range kc.AuthInfos {
		a.LocationOfOrigin = path
	}
	if err := clientcmd.ResolveLocalPaths(kc); err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*kc, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	return cfg, nil
}

// NewResolver returns a Resolver and starts its watch, if it has API
// access (Options.ListWatch, Config or Kubeconfig, and NodeName); Close stops
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
	lw := opts.ListWatch
	cfg := opts.Config
	if lw == nil && cfg == nil {
		var err error
		if cfg, err = RESTConfig(opts.Kubeconfig); err != nil {
			r.fallback(err.Error())
		}
	}
	if lw == nil && cfg != nil && r.node != "" {
		client, err := podClient(cfg)
		if err != nil {
			return nil, err
		}
		lw = r.listWatch(client)
	}
	switch {
	case lw == nil && cfg == nil:
		r.fallback("no Kubernetes API access (no kubeconfig and not in a cluster)")
	case r.node == "":
		r.fallback("no node name (set NODE_NAME or --kube.node-name)")
		lw = nil
	}
	if lw == nil {
		close(r.done)
		return r, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	ref := cache.NewReflectorWithOptions(lw, &v1.Pod{}, (*podStore)(r), cache.ReflectorOptions{Name: "kube pods on " + r.node})
	go func() {
		defer close(r.done)
		ref.RunWithContext(ctx)
	}()
	return r, nil
}

// podClient returns a REST client of the core v1 API that knows pods and
// nothing else. The typed clientset of client-go (package kubernetes)
// registers every API group of Kubernetes at init: it tripled the binary
// (25 to 76 MB) and added 17 MB of resident memory at start.
func podClient(cfg *rest.Config) (*rest.RESTClient, error) {
	scheme := runtime.NewScheme()
	if err := v1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	metav1.AddToGroupVersion(scheme, v1.SchemeGroupVersion)
	c := rest.CopyConfig(cfg)
	c.APIPath = "/api"
	c.GroupVersion = &v1.SchemeGroupVersion
	c.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = "kernel_exporter"
	}
	client, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return client, nil
}

// fallback logs, once, why pods are named by UID.
func (r *Resolver) fallback(why string) {
	r.warnOnce.Do(func() {
		r.log.Warn("kube: pods are labelled by UID and containers by id", "reason", why)
	})
}

// listWatch lists and watches the pods of r.node through client. Its
// errors are logged once (the reflector retries with a backoff).
func (r *Resolver) listWatch(client rest.Interface) cache.ListerWatcher {
	sel := fields.OneTermEqualSelector("spec.nodeName", r.node).String()
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			l := &v1.PodList{}
			err := client.Get().Resource("pods").VersionedParams(&o, metav1.ParameterCodec).Do(ctx).Into(l)
			if err != nil && ctx.Err() == nil {
				r.fallback("Kubernetes API: " + err.Error())
			}
			return l, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			o.Watch = true
			w, err := client.Get().Resource("pods").VersionedParams(&o, metav1.ParameterCodec).Watch(ctx)
			if err != nil && ctx.Err() == nil {
				r.fallback("Kubernetes API: " + err.Error())
			}
			return w, err
		},
	}
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

// podStore is the reflector's store: it keeps a podMeta of each pod in
// the Resolver's caches.
type podStore Resolver

var _ cache.ReflectorStore = (*podStore)(nil)

func (s *podStore) Add(obj any) error    { return s.Update(obj) }
func (s *podStore) Resync() error        { return nil }
func (s *podStore) Update(obj any) error { return s.put(obj) }

func (s *podStore) put(obj any) error {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return fmt.Errorf("kube: unexpected object %T", obj)
	}
	p := newPodMeta(pod)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.add(p)
	return nil
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

func (s *podStore) Delete(obj any) error {
	var pod *v1.Pod
	switch o := obj.(type) {
	case *v1.Pod:
		pod = o
	case cache.DeletedFinalStateUnknown:
		pod, _ = o.Obj.(*v1.Pod)
	}
	if pod == nil {
		return fmt.Errorf("kube: unexpected object %T", obj)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	uid := string(pod.UID)
	if p, ok := s.live.Peek(uid); ok {
		s.remove(p)
	}
	return nil
}

// Replace makes list the live pods: those no longer in it are deleted.
func (s *podStore) Replace(list []any, _ string) error {
	pods := make([]*podMeta, 0, len(list))
	keep := make(map[string]bool, len(list))
	var errs []error
	for _, obj := range list {
		pod, ok := obj.(*v1.Pod)
		if !ok {
			errs = append(errs, fmt.Errorf("kube: unexpected object %T", obj))
			continue
		}
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
	return errors.Join(errs...)
}

// newPodMeta keeps of pod its UID, namespace, name, mirror hash and the
// ids and names of its containers (current and last terminated ones, of
// regular, init and ephemeral containers; at most MaxContainers).
func newPodMeta(pod *v1.Pod) *podMeta {
	p := &podMeta{
		uid:       clip(string(pod.UID), maxNameLen),
		namespace: clip(pod.Namespace, maxNameLen),
		name:      clip(pod.Name, maxNameLen),
	}
	if h := pod.Annotations[v1.MirrorPodAnnotationKey]; h != "" && validUID(h, '-') {
		p.mirror = h
	}
	add := func(id, name string) {
		id = containerID(id)
		if id == "" || len(p.containers) >= MaxContainers {
			return
		}
		p.containers = append(p.containers, containerMeta{id: id, name: clip(name, maxNameLen)})
	}
	for _, list := range [][]v1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses, pod.Status.EphemeralContainerStatuses} {
		for _, c := range list {
			add(c.ContainerID, c.Name)
			if t := c.LastTerminationState.Terminated; t != nil {
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
