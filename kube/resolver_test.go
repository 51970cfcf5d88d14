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
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kernel-exporter/kernel_exporter/bounded"
	"github.com/kernel-exporter/kernel_exporter/kube/kubefake"
)

func testPod(ns, name, uid, node string, containers map[string]string) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid)},
		Spec:       v1.PodSpec{NodeName: node},
	}
	for cname, id := range containers {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: cname, Image: "busybox"})
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, v1.ContainerStatus{Name: cname, ContainerID: id})
	}
	return p
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
	cs := fake.NewClientset(testPod("web", "frontend-0", testUID, "node-a", map[string]string{"nginx": "containerd://" + testID}))
	r, err := NewResolver(Options{ListWatch: kubefake.ListWatch(cs, "node-a"), NodeName: "node-a", CacheSize: 4})
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
	ctx := context.Background()
	if _, err := cs.CoreV1().Pods("db").Create(ctx, testPod("db", "pg-0", uid2, "node-a", map[string]string{"postgres": "cri-o://" + id2}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := Names{"db", "pg-0", "postgres", true, true}
	waitFor(t, "the watched pod", func() bool { return r.Lookup(uid2, id2) == want })

	// A deleted pod keeps its names until evicted.
	if err := cs.CoreV1().Pods("db").Delete(ctx, "pg-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the deletion", func() bool { _, ok := r.live.Peek(uid2); return !ok })
	if got := r.Lookup(uid2, id2); got != want {
		t.Errorf("Lookup of a deleted pod = %+v, want %+v", got, want)
	}
	// Deleting CacheSize more pods evicts it.
	for i := range 4 {
		uid := strings.Repeat(string(rune('a'+i)), 8) + uid2[8:]
		name := "tmp-" + string(rune('a'+i))
		if _, err := cs.CoreV1().Pods("db").Create(ctx, testPod("db", name, uid, "node-a", nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "pod "+name, func() bool { return r.Lookup(uid, "").Resolved })
		if err := cs.CoreV1().Pods("db").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
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
	r, err := NewResolver(Options{ListWatch: kubefake.ListWatch(fake.NewClientset(), ""), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if !strings.Contains(buf.String(), "no node name") {
		t.Errorf("log does not say the node name is missing:\n%s", buf.String())
	}
}

func TestPodMetaBounds(t *testing.T) {
	p := testPod(strings.Repeat("n", 1000), "x", testUID, "n", nil)
	for i := range 2 * MaxContainers {
		p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses, v1.ContainerStatus{Name: "c", ContainerID: "containerd://" + strings.Repeat("1", i%60+1)})
	}
	p.Status.ContainerStatuses = []v1.ContainerStatus{
		{Name: "bad", ContainerID: "no-scheme"},
		{Name: "long", ContainerID: "containerd://" + strings.Repeat("a", maxIDLen+1)},
		{Name: "restarted", ContainerID: "containerd://new", LastTerminationState: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ContainerID: "containerd://old"}}},
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
	p := testPod("kube-system", "etcd-node-a", testUID, "node-a", map[string]string{"etcd": "containerd://" + testID})
	p.Annotations = map[string]string{v1.MirrorPodAnnotationKey: testHash}
	r, err := NewResolver(Options{ListWatch: kubefake.ListWatch(fake.NewClientset(p), "node-a"), NodeName: "node-a"})
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
	r, err := NewResolver(Options{ListWatch: kubefake.ListWatch(fake.NewClientset(testPod("web", "frontend-0", testUID, "node-a", map[string]string{"nginx": "containerd://" + testID})), "node-a"), NodeName: "node-a"})
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
	if cfg.Host != "https://127.0.0.1:6443" || cfg.BearerToken != "secret-token-value" || cfg.TLSClientConfig.CAFile != filepath.Join(dir, "ca.pem") {
		t.Errorf("config: host %s, token set %v, CA file %s; want the file's, with the CA beside it", cfg.Host, cfg.BearerToken != "", cfg.TLSClientConfig.CAFile)
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
