// SPDX-License-Identifier: Apache-2.0

// Package kubefake serves the pods of a client-go fake clientset to a
// kube.Resolver, for tests (kube.Options.ListWatch). It is imported by
// tests only, so that the exporter's binary does not link the clientset.
package kubefake

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// ListWatch lists and watches the pods of cs on node (the fake clientset
// ignores the field selector: create pods of that node only). It streams
// no initial list (WatchList), so the reflector lists instead.
func ListWatch(cs kubernetes.Interface, node string) cache.ListerWatcher {
	sel := fields.OneTermEqualSelector("spec.nodeName", node).String()
	pods := cs.CoreV1().Pods(metav1.NamespaceAll)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return pods.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return pods.Watch(ctx, o)
		},
	}
	return cache.ToListWatcherWithWatchListSemantics(lw, cs)
}
