// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kernel-exporter/kernel_exporter/internal/kubetest"
)

// kubeOOMConfig is the bundled oomkill program's counter with the victim's
// cgroup id decoded into four labels: its path, and through the kube
// decoders its pod's namespace, name and container.
const kubeOOMConfig = `metrics:
  counters:
    - name: oom_kills_total
      help: OOM kills by the victim's cgroup and Kubernetes pod
      labels:
        - name: cgroup
          size: 8
          decoders:
            - name: cgroup
        - name: namespace
          of: cgroup
          decoders:
            - name: kube_namespace
        - name: pod
          of: cgroup
          decoders:
            - name: kube_pod
        - name: container
          of: cgroup
          decoders:
            - name: kube_container
`

const (
	kubeTestUID = "5d2f8a1c-3b4e-4f6a-9c7d-0e1f2a3b4c5d"
	kubeTestID  = "9a8b7c6d5e4f30211203f4e5d6c7b8a99a8b7c6d5e4f30211203f4e5d6c7b8a9"
)

// kubeOOMDir lays out --config.dir with the kubeoom config: the bundled
// oomkill object and kubeOOMConfig.
func kubeOOMDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	obj, err := os.ReadFile(filepath.Join(repoRoot, "programs", "oomkill.bpf.o"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kubeoom.bpf.o"), obj, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kubeoom.yaml"), []byte(kubeOOMConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// kubeOOMKill OOM-kills a child in a container cgroup of the systemd
// driver's layout (kubepods.slice/.../cri-containerd-<id>.scope under a
// test directory) and returns the scrape that has its kill, and the
// cgroup's path.
func kubeOOMKill(t *testing.T, e *Exporter, uid, id string) (Metrics, string) {
	t.Helper()
	const metric = "kernel_oom_kills_total"
	sub := "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice/cri-containerd-" + id + ".scope"
	cg := newMemCgroupAt(t, 32<<20, sub)
	if v := e.Scrape().Value("kernel_exporter_config_up", L("config", "kubeoom")); v != 1 {
		t.Fatalf("config_up{config=kubeoom} = %v, want 1\n%s", v, e.Logs())
	}
	return oomKill(t, e, cg, metric, 5*time.Second), cg.V2Path
}

// TestKubeLabelsFallback runs the kubeoom config without API access: the
// OOM-killed child's series is labelled with its pod UID and container id
// parsed from its cgroup path (namespace empty), and the log says once why.
func TestKubeLabelsFallback(t *testing.T) {
	const metric = "kernel_oom_kills_total"
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("NODE_NAME", "")
	e := Start(t, "--programs=none", "--config.dir="+kubeOOMDir(t), "--config.names=kubeoom")
	after, path := kubeOOMKill(t, e, kubeTestUID, kubeTestID)
	want := L("cgroup", path, "pod", kubeTestUID, "container", kubeTestID)
	if v := after.Value(metric, want); v != 1 {
		t.Errorf("%s%v = %v, want 1\n%s", metric, want, v, after.seriesDump(metric))
	}
	for _, ns := range after.LabelValues(metric, "namespace") {
		if ns != "" {
			t.Errorf("namespace label %q without API access, want empty", ns)
		}
	}
	// Other cgroups' kills (none expected here) would have empty pod labels.
	if n := strings.Count(e.Logs(), "labelled by UID"); n != 1 {
		t.Errorf("log says %d times that pods are labelled by UID, want 1\n%s", n, e.Logs())
	}
	t.Logf("%s%v = %v", metric, want, after.Value(metric, want))
}

// TestKubeLabelsAPIServer runs the kubeoom config against a real
// kube-apiserver: a Node and a Pod on it are created through the API, then
// the Pod's status gets a container whose containerID is containerd://<id>
// (through the status subresource, as a kubelet writes it), and the
// exporter watches that node with the cluster's kubeconfig. A child
// OOM-killed in the container's cgroup (systemd driver layout, the pod's
// real UID) is counted under the pod's namespace and name, and the
// container's id until the Pod's status names it, then its name.
func TestKubeLabelsAPIServer(t *testing.T) {
	const (
		metric = "kernel_oom_kills_total"
		node   = "kx-node-1"
	)
	c := kubetest.Start(t)
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := cs.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create node: %v", err)
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	pod, err := cs.CoreV1().Pods("shop").Create(ctx, &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "cart-0"},
		Spec:       v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "app", Image: "registry.invalid/app"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod: %v", err)
	}
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	e := Start(t, "--programs=none", "--config.dir="+kubeOOMDir(t), "--config.names=kubeoom",
		"--kube.kubeconfig="+c.Kubeconfig, "--kube.node-name="+node)
	uid := string(pod.UID)
	_, path := kubeOOMKill(t, e, uid, kubeTestID)

	// The container ran before the kubelet wrote its id into the pod's
	// status, as in a real cluster: the pod is named, the container by id.
	var after Metrics
	early := L("cgroup", path, "namespace", "shop", "pod", "cart-0", "container", kubeTestID)
	Eventually(t, 10*time.Second, func() bool {
		after = e.Scrape()
		return after.Value(metric, early) == 1
	}, "no %s%v = 1", metric, early)

	pod.Status.Phase = v1.PodRunning
	pod.Status.ContainerStatuses = []v1.ContainerStatus{{
		Name: "app", Image: "registry.invalid/app", ImageID: "sha256:" + strings.Repeat("0", 64),
		ContainerID: "containerd://" + kubeTestID, Ready: true,
		State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.Now()}},
	}}
	if _, err := cs.CoreV1().Pods("shop").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update pod status: %v", err)
	}
	// The same map key is decoded again until its names are settled.
	want := L("cgroup", path, "namespace", "shop", "pod", "cart-0", "container", "app")
	Eventually(t, 10*time.Second, func() bool {
		after = e.Scrape()
		return after.Value(metric, want) == 1
	}, "no %s%v = 1 after the pod's status was written", metric, want)
	if n := after.Series(metric, L("cgroup", path)); n != 1 {
		t.Errorf("%d series of cgroup %s, want 1\n%s", n, path, after.seriesDump(metric))
	}
	if strings.Contains(e.Logs(), "labelled by UID") {
		t.Errorf("the exporter fell back to UIDs with API access:\n%s", e.Logs())
	}
	t.Logf("%s%v = %v", metric, want, after.Value(metric, want))
}
