// SPDX-License-Identifier: Apache-2.0

package kubetest

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// FieldManager is the server-side apply field manager of Apply.
const FieldManager = "kubetest"

// establishTimeout bounds the wait for an applied CRD to be Established.
const establishTimeout = 30 * time.Second

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

//go:embed testdata/monitoring.coreos.com-crds.yaml
var monitoringCRDs []byte

// MonitoringCRDs returns minimal CustomResourceDefinitions of
// prometheus-operator's monitoring.coreos.com/v1 ServiceMonitor and
// PodMonitor (namespaced, any spec accepted: the schema preserves unknown
// fields), as YAML documents for Apply.
func MonitoringCRDs() [][]byte {
	docs, err := SplitYAML(monitoringCRDs)
	if err != nil {
		panic("kubetest: embedded CRDs: " + err.Error())
	}
	return docs
}

// SplitYAML splits a multi-document YAML stream ("---" separators) into its
// documents; empty ones are dropped.
func SplitYAML(data []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("kubetest: YAML document %d: %w", len(docs), err)
		}
		if len(bytes.TrimSpace(doc)) > 0 {
			docs = append(docs, doc)
		}
	}
}

// Apply creates or updates every object of docs (each one YAML or JSON
// object, a List of objects, or empty) by server-side apply as
// FieldManager, forcing conflicts. Namespaces and CustomResourceDefinitions
// go first, and each CRD is waited for until Established (at most 30 s), so
// custom resources may come in the same call; then the other objects, in
// order. Kinds are resolved through discovery; a namespaced object without
// a namespace goes to "default". The error names the document index, kind
// and name of the first object that failed.
func Apply(ctx context.Context, cfg *rest.Config, docs [][]byte) error {
	var objs []*unstructured.Unstructured
	var where []int // document index of each object
	for i, doc := range docs {
		o, err := decode(doc)
		if err != nil {
			return fmt.Errorf("kubetest: document %d: %w", i, err)
		}
		for _, x := range o {
			objs = append(objs, x)
			where = append(where, i)
		}
	}

	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("kubetest: discovery: %w", err)
	}
	cached := memory.NewMemCacheClient(dc)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(cached)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("kubetest: dynamic client: %w", err)
	}

	first := func(o *unstructured.Unstructured) bool {
		gk := o.GroupVersionKind().GroupKind()
		return gk == schema.GroupKind{Kind: "Namespace"} ||
			gk == schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}
	}
	for pass := range 2 {
		crds := false
		for i, o := range objs {
			if first(o) != (pass == 0) {
				continue
			}
			if err := applyOne(ctx, dyn, mapper, o); err != nil {
				return fmt.Errorf("kubetest: document %d: %s %q: %w", where[i], o.GetKind(), o.GetName(), err)
			}
			if o.GetKind() == "CustomResourceDefinition" {
				crds = true
				if err := waitEstablished(ctx, dyn, o.GetName()); err != nil {
					return fmt.Errorf("kubetest: document %d: CustomResourceDefinition %q: %w", where[i], o.GetName(), err)
				}
			}
		}
		if crds {
			// New kinds: forget what discovery said before them.
			mapper.Reset()
		}
	}
	return nil
}

// decode parses one YAML or JSON document into its objects: none for an
// empty document, the items of a List.
func decode(doc []byte) ([]*unstructured.Unstructured, error) {
	var m map[string]any
	if err := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(doc), 4096).Decode(&m); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, err
	}
	if len(m) == 0 {
		return nil, nil
	}
	o := &unstructured.Unstructured{Object: m}
	if o.GetKind() == "" || o.GetAPIVersion() == "" {
		return nil, fmt.Errorf("object without apiVersion or kind")
	}
	if !o.IsList() {
		if o.GetName() == "" {
			return nil, fmt.Errorf("%s without metadata.name", o.GetKind())
		}
		return []*unstructured.Unstructured{o}, nil
	}
	list, err := o.ToList()
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	return out, nil
}

// applyOne server-side applies o, retrying a kind discovery does not know
// yet once after a discovery reset.
func applyOne(ctx context.Context, dyn dynamic.Interface, mapper *restmapper.DeferredDiscoveryRESTMapper, o *unstructured.Unstructured) error {
	gvk := o.GroupVersionKind()
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		mapper.Reset()
		mapping, err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return err
	}
	var ri dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		ns := o.GetNamespace()
		if ns == "" {
			ns = metav1.NamespaceDefault
			o.SetNamespace(ns)
		}
		ri = dyn.Resource(mapping.Resource).Namespace(ns)
	} else if o.GetNamespace() != "" {
		return fmt.Errorf("cluster-scoped object with metadata.namespace %q", o.GetNamespace())
	}
	data, err := json.Marshal(o.Object)
	if err != nil {
		return err
	}
	force := true
	_, err = ri.Patch(ctx, o.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: FieldManager, Force: &force})
	return err
}

// waitEstablished polls the CRD name until its Established condition is
// True.
func waitEstablished(ctx context.Context, dyn dynamic.Interface, name string) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, establishTimeout, true, func(ctx context.Context) (bool, error) {
		u, err := dyn.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Established" {
				last = fmt.Sprintf("Established=%v: %v", m["status"], m["message"])
				if m["status"] == "True" {
					return true, nil
				}
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("not Established after %v (%s): %w", establishTimeout, last, err)
	}
	return nil
}

// requestToken asks the TokenRequest API for an hour's token of the
// ServiceAccount namespace/name.
func requestToken(ctx context.Context, cfg *rest.Config, namespace, name string) (string, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	secs := int64(3600)
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs}},
		metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("kubetest: token for ServiceAccount %s/%s: %w", namespace, name, err)
	}
	return tr.Status.Token, nil
}
