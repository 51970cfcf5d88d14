// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kernel-exporter/kernel_exporter/internal/kubetest"
)

// apiPod creates a Pod bound to node through the API server, then sets
// its status.containerStatuses (through the status subresource, as the
// kubelet does) with containerd://<id> for each container name.
func apiPod(t *testing.T, cs kubernetes.Interface, ns, name, node string, containers ...[2]string) *v1.Pod {
	t.Helper()
	ctx := context.Background()
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1.PodSpec{NodeName: node},
	}
	for _, c := range containers {
		pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: c[0], Image: "registry.invalid/" + c[0]})
	}
	pod, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s/%s: %v", ns, name, err)
	}
	pod.Status.Phase = v1.PodRunning
	for _, c := range containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, v1.ContainerStatus{
			Name: c[0], Image: "registry.invalid/" + c[0], ImageID: "sha256:" + strings.Repeat("0", 64),
			ContainerID: "containerd://" + c[1], Ready: true,
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.Now()}},
		})
	}
	pod, err = cs.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update status of pod %s/%s: %v", ns, name, err)
	}
	return pod
}

// deletePod deletes a pod at once (no kubelet is there to end it
// gracefully).
func deletePod(t *testing.T, cs kubernetes.Interface, ns, name string) {
	t.Helper()
	zero := int64(0)
	if err := cs.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatalf("delete pod %s/%s: %v", ns, name, err)
	}
}

// TestResolverAPIServer names pods created through a real kube-apiserver:
// a Node, pods on it and on another node, their container statuses set
// through the status subresource. The Resolver reads the kubeconfig file
// the exporter would get, watches node-a only, names the containers of a
// cgroup path, follows pods added and deleted, and falls back to the UID
// once a deleted pod is evicted.
func TestResolverAPIServer(t *testing.T) {
	c := kubetest.Start(t)
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, n := range []string{"node-a", "node-b"} {
		if _, err := cs.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create node %s: %v", n, err)
		}
	}
	for _, ns := range []string{"web", "db"} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create namespace %s: %v", ns, err)
		}
	}
	idNginx, idSidecar, idOther, idPG := strings.Repeat("a1", 32), strings.Repeat("b2", 32), strings.Repeat("c3", 32), strings.Repeat("d4", 32)
	web := apiPod(t, cs, "web", "frontend-0", "node-a", [2]string{"nginx", idNginx}, [2]string{"sidecar", idSidecar})
	other := apiPod(t, cs, "web", "frontend-1", "node-b", [2]string{"nginx", idOther})

	r, err := NewResolver(Options{Kubeconfig: c.Kubeconfig, NodeName: "node-a", CacheSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	waitFor(t, "the first list", r.Synced)

	uidPath := strings.ReplaceAll(string(web.UID), "-", "_")
	for _, tt := range []struct {
		path string
		want Names
	}{
		{"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + uidPath + ".slice/cri-containerd-" + idNginx + ".scope", Names{"web", "frontend-0", "nginx", true, true}},
		{"/kubepods/besteffort/pod" + string(web.UID) + "/" + idSidecar, Names{"web", "frontend-0", "sidecar", true, true}},
		// On another node: not watched, named by UID.
		{"/kubepods/besteffort/pod" + string(other.UID) + "/" + idOther, Names{"", string(other.UID), idOther, false, false}},
	} {
		cg := ParseCgroupPath(tt.path)
		if cg == nil {
			t.Fatalf("ParseCgroupPath(%s) = nil", tt.path)
		}
		if got := r.Lookup(cg.PodUID, cg.ContainerID); got != tt.want {
			t.Errorf("Lookup for %s = %+v, want %+v", tt.path, got, tt.want)
		}
	}

	// A pod created after the list comes through the watch.
	pg := apiPod(t, cs, "db", "pg-0", "node-a", [2]string{"postgres", idPG})
	want := Names{"db", "pg-0", "postgres", true, true}
	waitFor(t, "pg-0 through the watch", func() bool { return r.Lookup(string(pg.UID), idPG) == want })

	// A deleted pod keeps its names while the deleted pods' cache holds it
	// (CacheSize 2): two more deletions evict it.
	deletePod(t, cs, "db", "pg-0")
	waitFor(t, "deletion of pg-0", func() bool { _, ok := r.live.Peek(string(pg.UID)); return !ok })
	if got := r.Lookup(string(pg.UID), idPG); got != want {
		t.Errorf("Lookup of deleted pg-0 = %+v, want %+v", got, want)
	}
	deletePod(t, cs, "web", "frontend-0")
	waitFor(t, "deletion of frontend-0", func() bool { _, ok := r.live.Peek(string(web.UID)); return !ok })
	tmp := apiPod(t, cs, "db", "tmp", "node-a", [2]string{"tmp", strings.Repeat("f6", 32)})
	waitFor(t, "tmp through the watch", func() bool { return r.Lookup(string(tmp.UID), "").Resolved })
	deletePod(t, cs, "db", "tmp")
	waitFor(t, "deletion of tmp", func() bool { _, ok := r.live.Peek(string(tmp.UID)); return !ok })
	if got, want := r.Lookup(string(pg.UID), idPG), (Names{"", string(pg.UID), idPG, false, false}); got != want {
		t.Errorf("Lookup of evicted pg-0 = %+v, want %+v", got, want)
	}
	if got := r.Lookup(string(web.UID), idNginx); got != (Names{"web", "frontend-0", "nginx", true, true}) {
		t.Errorf("Lookup of deleted frontend-0 = %+v, want its names", got)
	}
}

// rbacDocs are a ServiceAccount kube/exporter, and when grant is set the
// least it needs: get, list and watch on pods, cluster-wide (a
// DaemonSet's pods watch their own node's pods in every namespace).
func rbacDocs(grant bool) [][]byte {
	docs := [][]byte{
		[]byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: kube\n"),
		[]byte("apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: exporter\n  namespace: kube\n"),
	}
	if grant {
		docs = append(docs,
			[]byte("apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: kube-exporter\nrules:\n- apiGroups: [\"\"]\n  resources: [pods]\n  verbs: [get, list, watch]\n"),
			[]byte("apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: kube-exporter\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: kube-exporter\nsubjects:\n- kind: ServiceAccount\n  name: exporter\n  namespace: kube\n"))
	}
	return docs
}

// TestResolverAPIServerRBAC runs the Resolver as a ServiceAccount: without
// a role it cannot list pods, names them by UID and says so once in the
// log; with get, list and watch on pods it names them.
func TestResolverAPIServerRBAC(t *testing.T) {
	c := kubetest.Start(t)
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := kubetest.Apply(ctx, c.Config, rbacDocs(false)); err != nil {
		t.Fatal(err)
	}
	id := strings.Repeat("e5", 32)
	pod := apiPod(t, cs, "kube", "app-0", "node-a", [2]string{"app", id})
	_, kubeconfig, err := c.ServiceAccountConfig(ctx, "kube", "exporter")
	if err != nil {
		t.Fatal(err)
	}

	var buf syncBuf
	r, err := NewResolver(Options{Kubeconfig: kubeconfig, NodeName: "node-a", Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the forbidden list to be logged", func() bool { return strings.Contains(buf.String(), "forbidden") })
	if got, want := r.Lookup(string(pod.UID), id), (Names{"", string(pod.UID), id, false, false}); got != want {
		t.Errorf("Lookup without RBAC = %+v, want %+v", got, want)
	}
	r.Close()
	if n := strings.Count(buf.String(), "labelled by UID"); n != 1 {
		t.Errorf("%d warnings, want 1:\n%s", n, buf.String())
	}

	if err := kubetest.Apply(ctx, c.Config, rbacDocs(true)); err != nil {
		t.Fatal(err)
	}
	r, err = NewResolver(Options{Kubeconfig: kubeconfig, NodeName: "node-a"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	waitFor(t, "the first list", r.Synced)
	if got, want := r.Lookup(string(pod.UID), id), (Names{"kube", "app-0", "app", true, true}); got != want {
		t.Errorf("Lookup with RBAC = %+v, want %+v", got, want)
	}
}

// syncBuf is a bytes.Buffer safe for the reflector's goroutine and the
// test's.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
