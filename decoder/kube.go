// SPDX-License-Identifier: Apache-2.0

package decoder

import (
	"bytes"
	"fmt"

	"github.com/kernel-exporter/kernel_exporter/config"
	"github.com/kernel-exporter/kernel_exporter/kube"
)

func init() {
	register("kube_namespace", newKube(kubeNamespace))
	register("kube_pod", newKube(kubePod))
	register("kube_container", newKube(kubeContainer))
}

// kubeField is what a kube decoder prints.
type kubeField int

const (
	kubeNamespace kubeField = iota
	kubePod
	kubeContainer
)

var kubeNames = [...]string{kubeNamespace: "kube_namespace", kubePod: "kube_pod", kubeContainer: "kube_container"}

// kubeDecoder turns a cgroup into the namespace (kube_namespace), name
// (kube_pod) or container name (kube_container) of the Kubernetes pod it
// belongs to. Its input is a cgroup v2 id as the cgroup decoder reads it
// (the raw 8-byte field, or the decimal text of an earlier uint decoder),
// or what an earlier cgroup decoder printed: a cgroup path, or
// "unknown_cgroup_id:<id>". The path is parsed
// by kube.ParseCgroupPath and the names come from the Env's pod resolver
// (one watch of this node's pods for all configs; see Env.Kube). A cgroup
// that is not a pod's prints "" (the key is kept); a pod the resolver does
// not know prints "" as its namespace, its UID as its name and the
// container id as the container's name, and so does every pod without API
// access. Three labels of one field are made with config.Label.Of.
type kubeDecoder struct {
	field kubeField
	size  int
	cg    *cgroupResolver // nil when the Env has no cgroup2 mount
	cgErr error
	pods  *kube.Resolver
}

func newKube(field kubeField) constructor {
	return func(e *Env, _ config.Decoder, size int, _ StackMaps) (Decoder, error) {
		name := kubeNames[field]
		if size != textInput {
			if err := checkSize(name, size, 8); err != nil {
				return nil, err
			}
		}
		d := &kubeDecoder{field: field, size: size}
		d.cg, d.cgErr = e.cgroupResolver()
		if size != textInput && d.cgErr != nil {
			return nil, fmt.Errorf("%s: %w", name, d.cgErr)
		}
		pods, err := e.kubeResolver()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		d.pods = pods
		return d, nil
	}
}

func (d *kubeDecoder) Name() string { return kubeNames[d.field] }

// Decode fails on a raw field of the wrong width, and on text that is
// neither a path nor a decimal number.
func (d *kubeDecoder) Decode(in []byte) ([]byte, error) {
	out, _, err := d.decodeSettled(in)
	return out, err
}

// decodeSettled is Decode, and says whether the value is settled (see
// Chain.DecodeSettled): not when the cgroup id is not known yet (a walk of
// the hierarchy may find it), nor when the pod, or its container, is not
// known yet to a resolver that watches the API server.
func (d *kubeDecoder) decodeSettled(in []byte) ([]byte, bool, error) {
	var path []byte
	if d.size == textInput && len(in) > 0 && in[0] == '/' {
		path = in
	} else {
		if d.size == textInput {
			// An unknown id, as the cgroup decoder prints it.
			in = bytes.TrimPrefix(in, []byte(unknownCgroupPrefix))
		}
		id, err := readInput(d.Name(), in, d.size)
		if err != nil {
			return nil, true, err
		}
		if d.cg == nil {
			return nil, true, fmt.Errorf("%s: %w", d.Name(), d.cgErr)
		}
		var ok bool
		if path, ok = d.cg.lookup(id); !ok {
			return []byte{}, false, nil // unknown cgroup: not a pod we can name yet
		}
	}
	cg := kube.ParseCgroupPath(string(path))
	if cg == nil {
		return []byte{}, true, nil
	}
	n := d.pods.Lookup(cg.PodUID, cg.ContainerID)
	settled := n.Complete || !d.pods.Watching()
	switch d.field {
	case kubeNamespace:
		return []byte(n.Namespace), settled, nil
	case kubePod:
		return []byte(n.Pod), settled, nil
	}
	return []byte(n.Container), settled, nil
}
