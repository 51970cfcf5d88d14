// SPDX-License-Identifier: Apache-2.0

// Package kubefake serves the pods of a client-go fake clientset to a
// kube.Resolver, for tests (kube.Options.Source). It is imported by tests
// only, so that the exporter's binary does not link the clientset.
package kubefake

import (
	"context"
	"encoding/json"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/kernel-exporter/kernel_exporter/kube"
)

// Source lists and watches the pods of cs on node (the fake clientset
// ignores the field selector: create pods of that node only). Pods go
// through their JSON form, as they come from an API server.
func Source(cs kubernetes.Interface, node string) kube.Source {
	return &source{cs: cs, node: node}
}

type source struct {
	cs   kubernetes.Interface
	node string
}

func (s *source) opts() metav1.ListOptions {
	return metav1.ListOptions{FieldSelector: "spec.nodeName=" + s.node}
}

func (s *source) List(ctx context.Context) ([]*kube.Pod, string, error) {
	l, err := s.cs.CoreV1().Pods(metav1.NamespaceAll).List(ctx, s.opts())
	if err != nil {
		return nil, "", err
	}
	pods := make([]*kube.Pod, 0, len(l.Items))
	for i := range l.Items {
		p, err := convert(&l.Items[i])
		if err != nil {
			return nil, "", err
		}
		pods = append(pods, p)
	}
	return pods, l.ResourceVersion, nil
}

func (s *source) Watch(ctx context.Context, rv string, fn func(kube.Event) error) error {
	o := s.opts()
	o.ResourceVersion = rv
	w, err := s.cs.CoreV1().Pods(metav1.NamespaceAll).Watch(ctx, o)
	if err != nil {
		return err
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e, ok := <-w.ResultChan():
			if !ok {
				return nil
			}
			pod, isPod := e.Object.(*v1.Pod)
			if !isPod {
				return fmt.Errorf("kubefake: unexpected object %T", e.Object)
			}
			p, err := convert(pod)
			if err != nil {
				return err
			}
			var typ string
			switch e.Type {
			case watch.Added:
				typ = "ADDED"
			case watch.Modified:
				typ = "MODIFIED"
			case watch.Deleted:
				typ = "DELETED"
			default:
				continue
			}
			if err := fn(kube.Event{Type: typ, Pod: p}); err != nil {
				return err
			}
		}
	}
}

func convert(pod *v1.Pod) (*kube.Pod, error) {
	data, err := json.Marshal(pod)
	if err != nil {
		return nil, err
	}
	p := &kube.Pod{}
	return p, json.Unmarshal(data, p)
}
