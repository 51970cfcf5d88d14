// SPDX-License-Identifier: Apache-2.0

package kubetest

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

const testObjects = `
apiVersion: v1
kind: Namespace
metadata:
  name: monitoring
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: programs
  namespace: monitoring
data:
  user.yaml: |
    metrics: {}
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: kernel-exporter
  namespace: monitoring
---
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: kernel-exporter
  namespace: monitoring
  labels: {app: kernel-exporter}
spec:
  selector:
    matchLabels: {app: kernel-exporter}
  template:
    metadata:
      labels: {app: kernel-exporter}
    spec:
      serviceAccountName: kernel-exporter
      hostPID: true
      containers:
        - name: exporter
          image: kernel-exporter:test
          ports: [{name: metrics, containerPort: 9435}]
          securityContext:
            privileged: false
            capabilities:
              add: [BPF, PERFMON, SYS_RESOURCE]
              drop: [ALL]
          volumeMounts:
            - {name: sys, mountPath: /sys, readOnly: true}
      volumes:
        - name: sys
          hostPath: {path: /sys, type: Directory}
---
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: kernel-exporter
  namespace: monitoring
spec:
  selector:
    matchLabels: {app: kernel-exporter}
  endpoints:
    - port: metrics
      interval: 30s
---
apiVersion: monitoring.coreos.com/v1
kind: PodMonitor
metadata:
  name: kernel-exporter
  namespace: monitoring
spec:
  selector:
    matchLabels: {app: kernel-exporter}
  podMetricsEndpoints:
    - port: metrics
`

// TestCluster starts a cluster, applies a DaemonSet with its ConfigMap and
// monitors (custom resources listed before their CRDs, which Apply puts
// first), reads every object back, then checks that a field-selector watch
// and an informer on spec.nodeName see exactly the Pods bound to that Node,
// as the pod-label decoder's watch does.
func TestCluster(t *testing.T) {
	c := Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	docs, err := SplitYAML([]byte(testObjects))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 6 {
		t.Fatalf("SplitYAML: %d documents, want 6", len(docs))
	}
	// The CRDs come last: Apply must apply them first and wait for them.
	docs = append(docs, MonitoringCRDs()...)
	if err := Apply(ctx, c.Config, docs); err != nil {
		t.Fatal(err)
	}
	// A second Apply of the same objects is an update, not an error.
	if err := Apply(ctx, c.Config, docs); err != nil {
		t.Fatalf("second Apply: %v", err)
	}

	// The admin kubeconfig works as the exporter would load it.
	kc, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(kc)

	cm, err := cs.CoreV1().ConfigMaps("monitoring").Get(ctx, "programs", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := cm.Data["user.yaml"]; got != "metrics: {}\n" {
		t.Errorf("ConfigMap data user.yaml = %q", got)
	}
	ds, err := cs.AppsV1().DaemonSets("monitoring").Get(ctx, "kernel-exporter", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ps := ds.Spec.Template.Spec
	if !ps.HostPID || ps.ServiceAccountName != "kernel-exporter" || len(ps.Containers) != 1 || len(ps.Volumes) != 1 {
		t.Fatalf("DaemonSet pod spec: %+v", ps)
	}
	caps := ps.Containers[0].SecurityContext.Capabilities
	if len(caps.Add) != 3 || caps.Add[0] != "BPF" || caps.Add[1] != "PERFMON" || caps.Add[2] != "SYS_RESOURCE" ||
		len(caps.Drop) != 1 || caps.Drop[0] != "ALL" {
		t.Errorf("capabilities = %+v", caps)
	}
	if hp := ps.Volumes[0].HostPath; hp == nil || hp.Path != "/sys" || hp.Type == nil || *hp.Type != corev1.HostPathDirectory {
		t.Errorf("volume sys = %+v", ps.Volumes[0])
	}
	if m := ps.Containers[0].VolumeMounts; len(m) != 1 || m[0].MountPath != "/sys" || !m[0].ReadOnly {
		t.Errorf("volumeMounts = %+v", m)
	}

	dyn := dynamic.NewForConfigOrDie(c.Config)
	sm, err := dyn.Resource(schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "servicemonitors"}).
		Namespace("monitoring").Get(ctx, "kernel-exporter", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(eps) != 1 || eps[0].(map[string]any)["port"] != "metrics" || eps[0].(map[string]any)["interval"] != "30s" {
		t.Errorf("ServiceMonitor spec.endpoints = %v", eps)
	}
	pm, err := dyn.Resource(schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "podmonitors"}).
		Namespace("monitoring").Get(ctx, "kernel-exporter", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if app, _, _ := unstructured.NestedString(pm.Object, "spec", "selector", "matchLabels", "app"); app != "kernel-exporter" {
		t.Errorf("PodMonitor spec.selector.matchLabels.app = %q", app)
	}

	// RBAC is enforced: the ServiceAccount may not list pods until a
	// ClusterRoleBinding grants it.
	saCfg, saKubeconfig, err := c.ServiceAccountConfig(ctx, "monitoring", "kernel-exporter")
	if err != nil {
		t.Fatal(err)
	}
	if saKubeconfig == "" {
		t.Error("ServiceAccountConfig: no kubeconfig path")
	}
	saCS := kubernetes.NewForConfigOrDie(saCfg)
	if _, err := saCS.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("ServiceAccount lists pods before any binding: err = %v, want Forbidden", err)
	}
	if err := Apply(ctx, c.Config, [][]byte{[]byte(podReaderRBAC)}); err != nil {
		t.Fatal(err)
	}

	// Pods on two nodes, no kubelet: they stay Pending, bound by
	// spec.nodeName.
	for _, n := range []string{"node-a", "node-b"} {
		if _, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	sel := fields.OneTermEqualSelector("spec.nodeName", "node-a").String()
	// The ServiceAccount's grant takes effect through the RBAC
	// authorizer's informer: wait for it.
	var w watch.Interface
	deadline := time.Now().Add(10 * time.Second)
	for {
		w, err = saCS.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{FieldSelector: sel})
		if err == nil || !apierrors.IsForbidden(err) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	mkPod := func(name, node string) {
		t.Helper()
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "monitoring"},
			Spec: corev1.PodSpec{
				NodeName:   node,
				Containers: []corev1.Container{{Name: "app", Image: "app:test"}},
			},
		}
		if _, err := cs.CoreV1().Pods("monitoring").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mkPod("on-b", "node-b")
	mkPod("on-a", "node-a")
	select {
	case ev := <-w.ResultChan():
		pod, ok := ev.Object.(*corev1.Pod)
		if ev.Type != watch.Added || !ok || pod.Name != "on-a" || pod.Spec.NodeName != "node-a" || pod.UID == "" {
			t.Fatalf("first watch event: %s %+v, want ADDED pod on-a", ev.Type, ev.Object)
		}
		if pod.Status.Phase != corev1.PodPending {
			t.Errorf("pod on-a phase %q, want Pending", pod.Status.Phase)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("watch on spec.nodeName=node-a: no event in 10 s")
	}

	// An informer (list, then watch; client-go falls back from a
	// streaming list if the server refuses it) syncs the same view.
	f := informers.NewSharedInformerFactoryWithOptions(kubernetes.NewForConfigOrDie(saCfg), 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = sel }))
	inf := f.Core().V1().Pods().Informer()
	stop := make(chan struct{})
	f.Start(stop)
	defer f.Shutdown() // after close(stop): Shutdown waits for the informers
	defer close(stop)
	syncCtx, syncCancel := context.WithTimeout(ctx, 20*time.Second)
	defer syncCancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), inf.HasSynced) {
		t.Fatal("pod informer did not sync in 20 s")
	}
	keys := inf.GetStore().ListKeys()
	if len(keys) != 1 || keys[0] != "monitoring/on-a" {
		t.Errorf("informer store = %v, want [monitoring/on-a]", keys)
	}
}

const podReaderRBAC = `
apiVersion: rbac.authorization.k8s.io/v1
kind: List
items:
  - apiVersion: rbac.authorization.k8s.io/v1
    kind: ClusterRole
    metadata: {name: pod-reader}
    rules:
      - apiGroups: [""]
        resources: [pods]
        verbs: [get, list, watch]
  - apiVersion: rbac.authorization.k8s.io/v1
    kind: ClusterRoleBinding
    metadata: {name: pod-reader}
    roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: pod-reader}
    subjects:
      - {kind: ServiceAccount, name: kernel-exporter, namespace: monitoring}
`

// TestSplitYAMLAndDecode checks document splitting and the decoding rules
// without a server.
func TestSplitYAMLAndDecode(t *testing.T) {
	docs, err := SplitYAML([]byte("---\n# only a comment\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n\n"))
	if err != nil {
		t.Fatal(err)
	}
	var objs int
	for _, d := range docs {
		o, err := decode(d)
		if err != nil {
			t.Fatal(err)
		}
		objs += len(o)
	}
	if objs != 1 {
		t.Errorf("%d objects, want 1", objs)
	}
	if _, err := decode([]byte("kind: ConfigMap\nmetadata: {name: a}\n")); err == nil {
		t.Error("object without apiVersion accepted")
	}
	if _, err := decode([]byte("apiVersion: v1\nkind: ConfigMap\n")); err == nil {
		t.Error("object without a name accepted")
	}
	o, err := decode([]byte(podReaderRBAC))
	if err != nil || len(o) != 2 || o[1].GetKind() != "ClusterRoleBinding" {
		t.Errorf("List: %d objects, err %v", len(o), err)
	}
	if len(MonitoringCRDs()) != 2 {
		t.Error("MonitoringCRDs: want 2 documents")
	}
}
