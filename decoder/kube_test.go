// SPDX-License-Identifier: Apache-2.0

package decoder

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kernel-exporter/kernel_exporter/kube/kubefake"

	"github.com/kernel-exporter/kernel_exporter/config"
	"github.com/kernel-exporter/kernel_exporter/internal/testenv"
	"github.com/kernel-exporter/kernel_exporter/kube"
)

const (
	kubeUID  = "0f6c2a4e-9b1d-4c3e-8a7f-1b2c3d4e5f60"
	kubeID   = "4b1f0e9d2c3a5b6f7e8d9c0b1a2f3e4d5c6b7a8f9e0d1c2b3a4f5e6d7c8b9a0f"
	kubeUID2 = "11111111-2222-3333-4444-555555555555"
	kubeID2  = "abababababababababababababababababababababababababababababababab"
)

// kubeChains builds [kube_namespace], [kube_pod] and [kube_container] for
// a field of size bytes, in that order.
func kubeChains(t *testing.T, e *Env, size int) [3]Chain {
	t.Helper()
	var c [3]Chain
	for i, name := range []string{"kube_namespace", "kube_pod", "kube_container"} {
		var confs []config.Decoder
		if size == textInput {
			confs = append(confs, config.Decoder{Name: "cgroup"})
		}
		ch, err := e.NewChain(append(confs, config.Decoder{Name: name}), max(size, 8), nil)
		if err != nil {
			t.Fatal(err)
		}
		c[i] = ch
	}
	return c
}

func decodeKube(t *testing.T, c [3]Chain, in []byte) [3]string {
	t.Helper()
	var out [3]string
	for i, ch := range c {
		v, err := ch.Decode(in)
		if err != nil {
			t.Fatalf("%s: %v", ch.Names(), err)
		}
		out[i] = v
	}
	return out
}

// TestKubeDecoders resolves cgroup ids of a fake hierarchy through a fake
// API server: raw ids, and paths from a cgroup decoder.
func TestKubeDecoders(t *testing.T) {
	e, mount := cgroupEnv(t, "/")
	web := "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + strings.ReplaceAll(kubeUID, "-", "_") + ".slice"
	db := "kubepods/pod" + kubeUID2
	mkdirs(t, mount, web+"/cri-containerd-"+kubeID+".scope", db+"/crio-"+kubeID2, "system.slice/cron.service")
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "frontend-0", UID: kubeUID},
		Spec:       v1.PodSpec{NodeName: "node-a"},
		Status:     v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{{Name: "nginx", ContainerID: "containerd://" + kubeID}}},
	}
	e.Kube = &kube.Options{Source: kubefake.Source(fake.NewClientset(pod), "node-a"), NodeName: "node-a"}
	t.Cleanup(e.Close)
	raw := kubeChains(t, e, 8)
	text := kubeChains(t, e, textInput)
	deadline := time.Now().Add(10 * time.Second)
	for !e.kube.Synced() {
		if time.Now().After(deadline) {
			t.Fatal("pod list not synced in 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, tt := range []struct {
		dir  string
		want [3]string
	}{
		{web + "/cri-containerd-" + kubeID + ".scope", [3]string{"web", "frontend-0", "nginx"}},
		{web, [3]string{"web", "frontend-0", ""}},
		{db + "/crio-" + kubeID2, [3]string{"", kubeUID2, kubeID2}}, // not known to the API
		{"system.slice/cron.service", [3]string{"", "", ""}},
		{"", [3]string{"", "", ""}},
	} {
		id := inode(t, filepath.Join(mount, tt.dir))
		if got := decodeKube(t, raw, u64(id)); got != tt.want {
			t.Errorf("raw id of %s = %q, want %q", tt.dir, got, tt.want)
		}
		if got := decodeKube(t, text, u64(id)); got != tt.want {
			t.Errorf("path of %s = %q, want %q", tt.dir, got, tt.want)
		}
	}
	// An unknown id is not a pod: the key is kept with empty labels.
	if got := decodeKube(t, raw, u64(1<<50)); got != [3]string{} {
		t.Errorf("unknown id = %q, want empty labels", got)
	}
	if _, err := raw[1].Decode(u32(1)); err == nil || !strings.Contains(err.Error(), "kube_pod: got 4 bytes, want 8") {
		t.Errorf("4-byte input: error %v, want kube_pod: got 4 bytes, want 8", err)
	}
	if _, err := e.New(config.Decoder{Name: "kube_pod"}, 4, nil); err == nil {
		t.Error("kube_pod of a 4-byte field was built")
	}
}

// TestKubeCgroupReal creates kubepods-style cgroups of both drivers and
// runtimes in the real cgroup2 hierarchy, moves a sleeping child into each
// container's cgroup in turn, and checks that the cgroup id of that
// directory (its inode number, which bpf_get_current_cgroup_id() returns
// for the child) decodes to the pod UID and container id, without API
// access.
func TestKubeCgroupReal(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.SkipOrFail(t, "creating cgroups needs root")
	}
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	mount, root, ok := findCgroup2(data)
	if !ok {
		testenv.SkipOrFail(t, "no cgroup2 file system mounted")
	}
	root = strings.TrimSuffix(root, "/")
	var b [4]byte
	_, _ = rand.Read(b[:])
	prefix := "kx-kube-test-" + hex.EncodeToString(b[:])
	uidS := strings.ReplaceAll(kubeUID, "-", "_")
	layouts := []struct {
		dir     string
		uid, id string
	}{
		{prefix + "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uidS + ".slice/cri-containerd-" + kubeID + ".scope", kubeUID, kubeID},
		{prefix + "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + uidS + ".slice/crio-" + kubeID2 + ".scope", kubeUID, kubeID2},
		{prefix + "/kubepods.slice/kubepods-pod" + strings.ReplaceAll(kubeUID2, "-", "_") + ".slice/cri-containerd-" + kubeID + ".scope", kubeUID2, kubeID},
		{prefix + "/kubepods/burstable/pod" + kubeUID + "/" + kubeID, kubeUID, kubeID},
		{prefix + "/kubepods/pod" + kubeUID2 + "/crio-" + kubeID2, kubeUID2, kubeID2},
	}
	var made []string
	t.Cleanup(func() {
		for i := len(made) - 1; i >= 0; i-- {
			if err := os.Remove(made[i]); err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Errorf("remove cgroup: %v", err)
			}
		}
	})
	for _, l := range layouts {
		dir := mount
		for _, c := range strings.Split(l.dir, "/") {
			dir = filepath.Join(dir, c)
			if err := os.Mkdir(dir, 0o755); err == nil {
				made = append(made, dir)
			} else if !errors.Is(err, os.ErrExist) {
				t.Fatalf("create cgroup: %v", err)
			}
		}
	}
	child := exec.Command("sleep", "60")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Back to the root before the cgroups are removed.
		_ = os.WriteFile(filepath.Join(mount, "cgroup.procs"), fmt.Appendf(nil, "%d", child.Process.Pid), 0o644)
		_ = child.Process.Kill()
		_ = child.Wait()
	})

	e := NewEnv(16)
	t.Cleanup(e.Close)
	raw := kubeChains(t, e, 8)
	cgroup, err := e.NewChain([]config.Decoder{{Name: "cgroup"}}, 8, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layouts {
		dir := filepath.Join(mount, l.dir)
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), fmt.Appendf(nil, "%d", child.Process.Pid), 0o644); err != nil {
			t.Fatalf("move the child into %s: %v", l.dir, err)
		}
		own, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", child.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		path := root + "/" + l.dir
		if !bytes.Contains(own, []byte("0::"+path+"\n")) {
			t.Fatalf("child's /proc/pid/cgroup has no 0::%s:\n%s", path, own)
		}
		id := inode(t, dir)
		got, err := cgroup.Decode(u64(id))
		if err != nil || got != path {
			// A new cgroup is found by the next walk, at most one per
			// interval: let this Env walk now.
			e.cgroups.mu.Lock()
			e.cgroups.lastWalk = time.Time{}
			e.cgroups.mu.Unlock()
			got, err = cgroup.Decode(u64(id))
		}
		if err != nil || got != path {
			t.Fatalf("cgroup decoder: id %d = %q, %v; want %s", id, got, err, path)
		}
		want := [3]string{"", l.uid, l.id}
		if got := decodeKube(t, raw, u64(id)); got != want {
			t.Errorf("cgroup %s (id %d): kube decoders = %q, want %q", l.dir, id, got, want)
		}
		cg := kube.ParseCgroupPath(path)
		if cg == nil || cg.PodUID != l.uid || cg.ContainerID != l.id {
			t.Errorf("ParseCgroupPath(%s) = %+v", path, cg)
		}
	}
}
