// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kernel-exporter/kernel_exporter/bounded"
)

func testPod(ns, name, uid string, containers map[string]string) *Pod {
	p := &Pod{}
	p.Metadata.Namespace, p.Metadata.Name, p.Metadata.UID = ns, name, uid
	for cname, id := range containers {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, ContainerStatus{Name: cname, ContainerID: id})
	}
	return p
}

// memSource is a Source of pods held in memory: create and remove send
// their watch events to the watch in flight.
type memSource struct {
	mu     sync.Mutex
	pods   map[string]*Pod // by UID
	rv     int
	events chan Event
}

func newMemSource(pods ...*Pod) *memSource {
	s := &memSource{pods: map[string]*Pod{}, events: make(chan Event, 16)}
	for _, p := range pods {
		s.pods[p.Metadata.UID] = p
	}
	return s
}

func (s *memSource) List(ctx context.Context) ([]*Pod, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var l []*Pod
	for _, p := range s.pods {
		l = append(l, p)
	}
	return l, "1", nil
}

func (s *memSource) Watch(ctx context.Context, rv string, fn func(Event) error) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e := <-s.events:
			if err := fn(e); err != nil {
				return err
			}
		}
	}
}

func (s *memSource) create(p *Pod) {
	s.mu.Lock()
	s.pods[p.Metadata.UID] = p
	s.mu.Unlock()
	s.events <- Event{Type: "ADDED", Pod: p}
}

func (s *memSource) remove(uid string) {
	s.mu.Lock()
	p := s.pods[uid]
	delete(s.pods, uid)
	s.mu.Unlock()
	s.events <- Event{Type: "DELETED", Pod: p}
}

// waitFor polls cond every 10 ms for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestResolverFake(t *testing.T) {
	uid2 := "11111111-2222-3333-4444-555555555555"
	id2 := strings.Repeat("ab", 32)
	cs := newMemSource(testPod("web", "frontend-0", testUID, map[string]string{"nginx": "containerd://" + testID}))
	r, err := NewResolver(Options{Source: cs, NodeName: "node-a", CacheSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	waitFor(t, "the first list", r.Synced)
	if got, want := r.Lookup(testUID, testID), (Names{"web", "frontend-0", "nginx", true, true}); got != want {
		t.Errorf("Lookup = %+v, want %+v", got, want)
	}
	// A container not in the status yet keeps its id.
	if got, want := r.Lookup(testUID, id2), (Names{"web", "frontend-0", id2, true, false}); got != want {
		t.Errorf("Lookup of an unknown container = %+v, want %+v", got, want)
	}
	if got, want := r.Lookup(uid2, id2), (Names{"", uid2, id2, false, false}); got != want {
		t.Errorf("Lookup of an unknown pod = %+v, want %+v", got, want)
	}

	// A pod added through the watch.
	cs.create(testPod("db", "pg-0", uid2, map[string]string{"postgres": "cri-o://" + id2}))
	want := Names{"db", "pg-0", "postgres", true, true}
	waitFor(t, "the watched pod", func() bool { return r.Lookup(uid2, id2) == want })

	// A deleted pod keeps its names until evicted.
	cs.remove(uid2)
	waitFor(t, "the deletion", func() bool { _, ok := r.live.Peek(uid2); return !ok })
	if got := r.Lookup(uid2, id2); got != want {
		t.Errorf("Lookup of a deleted pod = %+v, want %+v", got, want)
	}
	// Deleting CacheSize more pods evicts it.
	for i := range 4 {
		uid := strings.Repeat(string(rune('a'+i)), 8) + uid2[8:]
		name := "tmp-" + string(rune('a'+i))
		cs.create(testPod("db", name, uid, nil))
		waitFor(t, "pod "+name, func() bool { return r.Lookup(uid, "").Resolved })
		cs.remove(uid)
		waitFor(t, "deletion of "+name, func() bool { _, ok := r.live.Peek(uid); return !ok })
	}
	if got, want := r.Lookup(uid2, id2), (Names{"", uid2, id2, false, false}); got != want {
		t.Errorf("Lookup of an evicted pod = %+v, want %+v", got, want)
	}
}

func TestResolverNoAccess(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	for range 2 {
		r, err := NewResolver(Options{Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := r.Lookup(testUID, testID), (Names{"", testUID, testID, false, false}); got != want {
			t.Errorf("Lookup = %+v, want %+v", got, want)
		}
		r.Close()
	}
	if n := strings.Count(buf.String(), "labelled by UID"); n != 2 { // once per resolver
		t.Errorf("log has %d warnings, want 2:\n%s", n, buf.String())
	}
	buf.Reset()
	r, err := NewResolver(Options{Source: newMemSource(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if !strings.Contains(buf.String(), "no node name") {
		t.Errorf("log does not say the node name is missing:\n%s", buf.String())
	}
}

func TestPodMetaBounds(t *testing.T) {
	p := testPod(strings.Repeat("n", 1000), "x", testUID, nil)
	for i := range 2 * MaxContainers {
		p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses, ContainerStatus{Name: "c", ContainerID: "containerd://" + strings.Repeat("1", i%60+1)})
	}
	restarted := ContainerStatus{Name: "restarted", ContainerID: "containerd://new"}
	restarted.LastState.Terminated = &struct {
		ContainerID string `json:"containerID"`
	}{ContainerID: "containerd://old"}
	p.Status.ContainerStatuses = []ContainerStatus{
		{Name: "bad", ContainerID: "no-scheme"},
		{Name: "long", ContainerID: "containerd://" + strings.Repeat("a", maxIDLen+1)},
		restarted,
	}
	m := newPodMeta(p)
	if len(m.namespace) != maxNameLen {
		t.Errorf("namespace kept %d bytes, want %d", len(m.namespace), maxNameLen)
	}
	if len(m.containers) != MaxContainers {
		t.Errorf("%d containers kept, want %d", len(m.containers), MaxContainers)
	}
	if m.containers[0] != (containerMeta{"new", "restarted"}) || m.containers[1] != (containerMeta{"old", "restarted"}) {
		t.Errorf("containers start with %+v, want new and old ids of restarted", m.containers[:2])
	}
}

// TestResolverMirrorPod names a static pod's containers: its cgroup has
// the kubelet's hash of the manifest, which the mirror pod in the API
// carries in its kubernetes.io/config.mirror annotation.
func TestResolverMirrorPod(t *testing.T) {
	p := testPod("kube-system", "etcd-node-a", testUID, map[string]string{"etcd": "containerd://" + testID})
	p.Metadata.Annotations = map[string]string{mirrorPodAnnotation: testHash}
	r, err := NewResolver(Options{Source: newMemSource(p), NodeName: "node-a"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	waitFor(t, "the first list", r.Synced)
	cg := ParseCgroupPath("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + testHash + ".slice/cri-containerd-" + testID + ".scope")
	if cg == nil {
		t.Fatal("static pod path not parsed")
	}
	if got, want := r.Lookup(cg.PodUID, cg.ContainerID), (Names{"kube-system", "etcd-node-a", "etcd", true, true}); got != want {
		t.Errorf("Lookup = %+v, want %+v", got, want)
	}
}

func BenchmarkLookup(b *testing.B) {
	r, err := NewResolver(Options{Source: newMemSource(testPod("web", "frontend-0", testUID, map[string]string{"nginx": "containerd://" + testID})), NodeName: "node-a"})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	for deadline := time.Now().Add(10 * time.Second); !r.Synced(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatal("not synced")
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if !r.Lookup(testUID, testID).Complete {
			b.Fatal("not found")
		}
	}
}

func TestRESTConfigKubeconfig(t *testing.T) {
	dir := t.TempDir()
	const kc = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority: ca.pem
users:
- name: u
  user:
    token: secret-token-value
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
`
	path := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(filepath.Join(dir, "ca.pem"), []byte("not read here"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := RESTConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://127.0.0.1:6443" || cfg.BearerToken != "secret-token-value" || cfg.CAFile != filepath.Join(dir, "ca.pem") {
		t.Errorf("config: host %s, token set %v, CA file %s; want the file's, with the CA beside it", cfg.Host, cfg.BearerToken != "", cfg.CAFile)
	}

	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("secret-token-value: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, MaxKubeconfig+1), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{bad, big, filepath.Join(dir, "missing"), dir} {
		_, err := RESTConfig(p)
		if err == nil || !strings.Contains(err.Error(), p) || strings.Contains(err.Error(), "secret") {
			t.Errorf("RESTConfig(%s): error %v, want one naming the file and not quoting it", p, err)
		}
	}
	if _, err := RESTConfig(big); !errors.Is(err, bounded.ErrTooLarge) {
		t.Errorf("RESTConfig of a %d-byte file: %v, want ErrTooLarge", MaxKubeconfig+1, err)
	}
}
