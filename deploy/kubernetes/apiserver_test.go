// SPDX-License-Identifier: Apache-2.0

package kubernetes

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/kernel-exporter/kernel_exporter/internal/kubetest"
	"github.com/kernel-exporter/kernel_exporter/kube"
)

// userObjects are the objects the value sets reference but leave to the
// user (see valueSets), in namespace ns.
func userObjects(ns string) [][]byte {
	return [][]byte{
		fmt.Appendf(nil, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: my-programs, namespace: %s}\ndata: {a.yaml: \"metrics: {}\\n\"}\n", ns),
		fmt.Appendf(nil, "apiVersion: v1\nkind: Secret\nmetadata: {name: my-web, namespace: %s}\nstringData: {web.yml: \"{}\\n\"}\n", ns),
		fmt.Appendf(nil, "apiVersion: v1\nkind: Secret\nmetadata: {name: scrape-auth, namespace: %s}\nstringData: {username: prometheus, password: secret}\n", ns),
		fmt.Appendf(nil, "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: node-agents, namespace: %s}\n", ns),
	}
}

// TestChartAppliesToAPIServer applies the chart, rendered with every value
// set of ValueSets (each in a namespace of its own), to a real
// kube-apiserver over etcd (internal/kubetest), which validates every
// object as a cluster would and applies its defaults. It reads each object
// back and checks that the server kept what the chart means: the
// DaemonSet's five capabilities, not privileged, read-only hostPaths,
// hostPID; the monitors under the prometheus-operator CRDs. Then, as the
// chart's ServiceAccount (a token from the TokenRequest API), it checks
// the RBAC the pod-label decoder needs: with the chart's ClusterRole it may
// list and watch the pods of one node in every namespace, and with
// rbac.create=false it may not.
func TestChartAppliesToAPIServer(t *testing.T) {
	c := kubetest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sets, err := ValueSets()
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	crds, err := kubetest.SplitYAML(MonitoringCRDs())
	if err != nil {
		t.Fatal(err)
	}
	if err := kubetest.Apply(ctx, c.Config, crds); err != nil {
		t.Fatalf("CRDs: %v", err)
	}
	for _, vs := range sets {
		ns := "ke-" + vs.Name
		release := "kernel-exporter-" + vs.Name // ClusterRoles are cluster-wide
		objs, err := RenderRelease(release, ns, vs.Values)
		if err != nil {
			t.Fatalf("%s: render: %v", vs.Name, err)
		}
		docs := append([][]byte{fmt.Appendf(nil, "apiVersion: v1\nkind: Namespace\nmetadata: {name: %s}\n", ns)}, userObjects(ns)...)
		for _, o := range objs {
			docs = append(docs, o.YAML)
		}
		if err := kubetest.Apply(ctx, c.Config, docs); err != nil {
			t.Fatalf("%s: apply: %v", vs.Name, err)
		}
		for _, o := range objs {
			gvk := schema.FromAPIVersionAndKind(o.APIVersion, o.Kind)
			res := schema.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: resourceOf(o.Kind)}
			var ri dynamic.ResourceInterface = dyn.Resource(res)
			if o.Namespace != "" {
				ri = dyn.Resource(res).Namespace(o.Namespace)
			}
			if _, err := ri.Get(ctx, o.Name, metav1.GetOptions{}); err != nil {
				t.Errorf("%s: %s %s/%s not on the server: %v", vs.Name, o.Kind, o.Namespace, o.Name, err)
			}
		}
		checkServerDaemonSet(ctx, t, cs, vs.Name, ns)
		if vs.Name == "monitors" {
			for _, r := range []string{"servicemonitors", "podmonitors", "prometheusrules"} {
				l, err := dyn.Resource(schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: r}).Namespace(ns).List(ctx, metav1.ListOptions{})
				if err != nil || len(l.Items) != 1 {
					t.Errorf("monitors: %s: %v, %v", r, l, err)
				}
			}
		}
	}

	// RBAC as the pod-label decoder uses it: list and watch pods with a
	// spec.nodeName field selector, cluster-wide.
	for _, tc := range []struct {
		set, sa string
		allowed bool
	}{
		{"defaults", "kernel-exporter-defaults", true},
		{"rbac-off", "node-agents", false},
	} {
		cfg, _, err := c.ServiceAccountConfig(ctx, "ke-"+tc.set, tc.sa)
		if err != nil {
			t.Fatalf("%s: token for %s: %v", tc.set, tc.sa, err)
		}
		sacs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		sel := metav1.ListOptions{FieldSelector: "spec.nodeName=node-a"}
		_, lerr := sacs.CoreV1().Pods("").List(ctx, sel)
		w, werr := sacs.CoreV1().Pods("").Watch(ctx, sel)
		if w != nil {
			w.Stop()
		}
		switch {
		case tc.allowed && (lerr != nil || werr != nil):
			t.Errorf("%s: service account %s may not list/watch pods: %v / %v", tc.set, tc.sa, lerr, werr)
		case !tc.allowed && !apierrors.IsForbidden(lerr):
			t.Errorf("%s: service account %s listed pods (err %v), want Forbidden with rbac.create=false", tc.set, tc.sa, lerr)
		}
		if _, err := sacs.CoreV1().Secrets("ke-"+tc.set).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("%s: service account %s may list secrets (err %v): the ClusterRole grants more than pods", tc.set, tc.sa, err)
		}
	}
	checkHelmTestRBAC(ctx, t, c, cs)
}

// checkHelmTestRBAC runs what helm test's pod runs (kube.CheckDaemonSet,
// the code of kernel_exporter kube-ready) as the test's service account,
// from a kubeconfig with its token, against the defaults' DaemonSet given
// the status of two nodes (set as the DaemonSet controller and kubelets
// would): one pod ready and one not, then both. The test's Role must let
// it read them, and nothing else (no Secrets, no other DaemonSet).
func checkHelmTestRBAC(ctx context.Context, t *testing.T, c *kubetest.Cluster, cs kubernetes.Interface) {
	t.Helper()
	const ns, name = "ke-defaults", "kernel-exporter-defaults"
	ds, err := cs.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	setStatus := func(ready int32) {
		t.Helper()
		ds.Status = appsv1.DaemonSetStatus{ObservedGeneration: ds.Generation, DesiredNumberScheduled: 2, CurrentNumberScheduled: 2, UpdatedNumberScheduled: 2, NumberReady: ready, NumberAvailable: ready}
		if ds, err = cs.AppsV1().DaemonSets(ns).UpdateStatus(ctx, ds, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	podReady := func(node string, ready corev1.ConditionStatus) {
		t.Helper()
		pname := name + "-" + node
		p, err := cs.CoreV1().Pods(ns).Get(ctx, pname, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			own := metav1.NewControllerRef(ds, appsv1.SchemeGroupVersion.WithKind("DaemonSet"))
			p = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: pname, Namespace: ns, Labels: ds.Spec.Selector.MatchLabels, OwnerReferences: []metav1.OwnerReference{*own}},
				Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: ds.Spec.Template.Spec.ServiceAccountName, Containers: []corev1.Container{{Name: "kernel-exporter", Image: "kernel_exporter:test"}}}}
			p, err = cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: ready, Reason: "ContainersNotReady", LastTransitionTime: metav1.Now()}}
		if ready == corev1.ConditionTrue {
			p.Status.Conditions[0].Reason = ""
		}
		if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	_, kubeconfig, err := c.ServiceAccountConfig(ctx, ns, name+"-test")
	if err != nil {
		t.Fatalf("token of helm test's service account: %v", err)
	}
	cfg, err := kube.RESTConfig(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	setStatus(1)
	podReady("node-a", corev1.ConditionTrue)
	podReady("node-b", corev1.ConditionFalse)
	r, err := kube.CheckDaemonSet(ctx, cfg, ns, name)
	if err != nil {
		t.Fatalf("helm test's check as its service account: %v", err)
	}
	if r.Done() || len(r.NotReady) != 1 || !strings.HasPrefix(r.NotReady[0], name+"-node-b on node-b: not ready: ContainersNotReady") {
		t.Errorf("one node not ready: done %v, %s", r.Done(), r)
	}
	setStatus(2)
	podReady("node-b", corev1.ConditionTrue)
	if r, err = kube.CheckDaemonSet(ctx, cfg, ns, name); err != nil || !r.Done() || !slices.Equal(r.ReadyNodes, []string{"node-a", "node-b"}) {
		t.Errorf("both nodes ready: %v, %v, nodes %v; want done on node-a and node-b", r, err, r.ReadyNodes)
	}
	t.Logf("helm test's check as %s-test: %s %v", name, r, r.ReadyNodes)
	if _, err := kube.CheckDaemonSet(ctx, cfg, "ke-monitors", "kernel-exporter-monitors"); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("helm test's service account read another namespace's DaemonSet (err %v), want 403", err)
	}
	sacfg, _, err := c.ServiceAccountConfig(ctx, ns, name+"-test")
	if err != nil {
		t.Fatal(err)
	}
	sacs, err := kubernetes.NewForConfig(sacfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sacs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("helm test's service account may list secrets (err %v)", err)
	}
}

// checkServerDaemonSet reads the value set's DaemonSet back from the API
// server and checks the security-relevant fields survived validation and
// defaulting.
func checkServerDaemonSet(ctx context.Context, t *testing.T, cs kubernetes.Interface, set, ns string) {
	t.Helper()
	l, err := cs.AppsV1().DaemonSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(l.Items) != 1 {
		t.Errorf("%s: daemonsets: %d, %v", set, len(l.Items), err)
		return
	}
	ds := l.Items[0]
	spec := ds.Spec.Template.Spec
	if !spec.HostPID {
		t.Errorf("%s: hostPID off on the server", set)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%s: %d containers", set, len(spec.Containers))
	}
	sc := spec.Containers[0].SecurityContext
	if sc == nil || sc.Capabilities == nil {
		t.Fatalf("%s: no securityContext.capabilities on the server", set)
	}
	var add []string
	for _, c := range sc.Capabilities.Add {
		add = append(add, string(c))
	}
	slices.Sort(add)
	if want := []string{"BPF", "DAC_READ_SEARCH", "PERFMON", "SYSLOG", "SYS_ADMIN", "SYS_RESOURCE"}; !slices.Equal(add, want) {
		t.Errorf("%s: capabilities.add = %v, want %v", set, add, want)
	}
	if len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
		t.Errorf("%s: capabilities.drop = %v, want [ALL]", set, sc.Capabilities.Drop)
	}
	if sc.Privileged != nil && *sc.Privileged {
		t.Errorf("%s: privileged on the server", set)
	}
	hostPaths := 0
	for _, v := range spec.Volumes {
		if v.HostPath == nil {
			continue
		}
		hostPaths++
		for _, m := range spec.Containers[0].VolumeMounts {
			if m.Name == v.Name && !m.ReadOnly {
				t.Errorf("%s: hostPath %s mounted read-write at %s", set, v.HostPath.Path, m.MountPath)
			}
		}
	}
	if hostPaths < 2 {
		t.Errorf("%s: %d hostPath volumes on the server, want the tracefs and cgroup mounts at least", set, hostPaths)
	}
	scheme := corev1.URISchemeHTTP
	if set == "web-config" {
		scheme = corev1.URISchemeHTTPS
	}
	if set == "loopback-probes" {
		checkLoopbackProbes(t, spec.Containers[0])
	} else {
		checkProbe(t, set+": liveness", spec.Containers[0].LivenessProbe, "/-/healthy", scheme)
		checkProbe(t, set+": readiness", spec.Containers[0].ReadinessProbe, "/-/ready", scheme)
	}
	if ds.Spec.UpdateStrategy.Type != appsv1.RollingUpdateDaemonSetStrategyType {
		t.Errorf("%s: update strategy %q", set, ds.Spec.UpdateStrategy.Type)
	}
}

// resourceOf is the API resource of the kinds the chart renders.
func resourceOf(kind string) string {
	switch kind {
	case "ServiceMonitor":
		return "servicemonitors"
	case "PodMonitor":
		return "podmonitors"
	case "NetworkPolicy":
		return "networkpolicies"
	}
	r := []byte(kind)
	for i, b := range r {
		if b >= 'A' && b <= 'Z' {
			r[i] = b + 'a' - 'A'
		}
	}
	return string(r) + "s"
}
