// SPDX-License-Identifier: Apache-2.0

// Package kube names the Kubernetes pod and container a cgroup belongs to.
//
// The model has two steps, one local and one remote.
//
// First, ParseCgroupPath reads what the kubelet and the container runtime
// wrote into a cgroup v2 path: the pod UID, the container id, the pod's QoS
// class and the runtime. It needs nothing but the path, as the cgroup
// decoder resolves it from a cgroup id (the inode number of the cgroup's
// directory, which bpf_get_current_cgroup_id() returns). The kubelet lays
// out pods in one of two ways, after its cgroup driver:
//
//	systemd:  /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice/cri-containerd-<id>.scope
//	cgroupfs: /kubepods/burstable/pod<uid>/<id>
//
// Guaranteed pods sit directly under kubepods (kubepods-pod<uid>.slice,
// kubepods/pod<uid>); besteffort ones like burstable ones. In systemd slice
// names the dashes of the UID are underscores. The container's directory
// is named by the runtime: cri-containerd-<id>.scope (containerd),
// crio-<id>.scope or crio-<id> (CRI-O), docker-<id>.scope (Docker), or the
// bare id (containerd and Docker under the cgroupfs driver). The kubepods
// tree may itself sit under a prefix (kind and k3s nest it in another slice
// or directory). Anything else is not a pod: ParseCgroupPath returns nil.
//
// Second, a Resolver turns the pod UID and container id into the pod's
// namespace and name and the container's name. It watches the pods of one
// node through the Kubernetes API (a list and watch with the field selector
// spec.nodeName=<node>) and keeps what it learns in bounded LRU caches:
// for each pod only its UID, namespace, name and its containers' ids and
// names. Lookups read the cache only and never wait for the API: a pod it
// does not know (none yet, no API access, or evicted) is named by its UID
// and its container by its id, and a Resolver without API access says so
// once in the log.
package kube
