// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"strings"
	"testing"
)

const (
	testUID  = "0f6c2a4e-9b1d-4c3e-8a7f-1b2c3d4e5f60"
	testUIDs = "0f6c2a4e_9b1d_4c3e_8a7f_1b2c3d4e5f60" // systemd's spelling
	testID   = "4b1f0e9d2c3a5b6f7e8d9c0b1a2f3e4d5c6b7a8f9e0d1c2b3a4f5e6d7c8b9a0f"
	testHash = "7e3b9c1d5a2f4e6b8c0d1e2f3a4b5c6d" // a static pod's UID
)

func TestParseCgroupPath(t *testing.T) {
	pod := func(uid, id string, qos QoS, rt Runtime) *Cgroup {
		return &Cgroup{PodUID: uid, ContainerID: id, QoS: qos, Runtime: rt}
	}
	tests := []struct {
		path string
		want *Cgroup
	}{
		// systemd driver
		{"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + testUIDs + ".slice/cri-containerd-" + testID + ".scope", pod(testUID, testID, Burstable, RuntimeContainerd)},
		{"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + testUIDs + ".slice/crio-" + testID + ".scope", pod(testUID, testID, BestEffort, RuntimeCRIO)},
		{"/kubepods.slice/kubepods-pod" + testUIDs + ".slice/cri-containerd-" + testID + ".scope", pod(testUID, testID, Guaranteed, RuntimeContainerd)},
		{"/kubepods.slice/kubepods-pod" + testUIDs + ".slice/docker-" + testID + ".scope", pod(testUID, testID, Guaranteed, RuntimeDocker)},
		{"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + testUIDs + ".slice", pod(testUID, "", Burstable, RuntimeUnknown)},
		{"/kubepods.slice/kubepods-pod" + testHash + ".slice/crio-" + testID + ".scope", pod(testHash, testID, Guaranteed, RuntimeCRIO)},
		// below a container: that container
		{"/kubepods.slice/kubepods-pod" + testUIDs + ".slice/cri-containerd-" + testID + ".scope/init.scope", pod(testUID, testID, Guaranteed, RuntimeContainerd)},
		// nested (kind: --cgroup-root=/kubelet; docker-in-docker)
		{"/system.slice/docker-" + testID + ".scope/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod" + testUIDs + ".slice/cri-containerd-" + testID + ".scope", pod(testUID, testID, BestEffort, RuntimeContainerd)},
		// cgroupfs driver
		{"/kubepods/burstable/pod" + testUID + "/" + testID, pod(testUID, testID, Burstable, RuntimeUnknown)},
		{"/kubepods/besteffort/pod" + testUID + "/" + testID, pod(testUID, testID, BestEffort, RuntimeUnknown)},
		{"/kubepods/pod" + testUID + "/" + testID, pod(testUID, testID, Guaranteed, RuntimeUnknown)},
		{"/kubepods/pod" + testUID + "/crio-" + testID, pod(testUID, testID, Guaranteed, RuntimeCRIO)},
		{"/kubepods/burstable/pod" + testUID, pod(testUID, "", Burstable, RuntimeUnknown)},
		{"/kubepods/pod" + testHash + "/" + testID, pod(testHash, testID, Guaranteed, RuntimeUnknown)},
		// nested (k3s in a container, kind with cgroupfs)
		{"/k3s/kubepods/burstable/pod" + testUID + "/" + testID, pod(testUID, testID, Burstable, RuntimeUnknown)},
		{"/docker/" + testID + "/kubepods/pod" + testUID + "/" + testID, pod(testUID, testID, Guaranteed, RuntimeUnknown)},

		// not pods
		{"", nil},
		{"/", nil},
		{"kubepods/pod" + testUID + "/" + testID, nil}, // relative
		{"/system.slice/cron.service", nil},
		{"/kubepods", nil},
		{"/kubepods.slice", nil},
		{"/kubepods/burstable", nil},
		{"/kubepods.slice/kubepods-burstable.slice", nil},
		{"/kubepods/burstable/podnotauid/" + testID, nil},
		{"/kubepods/pod" + strings.ToUpper(testUID) + "/" + testID, nil},                     // upper case
		{"/kubepods/pod" + testUIDs + "/" + testID, nil},                                     // underscores under cgroupfs
		{"/kubepods.slice/kubepods-pod" + testUID + ".slice", nil},                           // dashes under systemd
		{"/kubepods/pod" + testUID + "/" + testID[:63], nil},                                 // short id
		{"/kubepods/pod" + testUID + "/" + testID + "0", nil},                                // long id
		{"/kubepods/pod" + testUID + "/" + strings.ToUpper(testID), nil},                     // upper-case id
		{"/kubepods/pod" + testUID + "/crio-conmon-" + testID, nil},                          // conmon
		{"/kubepods/pod" + testUID + "/" + testID + "//x", nil},                              // empty component
		{"/kubepods/guaranteed/pod" + testUID + "/" + testID, nil},                           // no such QoS directory
		{"/kubepods.slice/kubepods-pod" + testUIDs + ".slice/cri-containerd-" + testID, nil}, // no .scope
		{"/kubepods.slice/kubepods-pod" + testUIDs + ".slice/runc-" + testID + ".scope", nil},
		{"/kubepods.slice/kubepods-burstable.slice/kubepods-pod" + testUIDs + ".slice", nil}, // QoS stem missing
		{"/kubepods.slice/kubepods-burstable.slice/kubepods-besteffort-pod" + testUIDs + ".slice", nil},
		{"/kubepods.slice/other-pod" + testUIDs + ".slice", nil},
		{"/x-kubepods.slice/kubepods-pod" + testUIDs + ".slice", nil}, // stem is x-kubepods
		{"/kubepods/pod" + testUID + strings.Repeat("/a", MaxPathLen), nil},
	}
	for _, tt := range tests {
		got := ParseCgroupPath(tt.path)
		switch {
		case got == nil && tt.want == nil:
		case got == nil || tt.want == nil || *got != *tt.want:
			t.Errorf("ParseCgroupPath(%.120q) = %+v, want %+v", tt.path, got, tt.want)
		}
	}
}

func TestParseCgroupPathNoAlloc(t *testing.T) {
	path := "/system.slice/kubepods-burstable.slice/kubepods-burstable-pod" + testUIDs + ".slice/cri-containerd-" + testID + ".scope"
	if n := testing.AllocsPerRun(100, func() { ParseCgroupPath(path) }); n != 0 {
		t.Errorf("ParseCgroupPath of a non-pod path: %v allocations, want 0", n)
	}
}

func FuzzParseCgroupPath(f *testing.F) {
	f.Add("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + testUIDs + ".slice/cri-containerd-" + testID + ".scope")
	f.Add("/kubepods.slice/kubepods-pod" + testUIDs + ".slice/crio-" + testID + ".scope")
	f.Add("/kubepods/burstable/pod" + testUID + "/" + testID)
	f.Add("/kubepods/pod" + testUID + "/crio-" + testID)
	f.Add("/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-pod" + testHash + ".slice")
	f.Add("/system.slice/cron.service")
	f.Fuzz(func(t *testing.T, path string) {
		cg := ParseCgroupPath(path)
		if cg == nil {
			return
		}
		if !validUID(cg.PodUID, '-') {
			t.Fatalf("bad pod UID %q from %q", cg.PodUID, path)
		}
		if cg.ContainerID != "" && !isHex64(cg.ContainerID) {
			t.Fatalf("bad container id %q from %q", cg.ContainerID, path)
		}
		switch cg.QoS {
		case Guaranteed, Burstable, BestEffort:
		default:
			t.Fatalf("bad QoS %q from %q", cg.QoS, path)
		}
		if !strings.Contains(path, "kubepods") || !strings.Contains(path, strings.ReplaceAll(cg.PodUID, "-", "")[:8]) {
			t.Fatalf("%q parsed as %+v", path, cg)
		}
	})
}

func BenchmarkParseCgroupPath(b *testing.B) {
	for _, bc := range []struct{ name, path string }{
		{"systemd", "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + testUIDs + ".slice/cri-containerd-" + testID + ".scope"},
		{"cgroupfs", "/kubepods/burstable/pod" + testUID + "/" + testID},
		{"not_a_pod", "/system.slice/containerd.service"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ParseCgroupPath(bc.path)
			}
		})
	}
}
