// SPDX-License-Identifier: Apache-2.0

package kube

import "strings"

// QoS is a pod's quality-of-service class, as its cgroup path shows it
// (the kubelet's names: the pod's status.qosClass in lowercase).
type QoS string

// QoS classes.
const (
	Guaranteed QoS = "guaranteed"
	Burstable  QoS = "burstable"
	BestEffort QoS = "besteffort"
)

// Runtime is the container runtime that named a container's cgroup, as
// the scheme of status.containerStatuses[].containerID spells it.
type Runtime string

// Runtimes. RuntimeUnknown is a bare container id (the cgroupfs driver
// with containerd or Docker): the path does not say which.
const (
	RuntimeUnknown    Runtime = ""
	RuntimeContainerd Runtime = "containerd"
	RuntimeCRIO       Runtime = "cri-o"
	RuntimeDocker     Runtime = "docker"
)

// Cgroup is what a kubepods cgroup path says about the pod it belongs to.
type Cgroup struct {
	// PodUID is the pod's UID with dashes: 36 characters
	// (8-4-4-4-12 lowercase hex), or 32 lowercase hex digits for a static
	// pod (the kubelet's hash of its manifest, which the mirror pod
	// carries in its kubernetes.io/config.mirror annotation).
	PodUID string
	// ContainerID is 64 lowercase hex digits, or "" for the pod's own
	// cgroup (a task outside any container of the pod).
	ContainerID string
	QoS         QoS
	Runtime     Runtime
}

// MaxPathLen bounds the paths ParseCgroupPath reads (PATH_MAX); longer
// ones are not pods.
const MaxPathLen = 4096

// ParseCgroupPath parses a cgroup v2 path relative to the hierarchy's root
// ("/kubepods.slice/...", as /proc/<pid>/cgroup and the cgroup decoder
// show it) and returns the pod and container it belongs to, or nil when it
// is not a pod's cgroup. See the package documentation for the layouts.
// A path below a container's cgroup (a container that makes cgroups of its
// own) belongs to that container. It does not allocate for paths that are
// not pods.
func ParseCgroupPath(path string) *Cgroup {
	if len(path) == 0 || len(path) > MaxPathLen || path[0] != '/' {
		return nil
	}
	rest := path[1:]
	for rest != "" {
		var c string
		c, rest, _ = strings.Cut(rest, "/")
		switch {
		case c == "kubepods":
			return parseCgroupfs(rest)
		case c == "kubepods.slice" || strings.HasSuffix(c, "-kubepods.slice"):
			return parseSystemd(strings.TrimSuffix(c, ".slice"), rest)
		}
	}
	return nil
}

// parseCgroupfs parses what follows a cgroupfs driver's kubepods directory:
// [burstable|besteffort/]pod<uid>[/<container>[/...]].
func parseCgroupfs(rest string) *Cgroup {
	c, rest, _ := strings.Cut(rest, "/")
	qos := Guaranteed
	if c == string(Burstable) || c == string(BestEffort) {
		qos = QoS(c)
		c, rest, _ = strings.Cut(rest, "/")
	}
	uid, ok := strings.CutPrefix(c, "pod")
	if !ok || !validUID(uid, '-') {
		return nil
	}
	cg := &Cgroup{PodUID: uid, QoS: qos}
	if rest == "" {
		return cg
	}
	c, rest, _ = strings.Cut(rest, "/")
	if !validSubpath(rest) {
		return nil
	}
	switch {
	case isHex64(c):
		cg.ContainerID = c
	case strings.HasPrefix(c, "crio-") && isHex64(c[len("crio-"):]):
		cg.ContainerID, cg.Runtime = c[len("crio-"):], RuntimeCRIO
	default:
		return nil
	}
	return cg
}

// systemdScopes are the prefixes of container scopes under the systemd
// driver, by runtime.
var systemdScopes = []struct {
	prefix  string
	runtime Runtime
}{
	{"cri-containerd-", RuntimeContainerd},
	{"crio-", RuntimeCRIO},
	{"docker-", RuntimeDocker},
}

// parseSystemd parses what follows a systemd driver's kubepods slice,
// whose name without .slice is stem ("kubepods", or "kubelet-kubepods"
// when nested): [<stem>-burstable.slice/]<stem>[-burstable]-pod<uid>.slice
// [/<runtime>-<id>.scope[/...]]. The UID's dashes are underscores.
func parseSystemd(stem, rest string) *Cgroup {
	c, rest, _ := strings.Cut(rest, "/")
	qos := Guaranteed
	if tail, ok := strings.CutPrefix(c, stem+"-"); ok && (tail == "burstable.slice" || tail == "besteffort.slice") {
		qos = QoS(strings.TrimSuffix(tail, ".slice"))
		stem += "-" + string(qos)
		c, rest, _ = strings.Cut(rest, "/")
	}
	tail, ok := strings.CutPrefix(c, stem+"-pod")
	if !ok {
		return nil
	}
	uid, ok := strings.CutSuffix(tail, ".slice")
	if !ok || !validUID(uid, '_') {
		return nil
	}
	cg := &Cgroup{PodUID: strings.ReplaceAll(uid, "_", "-"), QoS: qos}
	if rest == "" {
		return cg
	}
	c, rest, _ = strings.Cut(rest, "/")
	if !validSubpath(rest) {
		return nil
	}
	scope, ok := strings.CutSuffix(c, ".scope")
	if !ok {
		return nil
	}
	for _, s := range systemdScopes {
		if id, ok := strings.CutPrefix(scope, s.prefix); ok && isHex64(id) {
			cg.ContainerID, cg.Runtime = id, s.runtime
			return cg
		}
	}
	return nil
}

// validUID says whether s is a pod UID whose dashes are written sep: a
// UUID (8-4-4-4-12 lowercase hex digits) or a static pod's 32 hex digits.
func validUID(s string, sep byte) bool {
	switch len(s) {
	case 32:
		return isHex(s)
	case 36:
		for i := 0; i < len(s); i++ {
			if i == 8 || i == 13 || i == 18 || i == 23 {
				if s[i] != sep {
					return false
				}
			} else if !isHexDigit(s[i]) {
				return false
			}
		}
		return true
	}
	return false
}

// validSubpath says whether the path below a container's cgroup is empty
// or made of non-empty components (no "//", no trailing "/").
func validSubpath(s string) bool {
	if s == "" {
		return true
	}
	return s[0] != '/' && s[len(s)-1] != '/' && !strings.Contains(s, "//")
}

func isHex64(s string) bool { return len(s) == 64 && isHex(s) }

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isHexDigit(s[i]) {
			return false
		}
	}
	return true
}

func isHexDigit(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' }
