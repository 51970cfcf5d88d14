// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kernel-exporter/kernel_exporter/kube/kubefake"

	"github.com/kernel-exporter/kernel_exporter/config"
	"github.com/kernel-exporter/kernel_exporter/decoder"
	"github.com/kernel-exporter/kernel_exporter/kube"
)

// TestKubeLabelsNotSettled reads a cgroup id key whose pod the pod watch
// does not know yet: it is labelled by UID and container id, and decoded
// again at every read (not kept in the decode cache), so that once the
// pod arrives the same key gets its names.
func TestKubeLabelsNotSettled(t *testing.T) {
	const (
		uid = "0f6c2a4e-9b1d-4c3e-8a7f-1b2c3d4e5f60"
		id  = "4b1f0e9d2c3a5b6f7e8d9c0b1a2f3e4d5c6b7a8f9e0d1c2b3a4f5e6d7c8b9a0f"
	)
	needBPF(t)
	proc, mount := t.TempDir(), t.TempDir()
	dir := filepath.Join(mount, "kubepods", "pod"+uid, id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(proc, "self"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proc, "self", "mountinfo"), []byte("41 31 0:38 / "+mount+" rw - cgroup2 cgroup2 rw\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	ino := fi.Sys().(*syscall.Stat_t).Ino

	cs := fake.NewClientset()
	env := decoder.NewEnv(100)
	env.ProcRoot = proc
	env.Kube = &kube.Options{Source: kubefake.Source(cs, "node-a"), NodeName: "node-a"}
	t.Cleanup(env.Close)
	const yaml = `metrics:
  counters:
    - name: ops_total
      help: ops
      labels:
        - name: pod
          size: 8
          decoders:
            - name: kube_pod
        - name: container
          of: pod
          decoders:
            - name: kube_container
`
	cfg, err := config.Parse("kube.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	spec := &ebpf.MapSpec{Name: "ops_total", Type: ebpf.Hash, KeySize: 8, ValueSize: 8, MaxEntries: 4}
	m, err := ebpf.NewMap(spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	plan, err := Compile(cfg, &ebpf.CollectionSpec{Maps: map[string]*ebpf.MapSpec{spec.Name: spec}}, env)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(plan, &ebpf.Collection{Maps: map[string]*ebpf.Map{spec.Name: m}}, Limits{CacheSize: 16})
	if err != nil {
		t.Fatal(err)
	}
	key := binary.NativeEndian.AppendUint64(nil, ino)
	if err := m.Put(key, uint64(3)); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the same labels at every read while the pod is unknown
		vals, errs, _ := counters(t, c)
		if want := map[string]float64{"container=" + id + ",pod=" + uid: 3}; !sameValues(vals, want) || errs != 0 {
			t.Fatalf("before the pod is known: %v (%d decode errors), want %v", vals, errs, want)
		}
		if n := c.metrics[0].rs.index.len(); n != 0 {
			t.Errorf("%d keys cached before the pod is known, want 0", n)
		}
	}

	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "frontend-0", UID: uid},
		Spec:       v1.PodSpec{NodeName: "node-a"},
		Status:     v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{{Name: "nginx", ContainerID: "containerd://" + id}}},
	}
	if _, err := cs.CoreV1().Pods("web").Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"container=nginx,pod=frontend-0": 3}
	var vals map[string]float64
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if vals, _, _ = counters(t, c); sameValues(vals, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the pod was created: %v, want %v", vals, want)
		}
	}
	// Settled now: kept in the cache.
	if n := c.metrics[0].rs.index.len(); n != 1 {
		t.Errorf("%d keys cached, want 1", n)
	}
}
