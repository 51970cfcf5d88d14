// SPDX-License-Identifier: Apache-2.0

package kubernetes

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"os"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/kernel-exporter/kernel_exporter/allowlist"
	"github.com/kernel-exporter/kernel_exporter/programs"
)

var update = flag.Bool("update", false, "rewrite daemonset.yaml from the default render")

// rendered is one value set's objects, decoded.
type rendered struct {
	objs  []Object
	typed map[string]any // "<Kind>/<name>" -> decoded object
}

// render renders values and decodes every object strictly.
func render(t *testing.T, values map[string]any) rendered {
	t.Helper()
	objs, err := Render(values)
	if err != nil {
		t.Fatal(err)
	}
	r := rendered{objs: objs, typed: map[string]any{}}
	for _, o := range objs {
		v, err := Decode(o)
		if err != nil {
			t.Fatal(err)
		}
		key := o.Kind + "/" + o.Name
		if _, dup := r.typed[key]; dup {
			t.Fatalf("%s rendered twice", key)
		}
		r.typed[key] = v
	}
	return r
}

// renderSet renders the value set of ValueSets named name.
func renderSet(t *testing.T, name string) rendered {
	t.Helper()
	sets, err := ValueSets()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sets {
		if s.Name == name {
			return render(t, s.Values)
		}
	}
	t.Fatalf("no value set %s", name)
	return rendered{}
}

func (r rendered) kinds() []string {
	var ks []string
	for _, o := range r.objs {
		ks = append(ks, o.Kind)
	}
	return ks
}

func get[T any](t *testing.T, r rendered, kind, name string) *T {
	t.Helper()
	v, ok := r.typed[kind+"/"+name]
	if !ok {
		t.Fatalf("no %s %s among %v", kind, name, r.kinds())
	}
	p, ok := v.(*T)
	if !ok {
		t.Fatalf("%s %s decoded as %T", kind, name, v)
	}
	return p
}

const fullname = "kernel-exporter"

func daemonSet(t *testing.T, r rendered) (*appsv1.DaemonSet, corev1.Container) {
	t.Helper()
	ds := get[appsv1.DaemonSet](t, r, "DaemonSet", fullname)
	if n := len(ds.Spec.Template.Spec.Containers); n != 1 {
		t.Fatalf("%d containers, want 1", n)
	}
	return ds, ds.Spec.Template.Spec.Containers[0]
}

// parseValues reads a values document as `helm install -f` would.
func parseValues(t *testing.T, doc string) map[string]any {
	t.Helper()
	var v map[string]any
	if err := yaml.Unmarshal([]byte(doc), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestDefaults(t *testing.T) {
	r := renderSet(t, "defaults")
	if got, want := r.kinds(), append([]string{"ServiceAccount", "ConfigMap", "ClusterRole", "ClusterRoleBinding", "Service", "DaemonSet"}, testKinds...); !slices.Equal(got, want) {
		t.Fatalf("kinds %v, want %v (Helm's install order, then helm test's)", got, want)
	}
	for _, o := range r.objs {
		ns := DefaultNamespace
		if o.Kind == "ClusterRole" || o.Kind == "ClusterRoleBinding" {
			ns = ""
		}
		if o.Namespace != ns {
			t.Errorf("%s %s: namespace %q, want %q", o.Kind, o.Name, o.Namespace, ns)
		}
	}

	ds, c := daemonSet(t, r)
	pod := ds.Spec.Template.Spec
	if !pod.HostPID || !pod.HostNetwork || pod.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
		t.Errorf("hostPID %v, hostNetwork %v, dnsPolicy %q; want true, true, ClusterFirstWithHostNet", pod.HostPID, pod.HostNetwork, pod.DNSPolicy)
	}
	if pod.PriorityClassName != "" {
		t.Errorf("priorityClassName %q, want none (system-node-critical is quota'd to kube-system on some clusters)", pod.PriorityClassName)
	}
	if pod.ServiceAccountName != fullname {
		t.Errorf("serviceAccountName %q", pod.ServiceAccountName)
	}
	if len(pod.Tolerations) != 1 || pod.Tolerations[0] != (corev1.Toleration{Operator: corev1.TolerationOpExists}) {
		t.Errorf("tolerations %+v, want one that tolerates every taint", pod.Tolerations)
	}
	if pod.NodeSelector["kubernetes.io/os"] != "linux" {
		t.Errorf("nodeSelector %v", pod.NodeSelector)
	}
	if c.Image != "kernel_exporter:0.1.0" || c.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("image %q, pull policy %q", c.Image, c.ImagePullPolicy)
	}
	wantArgs := []string{
		"--web.listen-address=:19435",
		"--programs=" + strings.Join(programs.Default, ","),
		"--config.dir=/etc/kernel_exporter/configs",
	}
	if !slices.Equal(c.Args, wantArgs) {
		t.Errorf("args %q, want %q", c.Args, wantArgs)
	}
	if len(c.Ports) != 1 || c.Ports[0].Name != "metrics" || c.Ports[0].ContainerPort != 19435 || c.Ports[0].HostPort != 19435 || c.Ports[0].Protocol != corev1.ProtocolTCP {
		t.Errorf("ports %+v, want metrics 19435/TCP on the host too", c.Ports)
	}
	if len(c.Env) != 1 || c.Env[0].Name != "NODE_NAME" || c.Env[0].ValueFrom == nil || c.Env[0].ValueFrom.FieldRef == nil || c.Env[0].ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
		t.Errorf("env %+v, want NODE_NAME from spec.nodeName", c.Env)
	}
	checkProbe(t, "liveness", c.LivenessProbe, "/-/healthy", corev1.URISchemeHTTP)
	checkProbe(t, "readiness", c.ReadinessProbe, "/-/ready", corev1.URISchemeHTTP)
	if len(c.Resources.Limits)+len(c.Resources.Requests) != 0 {
		t.Errorf("resources %+v, want none by default", c.Resources)
	}
	checkSecurity(t, pod, c)
	checkMounts(t, pod, c, map[string]string{
		"btf":      "/sys/kernel/btf",
		"tracing":  "/sys/kernel/tracing",
		"cgroup":   "/sys/fs/cgroup",
		"programs": "/etc/kernel_exporter/configs",
	})
	if got := ds.Spec.Selector.MatchLabels; len(got) != 2 || got["app.kubernetes.io/name"] != "kernel-exporter" || got["app.kubernetes.io/instance"] != DefaultRelease {
		t.Errorf("selector %v", got)
	}
	for k, v := range ds.Spec.Selector.MatchLabels {
		if ds.Spec.Template.Labels[k] != v {
			t.Errorf("pod label %s=%q, selector wants %q", k, ds.Spec.Template.Labels[k], v)
		}
	}

	cm := get[corev1.ConfigMap](t, r, "ConfigMap", fullname+"-programs")
	if len(cm.Data)+len(cm.BinaryData) != 0 {
		t.Errorf("default ConfigMap holds %d entries, want none", len(cm.Data)+len(cm.BinaryData))
	}
	if pod.Volumes[3].ConfigMap == nil || pod.Volumes[3].ConfigMap.Name != cm.Name {
		t.Errorf("programs volume %+v, want ConfigMap %s", pod.Volumes[3], cm.Name)
	}

	svc := get[corev1.Service](t, r, "Service", fullname)
	if svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("Service clusterIP %q, want None (headless)", svc.Spec.ClusterIP)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "metrics" || svc.Spec.Ports[0].Port != 19435 || svc.Spec.Ports[0].TargetPort.String() != "metrics" {
		t.Errorf("Service ports %+v", svc.Spec.Ports)
	}
	if !mapsEqual(svc.Spec.Selector, ds.Spec.Selector.MatchLabels) {
		t.Errorf("Service selector %v, DaemonSet's %v", svc.Spec.Selector, ds.Spec.Selector.MatchLabels)
	}

	role := get[rbacv1.ClusterRole](t, r, "ClusterRole", fullname)
	if len(role.Rules) != 1 || !slices.Equal(role.Rules[0].APIGroups, []string{""}) || !slices.Equal(role.Rules[0].Resources, []string{"pods"}) || !slices.Equal(role.Rules[0].Verbs, []string{"get", "list", "watch"}) {
		t.Errorf("ClusterRole rules %+v, want get, list, watch on pods only", role.Rules)
	}
	bind := get[rbacv1.ClusterRoleBinding](t, r, "ClusterRoleBinding", fullname)
	if bind.RoleRef != (rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: fullname}) {
		t.Errorf("roleRef %+v", bind.RoleRef)
	}
	if len(bind.Subjects) != 1 || bind.Subjects[0] != (rbacv1.Subject{Kind: "ServiceAccount", Name: fullname, Namespace: DefaultNamespace}) {
		t.Errorf("subjects %+v", bind.Subjects)
	}
	get[corev1.ServiceAccount](t, r, "ServiceAccount", fullname)
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func checkProbe(t *testing.T, what string, p *corev1.Probe, path string, scheme corev1.URIScheme) {
	t.Helper()
	if p == nil || p.HTTPGet == nil {
		t.Errorf("%s probe %+v, want an HTTP GET", what, p)
		return
	}
	if p.HTTPGet.Path != path || p.HTTPGet.Port.String() != "metrics" || p.HTTPGet.Scheme != scheme {
		t.Errorf("%s probe GET %s %s on port %s, want %s %s on metrics", what, p.HTTPGet.Scheme, p.HTTPGet.Path, p.HTTPGet.Port.String(), scheme, path)
	}
	if p.PeriodSeconds < 1 || p.TimeoutSeconds < 1 || p.FailureThreshold < 1 {
		t.Errorf("%s probe period %d s, timeout %d s, threshold %d", what, p.PeriodSeconds, p.TimeoutSeconds, p.FailureThreshold)
	}
}

// checkSecurity asserts the named capabilities and that nothing is
// privileged.
func checkSecurity(t *testing.T, pod corev1.PodSpec, c corev1.Container) {
	t.Helper()
	sc := c.SecurityContext
	if sc == nil || sc.Capabilities == nil {
		t.Fatalf("container securityContext %+v, want capabilities", sc)
	}
	if sc.Privileged != nil && *sc.Privileged {
		t.Error("privileged: true")
	}
	if got := sc.Capabilities.Drop; !slices.Equal(got, []corev1.Capability{"ALL"}) {
		t.Errorf("capabilities.drop %v, want [ALL]", got)
	}
	want := []corev1.Capability{"BPF", "PERFMON", "SYS_ADMIN", "SYSLOG", "DAC_READ_SEARCH", "SYS_RESOURCE"}
	if got := sc.Capabilities.Add; !slices.Equal(got, want) {
		t.Errorf("capabilities.add %v, want %v", got, want)
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("allowPrivilegeEscalation not false")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("readOnlyRootFilesystem not true")
	}
	if sc.RunAsUser == nil || *sc.RunAsUser != 0 {
		t.Errorf("runAsUser %v, want 0 (capabilities of a non-root user are not effective: Kubernetes sets no ambient set)", sc.RunAsUser)
	}
	if sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("seccompProfile %+v, want RuntimeDefault", sc.SeccompProfile)
	}
	if len(pod.InitContainers)+len(pod.EphemeralContainers) != 0 {
		t.Error("other containers than the exporter")
	}
}

// checkMounts asserts that the pod has exactly the volumes of want (name ->
// mount path), every one mounted read-only, and the chart's hostPaths (btf,
// tracing, cgroup: those of want) directories mounted at their own paths.
func checkMounts(t *testing.T, pod corev1.PodSpec, c corev1.Container, want map[string]string) {
	t.Helper()
	if len(pod.Volumes) != len(want) || len(c.VolumeMounts) != len(want) {
		t.Errorf("%d volumes, %d mounts, want %d", len(pod.Volumes), len(c.VolumeMounts), len(want))
	}
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		vols[v.Name] = v
	}
	hostPaths, wantHostPaths := 0, 0
	for _, n := range []string{"btf", "tracing", "cgroup"} {
		if _, ok := want[n]; ok {
			wantHostPaths++
		}
	}
	for _, m := range c.VolumeMounts {
		if !m.ReadOnly {
			t.Errorf("volume %s mounted read-write", m.Name)
		}
		if want[m.Name] != m.MountPath {
			t.Errorf("volume %s mounted at %q, want %q", m.Name, m.MountPath, want[m.Name])
		}
		v, ok := vols[m.Name]
		if !ok {
			t.Errorf("mount of volume %s, which the pod lacks", m.Name)
			continue
		}
		if hp := v.HostPath; hp != nil && slices.Contains([]string{"btf", "tracing", "cgroup"}, m.Name) {
			hostPaths++
			if hp.Path != m.MountPath || hp.Type == nil || *hp.Type != corev1.HostPathDirectory {
				t.Errorf("hostPath %s at %s, type %v: want the same path, a Directory", hp.Path, m.MountPath, hp.Type)
			}
		}
	}
	if hostPaths != wantHostPaths {
		t.Errorf("%d of the chart's hostPath volumes, want %d", hostPaths, wantHostPaths)
	}
}

// testKinds are the kinds of helm test's objects, last in every render.
var testKinds = []string{"ServiceAccount", "Role", "RoleBinding", "Pod"}

// TestHelmTest: helm test's pod runs kube-ready on the DaemonSet of the
// release, as a non-root user with nothing added, under a service account
// whose Role may get that DaemonSet and list pods in the namespace and do
// nothing else; every object is a test hook, deleted once it passed, and
// the pod comes after its RBAC. test.enabled false leaves them out.
func TestHelmTest(t *testing.T) {
	r := render(t, parseValues(t, "image: {repository: reg/ke, digest: sha256:"+strings.Repeat("ab", 32)+"}\ntest: {timeout: 90s}\nimagePullSecrets: [{name: pull}]"))
	name := fullname + "-test"
	weights := map[string]string{}
	for _, o := range r.objs {
		if o.Hook == "" {
			continue
		}
		if o.Hook != "test" || o.Namespace != DefaultNamespace || o.Name != name {
			t.Errorf("hook %s %s: hook %q, namespace %q", o.Kind, o.Name, o.Hook, o.Namespace)
		}
		var meta struct {
			Metadata struct {
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(o.YAML, &meta); err != nil {
			t.Fatal(err)
		}
		a := meta.Metadata.Annotations
		if a["helm.sh/hook"] != "test" || a["helm.sh/hook-delete-policy"] != "before-hook-creation,hook-succeeded" {
			t.Errorf("%s annotations %v", o.Kind, a)
		}
		weights[o.Kind] = a["helm.sh/hook-weight"]
	}
	if weights["ServiceAccount"] != "-2" || weights["Role"] != "-2" || weights["RoleBinding"] != "-1" || weights["Pod"] != "0" {
		t.Errorf("hook weights %v: the pod must come after its service account and RBAC", weights)
	}
	role := get[rbacv1.Role](t, r, "Role", name)
	want := []rbacv1.PolicyRule{
		{APIGroups: []string{"apps"}, Resources: []string{"daemonsets"}, ResourceNames: []string{fullname}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}},
	}
	if len(role.Rules) != 2 || !equalRule(role.Rules[0], want[0]) || !equalRule(role.Rules[1], want[1]) {
		t.Errorf("Role rules %+v, want %+v", role.Rules, want)
	}
	bind := get[rbacv1.RoleBinding](t, r, "RoleBinding", name)
	if bind.RoleRef.Kind != "Role" || bind.RoleRef.Name != name || len(bind.Subjects) != 1 || bind.Subjects[0].Name != name || bind.Subjects[0].Namespace != DefaultNamespace {
		t.Errorf("RoleBinding %+v", bind)
	}
	pod := get[corev1.Pod](t, r, "Pod", name)
	if pod.Spec.ServiceAccountName != name || pod.Spec.RestartPolicy != corev1.RestartPolicyNever || len(pod.Spec.Containers) != 1 ||
		len(pod.Spec.ImagePullSecrets) != 1 || pod.Spec.ImagePullSecrets[0].Name != "pull" {
		t.Fatalf("test pod spec %+v", pod.Spec)
	}
	ds, _ := daemonSet(t, r)
	matches := true
	for k, v := range ds.Spec.Selector.MatchLabels {
		matches = matches && pod.Labels[k] == v
	}
	if matches || pod.Labels["app.kubernetes.io/component"] != "test" {
		t.Errorf("test pod labels %v match the DaemonSet's selector %v: the DaemonSet, Service and monitors would take it for an exporter", pod.Labels, ds.Spec.Selector.MatchLabels)
	}
	c := pod.Spec.Containers[0]
	wantArgs := []string{"kube-ready", "--kube.namespace=" + DefaultNamespace, "--kube.daemonset=" + fullname, "--timeout=90s"}
	if c.Image != "reg/ke@sha256:"+strings.Repeat("ab", 32) || !slices.Equal(c.Args, wantArgs) {
		t.Errorf("test container image %q args %q, want the exporter's image by digest and %q", c.Image, c.Args, wantArgs)
	}
	psc, sc := pod.Spec.SecurityContext, c.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != 65534 ||
		sc == nil || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("test pod security: pod %+v, container %+v; want non-root 65534, every capability dropped, no escalation, read-only root", psc, sc)
	}
	r = render(t, parseValues(t, "test: {enabled: false}"))
	for _, o := range r.objs {
		if o.Hook != "" {
			t.Errorf("test.enabled false renders %s %s", o.Kind, o.Name)
		}
	}
}

func equalRule(a, b rbacv1.PolicyRule) bool {
	return slices.Equal(a.APIGroups, b.APIGroups) && slices.Equal(a.Resources, b.Resources) && slices.Equal(a.ResourceNames, b.ResourceNames) && slices.Equal(a.Verbs, b.Verbs)
}

// TestImageDigest: image.digest replaces the tag in the DaemonSet's image.
func TestImageDigest(t *testing.T) {
	d := "sha256:" + strings.Repeat("0f", 32)
	_, c := daemonSet(t, render(t, parseValues(t, "image: {repository: reg/ke, tag: v9, digest: "+d+"}")))
	if c.Image != "reg/ke@"+d {
		t.Errorf("image %q, want reg/ke@%s", c.Image, d)
	}
}

// TestProgramsDefault: values.yaml's programs are the exporter's default
// set, so the chart runs what a bare kernel_exporter runs.
func TestProgramsDefault(t *testing.T) {
	c, err := Chart()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range c.Values["programs"].([]any) {
		got = append(got, p.(string))
	}
	if !slices.Equal(got, programs.Default) {
		t.Fatalf("values.yaml programs %v, programs.Default %v", got, programs.Default)
	}
}

func TestMonitors(t *testing.T) {
	r := renderSet(t, "monitors")
	if got, want := r.kinds(), append([]string{"ServiceAccount", "ConfigMap", "ConfigMap", "ClusterRole", "ClusterRoleBinding", "Service", "DaemonSet", "PodMonitor", "PrometheusRule", "ServiceMonitor"}, testKinds...); !slices.Equal(got, want) {
		t.Fatalf("kinds %v, want %v", got, want)
	}
	ds, _ := daemonSet(t, r)
	sm := get[monitoringv1.ServiceMonitor](t, r, "ServiceMonitor", fullname)
	if sm.Labels["release"] != "prom" || sm.Labels["app.kubernetes.io/name"] != "kernel-exporter" {
		t.Errorf("ServiceMonitor labels %v", sm.Labels)
	}
	if !mapsEqual(sm.Spec.Selector.MatchLabels, ds.Spec.Selector.MatchLabels) {
		t.Errorf("ServiceMonitor selects %v, pods have %v", sm.Spec.Selector.MatchLabels, ds.Spec.Selector.MatchLabels)
	}
	if !slices.Equal(sm.Spec.NamespaceSelector.MatchNames, []string{DefaultNamespace}) {
		t.Errorf("ServiceMonitor namespaces %v", sm.Spec.NamespaceSelector.MatchNames)
	}
	if len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("%d endpoints", len(sm.Spec.Endpoints))
	}
	ep := sm.Spec.Endpoints[0]
	if ep.Port != "metrics" || ep.Path != "/metrics" || ep.Interval != "30s" || ep.ScrapeTimeout != "10s" {
		t.Errorf("endpoint port %q path %q interval %q timeout %q", ep.Port, ep.Path, ep.Interval, ep.ScrapeTimeout)
	}
	if len(ep.RelabelConfigs) != 1 || ep.RelabelConfigs[0].TargetLabel != "node" || len(ep.RelabelConfigs[0].SourceLabels) != 1 || ep.RelabelConfigs[0].SourceLabels[0] != "__meta_kubernetes_pod_node_name" {
		t.Errorf("relabelings %+v, want node from the pod's node name", ep.RelabelConfigs)
	}
	if len(ep.MetricRelabelConfigs) != 1 || ep.MetricRelabelConfigs[0].Regex != "go_.*" {
		t.Errorf("metricRelabelings %+v", ep.MetricRelabelConfigs)
	}

	pm := get[monitoringv1.PodMonitor](t, r, "PodMonitor", fullname)
	if !mapsEqual(pm.Spec.Selector.MatchLabels, ds.Spec.Selector.MatchLabels) {
		t.Errorf("PodMonitor selects %v, pods have %v", pm.Spec.Selector.MatchLabels, ds.Spec.Selector.MatchLabels)
	}
	if len(pm.Spec.PodMetricsEndpoints) != 1 {
		t.Fatalf("%d pod endpoints", len(pm.Spec.PodMetricsEndpoints))
	}
	pe := pm.Spec.PodMetricsEndpoints[0]
	if pe.Port == nil || *pe.Port != "metrics" || pe.Path != "/metrics" || pe.Interval != "15s" {
		t.Errorf("pod endpoint port %v path %q interval %q", pe.Port, pe.Path, pe.Interval)
	}

	// The PrometheusRule holds deploy/prometheus' groups, recording rules
	// first, every rule as the files have it.
	pr := get[monitoringv1.PrometheusRule](t, r, "PrometheusRule", fullname)
	if pr.Labels["release"] != "prom" {
		t.Errorf("PrometheusRule labels %v", pr.Labels)
	}
	var want []monitoringv1.RuleGroup
	for _, f := range []string{"../prometheus/recording.yml", "../prometheus/alerts.yml"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var file struct {
			Groups []monitoringv1.RuleGroup `json:"groups"`
		}
		if err := yaml.UnmarshalStrict(b, &file); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		want = append(want, file.Groups...)
	}
	got, _ := yaml.Marshal(pr.Spec.Groups)
	wantYAML, _ := yaml.Marshal(want)
	if len(want) < 2 || !bytes.Equal(got, wantYAML) {
		t.Errorf("PrometheusRule groups differ from deploy/prometheus' (%d groups, want %d)", len(pr.Spec.Groups), len(want))
	}
	var rules int
	for _, g := range pr.Spec.Groups {
		rules += len(g.Rules)
	}
	t.Logf("PrometheusRule: %d groups, %d rules", len(pr.Spec.Groups), rules)
	// The dashboard ConfigMap holds deploy/grafana's JSON byte for byte.
	cm := get[corev1.ConfigMap](t, r, "ConfigMap", fullname+"-dashboard")
	dash, err := os.ReadFile("../grafana/kernel_exporter.json")
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data["kernel_exporter.json"] != string(dash) || cm.Labels["grafana_dashboard"] != "1" || cm.Annotations["grafana_folder"] != "Kernel" {
		t.Errorf("dashboard ConfigMap: %d bytes (want %d, equal), labels %v, annotations %v", len(cm.Data["kernel_exporter.json"]), len(dash), cm.Labels, cm.Annotations)
	}

	// A ServiceMonitor without its Service is refused.
	_, err = Render(parseValues(t, "serviceMonitor: {enabled: true}\nservice: {enabled: false}"))
	if err == nil || !strings.Contains(err.Error(), "serviceMonitor.enabled needs service.enabled") {
		t.Errorf("ServiceMonitor without Service: err %v", err)
	}
}

// TestChartFilesMatchDeploy: the chart's files/ (which templates can
// read: Helm gives them nothing outside the chart) are copies of
// deploy/prometheus' rules and deploy/grafana's dashboard.
func TestChartFilesMatchDeploy(t *testing.T) {
	for copy, orig := range map[string]string{
		"alerts.yml":           "../prometheus/alerts.yml",
		"recording.yml":        "../prometheus/recording.yml",
		"kernel_exporter.json": "../grafana/kernel_exporter.json",
	} {
		a, err := os.ReadFile(ChartDir + "/files/" + copy)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(orig)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s/files/%s differs from %s: cp %s deploy/kubernetes/%s/files/", ChartDir, copy, orig, strings.TrimPrefix(orig, "../"), ChartDir)
		}
	}
}

// TestNetworkPolicyHostIP: the NetworkPolicy admits the metrics port from
// ingressFrom alone and, with egress rules, allows those alone; the
// exporter listens on the node's IP from the downward API; and
// listenOnHostIP without hostNetwork is refused.
func TestNetworkPolicyHostIP(t *testing.T) {
	r := renderSet(t, "network")
	ds, c := daemonSet(t, r)
	np := get[networkingv1.NetworkPolicy](t, r, "NetworkPolicy", fullname)
	if !mapsEqual(np.Spec.PodSelector.MatchLabels, ds.Spec.Selector.MatchLabels) {
		t.Errorf("NetworkPolicy selects %v, pods have %v", np.Spec.PodSelector.MatchLabels, ds.Spec.Selector.MatchLabels)
	}
	if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}) {
		t.Errorf("policy types %v", np.Spec.PolicyTypes)
	}
	in := np.Spec.Ingress
	if len(in) != 1 || len(in[0].Ports) != 1 || in[0].Ports[0].Port.String() != "metrics" || len(in[0].From) != 1 ||
		in[0].From[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "monitoring" {
		t.Errorf("ingress %+v, want the metrics port from the monitoring namespace's prometheus", in)
	}
	if len(np.Spec.Egress) != 1 || len(np.Spec.Egress[0].Ports) != 2 {
		t.Errorf("egress %+v", np.Spec.Egress)
	}
	if c.Args[0] != "--web.listen-address=$(HOST_IP):19435" {
		t.Errorf("args %q, want --web.listen-address=$(HOST_IP):19435 first", c.Args)
	}
	var hostIP bool
	for _, e := range c.Env {
		hostIP = hostIP || e.Name == "HOST_IP" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.hostIP"
	}
	if !hostIP {
		t.Errorf("env %+v, want HOST_IP from status.hostIP", c.Env)
	}
	// Without egress rules: ingress alone, egress left open.
	np = get[networkingv1.NetworkPolicy](t, render(t, parseValues(t, "networkPolicy: {enabled: true}")), "NetworkPolicy", fullname)
	if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) || len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].From) != 0 {
		t.Errorf("default NetworkPolicy %+v, want ingress to the port from anywhere, egress untouched", np.Spec)
	}
	if _, err := Render(parseValues(t, "listenOnHostIP: true\nhostNetwork: false")); err == nil || !strings.Contains(err.Error(), "listenOnHostIP needs hostNetwork") {
		t.Errorf("listenOnHostIP without hostNetwork: %v", err)
	}
}

func TestHostNetworkOff(t *testing.T) {
	r := renderSet(t, "host-network-off")
	ds, c := daemonSet(t, r)
	pod := ds.Spec.Template.Spec
	if pod.HostNetwork || pod.DNSPolicy != "" {
		t.Errorf("hostNetwork %v, dnsPolicy %q; want false and the default", pod.HostNetwork, pod.DNSPolicy)
	}
	if !pod.HostPID {
		t.Error("hostPID off with hostNetwork")
	}
	if len(c.Ports) != 1 || c.Ports[0].ContainerPort != 9999 || c.Ports[0].HostPort != 0 {
		t.Errorf("ports %+v, want container port 9999 and no host port", c.Ports)
	}
	if c.Args[0] != "--web.listen-address=:9999" {
		t.Errorf("args %q", c.Args)
	}
	svc := get[corev1.Service](t, r, "Service", fullname)
	if svc.Spec.Ports[0].Port != 9999 {
		t.Errorf("Service port %d", svc.Spec.Ports[0].Port)
	}
}

// TestUserPrograms: configs and objects from values into the chart's
// ConfigMap, and a ConfigMap the user made.
func TestUserPrograms(t *testing.T) {
	// The value set's objects.mine, decoded.
	object := []byte("\x7fELF\x02\x01\x01\x00 not really an object \xff\xfe")
	config := "metrics:\n  counters:\n    - name: x_total\n      help: \"quoted: yes\"\n"
	r := renderSet(t, "user-programs")
	cm := get[corev1.ConfigMap](t, r, "ConfigMap", fullname+"-programs")
	if cm.Data["mine.yaml"] != config || cm.Data["alpha.yaml"] != "metrics: {}\n" || len(cm.Data) != 2 {
		t.Errorf("ConfigMap data %q", cm.Data)
	}
	if !bytes.Equal(cm.BinaryData["mine.bpf.o"], object) || len(cm.BinaryData) != 1 {
		t.Errorf("ConfigMap binaryData %q, want mine.bpf.o = %q", cm.BinaryData, object)
	}
	ds, c := daemonSet(t, r)
	wantArgs := []string{
		"--web.listen-address=:19435",
		"--programs=none",
		"--config.dir=/etc/kernel_exporter/configs",
		"--config.names=alpha,mine",
		"--config.allowed-digests-file=/etc/kernel_exporter/allowed/digests",
		"--web.enable-lifecycle",
		"--capabilities.keep=perfmon",
	}
	if !slices.Equal(c.Args, wantArgs) {
		t.Errorf("args %q, want %q", c.Args, wantArgs)
	}
	if ds.Spec.Template.Annotations["checksum/programs"] == "" {
		t.Error("no checksum/programs annotation: a changed ConfigMap would not roll the pods")
	}
	sum := sha256.Sum256(object)
	checkAllowed(t, ds, c, []string{hex.EncodeToString(sum[:])})
	checkMounts(t, ds.Spec.Template.Spec, c, map[string]string{
		"btf":             "/sys/kernel/btf",
		"tracing":         "/sys/kernel/tracing",
		"cgroup":          "/sys/fs/cgroup",
		"programs":        "/etc/kernel_exporter/configs",
		"allowed-digests": "/etc/kernel_exporter/allowed",
	})
	// checkDigests false: no allow-list.
	r = render(t, parseValues(t, "userPrograms: {configs: {a: 'metrics: {}'}, checkDigests: false}"))
	ds, c = daemonSet(t, r)
	if _, ok := ds.Spec.Template.Annotations[allowedAnnotation]; ok || slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--config.allowed-digests-file") }) {
		t.Errorf("checkDigests false: annotation %q, args %q; want neither", ds.Spec.Template.Annotations[allowedAnnotation], c.Args)
	}

	r = renderSet(t, "existing-configmap")
	if _, ok := r.typed["ConfigMap/"+fullname+"-programs"]; ok {
		t.Error("the chart rendered its ConfigMap besides existingConfigMap")
	}
	ds, c = daemonSet(t, r)
	if !slices.Contains(c.Args, "--config.names=b,a") {
		t.Errorf("args %q, want --config.names=b,a", c.Args)
	}
	var found bool
	for _, v := range ds.Spec.Template.Spec.Volumes {
		if v.Name == "programs" {
			found = v.ConfigMap != nil && v.ConfigMap.Name == "my-programs"
		}
	}
	if !found {
		t.Errorf("no programs volume of ConfigMap my-programs in %+v", ds.Spec.Template.Spec.Volumes)
	}
	if _, ok := ds.Spec.Template.Annotations["checksum/programs"]; ok {
		t.Error("checksum/programs of a ConfigMap the chart does not render")
	}
	checkAllowed(t, ds, c, []string{strings.Repeat("01", 32), strings.Repeat("ab", 32)})
}

// allowedAnnotation holds the pod's allow-list of objects.
const allowedAnnotation = "kernel-exporter/allowed-digests"

// checkAllowed asserts the allow-list: the flag, the annotation (which
// the exporter's parser reads as exactly the digests want, sorted) and the
// downward API volume that makes it the flag's file.
func checkAllowed(t *testing.T, ds *appsv1.DaemonSet, c corev1.Container, want []string) {
	t.Helper()
	if !slices.Contains(c.Args, "--config.allowed-digests-file=/etc/kernel_exporter/allowed/digests") {
		t.Errorf("args %q, want --config.allowed-digests-file", c.Args)
	}
	l, err := allowlist.Parse("annotation", []byte(ds.Spec.Template.Annotations[allowedAnnotation]))
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Digests(); !slices.Equal(got, want) {
		t.Errorf("allowed digests %v, want %v", got, want)
	}
	var vol *corev1.Volume
	for i, v := range ds.Spec.Template.Spec.Volumes {
		if v.Name == "allowed-digests" {
			vol = &ds.Spec.Template.Spec.Volumes[i]
		}
	}
	if vol == nil || vol.DownwardAPI == nil || len(vol.DownwardAPI.Items) != 1 || vol.DownwardAPI.Items[0].Path != "digests" ||
		vol.DownwardAPI.Items[0].FieldRef == nil || vol.DownwardAPI.Items[0].FieldRef.FieldPath != "metadata.annotations['"+allowedAnnotation+"']" {
		t.Errorf("allowed-digests volume %+v, want the annotation through the downward API", vol)
	}
	var mounted bool
	for _, m := range c.VolumeMounts {
		mounted = mounted || m.Name == "allowed-digests" && m.MountPath == "/etc/kernel_exporter/allowed" && m.ReadOnly
	}
	if !mounted {
		t.Errorf("mounts %+v, want allowed-digests read-only at /etc/kernel_exporter/allowed", c.VolumeMounts)
	}
}

func TestResourcesTolerations(t *testing.T) {
	r := renderSet(t, "resources-tolerations")
	ds, c := daemonSet(t, r)
	pod := ds.Spec.Template.Spec
	if q := c.Resources.Requests[corev1.ResourceCPU]; q.MilliValue() != 50 {
		t.Errorf("cpu request %v", q.String())
	}
	if q := c.Resources.Requests[corev1.ResourceMemory]; q.Value() != 64<<20 {
		t.Errorf("memory request %v", q.String())
	}
	if q := c.Resources.Limits[corev1.ResourceMemory]; q.Value() != 256<<20 {
		t.Errorf("memory limit %v", q.String())
	}
	want := corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	if len(pod.Tolerations) != 1 || pod.Tolerations[0] != want {
		t.Errorf("tolerations %+v, want %+v", pod.Tolerations, want)
	}
	// Helm merges maps: the default kubernetes.io/os stays unless set to null.
	if len(pod.NodeSelector) != 2 || pod.NodeSelector["pool"] != "infra" || pod.NodeSelector["kubernetes.io/os"] != "linux" {
		t.Errorf("nodeSelector %v", pod.NodeSelector)
	}
	if a := pod.Affinity; a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil ||
		!slices.Equal(a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Values, []string{"amd64", "arm64"}) {
		t.Errorf("affinity %+v", pod.Affinity)
	}
	if pod.PriorityClassName != "" {
		t.Errorf("priorityClassName %q, want none", pod.PriorityClassName)
	}
	if c.Image != "registry.example/kernel_exporter:v9" || c.ImagePullPolicy != corev1.PullAlways {
		t.Errorf("image %q %q", c.Image, c.ImagePullPolicy)
	}
	if ds.Spec.Template.Annotations["team"] != "sre" {
		t.Errorf("pod annotations %v", ds.Spec.Template.Annotations)
	}
}

// TestNoBTF: without the node's /sys/kernel/btf, an external BTF file
// through extra volumes and --btf.path.
func TestNoBTF(t *testing.T) {
	ds, c := daemonSet(t, renderSet(t, "no-btf"))
	checkMounts(t, ds.Spec.Template.Spec, c, map[string]string{
		"tracing":  "/sys/kernel/tracing",
		"cgroup":   "/sys/fs/cgroup",
		"programs": "/etc/kernel_exporter/configs",
		"vmlinux":  "/btf/vmlinux",
	})
	if c.Args[len(c.Args)-1] != "--btf.path=/btf/vmlinux" {
		t.Errorf("args %q", c.Args)
	}
}

func TestRBACOff(t *testing.T) {
	r := renderSet(t, "rbac-off")
	if got, want := r.kinds(), append([]string{"ConfigMap", "Service", "DaemonSet"}, testKinds...); !slices.Equal(got, want) {
		t.Fatalf("kinds %v, want %v", got, want)
	}
	ds, _ := daemonSet(t, r)
	if ds.Spec.Template.Spec.ServiceAccountName != "node-agents" {
		t.Errorf("serviceAccountName %q", ds.Spec.Template.Spec.ServiceAccountName)
	}
}

// TestWebConfig: --web.config.file from a Secret the chart renders, probes
// over HTTPS with basic auth, and a Secret the user made.
func TestWebConfig(t *testing.T) {
	r := renderSet(t, "web-config")
	sec := get[corev1.Secret](t, r, "Secret", fullname+"-web")
	var web struct {
		TLS struct {
			Cert string `json:"cert_file"`
			Key  string `json:"key_file"`
		} `json:"tls_server_config"`
		Users map[string]string `json:"basic_auth_users"`
	}
	if err := yaml.UnmarshalStrict([]byte(sec.StringData["web-config.yml"]), &web); err != nil {
		t.Fatalf("web-config.yml: %v", err)
	}
	if web.TLS.Cert != "/etc/kernel_exporter/web/tls.crt" || web.Users["prometheus"] != "$2y$10$abcdefghijklmnopqrstuv" {
		t.Errorf("web-config.yml %+v", web)
	}
	if sec.StringData["tls.key"] != "-----BEGIN PRIVATE KEY-----\n" || len(sec.StringData) != 3 {
		t.Errorf("Secret keys %d", len(sec.StringData))
	}
	ds, c := daemonSet(t, r)
	if !slices.Contains(c.Args, "--web.config.file=/etc/kernel_exporter/web/web-config.yml") {
		t.Errorf("args %q", c.Args)
	}
	checkProbe(t, "liveness", c.LivenessProbe, "/-/healthy", corev1.URISchemeHTTPS)
	checkProbe(t, "readiness", c.ReadinessProbe, "/-/ready", corev1.URISchemeHTTPS)
	if h := c.ReadinessProbe.HTTPGet.HTTPHeaders; len(h) != 1 || h[0].Name != "Authorization" {
		t.Errorf("probe headers %+v", h)
	}
	checkMounts(t, ds.Spec.Template.Spec, c, map[string]string{
		"btf":        "/sys/kernel/btf",
		"tracing":    "/sys/kernel/tracing",
		"cgroup":     "/sys/fs/cgroup",
		"programs":   "/etc/kernel_exporter/configs",
		"web-config": "/etc/kernel_exporter/web",
	})
	if ds.Spec.Template.Annotations["checksum/web-config"] == "" {
		t.Error("no checksum/web-config annotation")
	}
	sm := get[monitoringv1.ServiceMonitor](t, r, "ServiceMonitor", fullname)
	ep := sm.Spec.Endpoints[0]
	if ep.Scheme == nil || strings.ToLower(ep.Scheme.String()) != "https" || ep.TLSConfig == nil || ep.TLSConfig.InsecureSkipVerify == nil || !*ep.TLSConfig.InsecureSkipVerify {
		t.Errorf("ServiceMonitor scheme %v, tlsConfig %+v", ep.Scheme, ep.TLSConfig)
	}
	if ep.BasicAuth == nil || ep.BasicAuth.Username.Name != "scrape-auth" || ep.BasicAuth.Password.Key != "password" {
		t.Errorf("ServiceMonitor basicAuth %+v", ep.BasicAuth)
	}

	r = renderSet(t, "existing-secret")
	if _, ok := r.typed["Secret/"+fullname+"-web"]; ok {
		t.Error("the chart rendered its Secret besides existingSecret")
	}
	ds, _ = daemonSet(t, r)
	for _, v := range ds.Spec.Template.Spec.Volumes {
		if v.Name == "web-config" && (v.Secret == nil || v.Secret.SecretName != "my-web") {
			t.Errorf("web-config volume %+v, want Secret my-web", v)
		}
	}
}

// TestLoopbackProbes: probes.loopbackPort passes --web.health-address on
// the loopback and points both probes at it over plain HTTP with no
// headers, even with webConfig; it is refused without hostNetwork and
// with httpHeaders (credentials it makes needless).
func TestLoopbackProbes(t *testing.T) {
	_, c := daemonSet(t, renderSet(t, "loopback-probes"))
	if !slices.Contains(c.Args, "--web.health-address=127.0.0.1:19436") || !slices.Contains(c.Args, "--web.config.file=/etc/kernel_exporter/web/web-config.yml") {
		t.Errorf("args %q, want --web.health-address=127.0.0.1:19436 beside the web config", c.Args)
	}
	checkLoopbackProbes(t, c)
	for doc, want := range map[string]string{
		"probes: {loopbackPort: 19436}\nhostNetwork: false":                                      "probes.loopbackPort needs hostNetwork",
		"probes: {loopbackPort: 19436, httpHeaders: [{name: Authorization, value: Basic eDp5}]}": "remove probes.httpHeaders",
	} {
		if _, err := Render(parseValues(t, doc)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", doc, err, want)
		}
	}
}

// checkLoopbackProbes asserts both probes on 127.0.0.1:19436 over HTTP,
// without headers.
func checkLoopbackProbes(t *testing.T, c corev1.Container) {
	t.Helper()
	for path, p := range map[string]*corev1.Probe{"/-/healthy": c.LivenessProbe, "/-/ready": c.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Host != "127.0.0.1" || p.HTTPGet.Port.IntValue() != 19436 || p.HTTPGet.Scheme != corev1.URISchemeHTTP ||
			p.HTTPGet.Path != path || len(p.HTTPGet.HTTPHeaders) != 0 {
			t.Errorf("probe of %s: %+v, want GET http://127.0.0.1:19436%s without headers", path, p, path)
		}
	}
}

// TestSchemaRejects: values.schema.json refuses values of the wrong type or
// unknown keys, as helm install does, and strict decoding refuses a field
// a Kubernetes type lacks.
func TestSchemaRejects(t *testing.T) {
	for _, doc := range []string{
		"port: 0",
		"port: 70000",
		"hostNetwork: yes please",
		"programs: timers",
		"tolerations: {operator: Exists}",
		"securityContext: {privileged: true}",
		"resourcse: {}",
		"image: {repo: x}",
		"userPrograms: {configs: {'../x': 'a: b'}}",
		"userPrograms: {allowedDigests: [abc]}",
		"userPrograms: {allowedDigests: ['sha512:" + strings.Repeat("0", 64) + "']}",
		"serviceMonitor: {enabled: 1}",
		"image: {digest: latest}",
		"image: {digest: 'sha256:" + strings.Repeat("0", 63) + "'}",
		"test: {timeout: soon}",
		"probes: {loopbackPort: 70000}",
	} {
		_, err := Render(parseValues(t, doc))
		if err == nil {
			t.Errorf("values %q rendered, want an error", doc)
			continue
		}
		t.Logf("%s: %v", doc, strings.Join(strings.Fields(err.Error()), " "))
	}

	objs, err := Render(parseValues(t, "resources: {requests: {cpu: 1}, limitz: {cpu: 2}}"))
	if err != nil {
		t.Fatal(err) // resources is free-form in the schema; the type decides
	}
	ds, err := Find(objs, "DaemonSet", fullname)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Decode(ds); err == nil || !strings.Contains(err.Error(), "limitz") {
		t.Errorf("decode of a DaemonSet with resources.limitz: err %v, want an unknown-field error", err)
	}
}

// Find returns the first object of kind named name.
func Find(objs []Object, kind, name string) (Object, error) {
	for _, o := range objs {
		if o.Kind == kind && o.Name == name {
			return o, nil
		}
	}
	return Object{}, os.ErrNotExist
}

// TestManifestIsDefaultRender: daemonset.yaml is the default render, byte
// for byte (-update rewrites it), and holds no Helm-only object.
func TestManifestIsDefaultRender(t *testing.T) {
	objs, err := Render(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := Manifest(objs)
	if *update {
		if err := os.WriteFile("daemonset.yaml", want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile("daemonset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("daemonset.yaml differs from the default render: run go test ./deploy/kubernetes -run TestManifestIsDefaultRender -update")
	}
	if !bytes.Equal(PlainManifest(), got) {
		t.Fatal("the embedded daemonset.yaml is stale")
	}
	// Every document of the file decodes strictly; helm test's objects
	// are not in it.
	objs = slices.DeleteFunc(objs, func(o Object) bool { return o.Hook != "" })
	docs := strings.Split(string(got), "\n---\n")
	if len(docs) != len(objs)+1 {
		t.Fatalf("%d documents after the header, want %d", len(docs)-1, len(objs))
	}
	for i, d := range docs[1:] {
		o := objs[i]
		o.YAML = []byte(d)
		if _, err := Decode(o); err != nil {
			t.Error(err)
		}
	}
}

// TestMonitoringCRDs: the test CRDs name the kinds the chart renders.
func TestMonitoringCRDs(t *testing.T) {
	docs := strings.Split(string(MonitoringCRDs()), "\n---\n")
	var kinds []string
	for _, d := range docs {
		var crd struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Spec struct {
				Group string `json:"group"`
				Names struct {
					Kind   string `json:"kind"`
					Plural string `json:"plural"`
				} `json:"names"`
				Versions []struct {
					Name string `json:"name"`
				} `json:"versions"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal([]byte(d), &crd); err != nil {
			t.Fatal(err)
		}
		if crd.Kind != "CustomResourceDefinition" || crd.Spec.Group != monitoringv1.SchemeGroupVersion.Group ||
			crd.Metadata.Name != crd.Spec.Names.Plural+"."+crd.Spec.Group || len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Name != "v1" {
			t.Errorf("CRD %+v", crd)
		}
		kinds = append(kinds, crd.Spec.Names.Kind)
	}
	if !slices.Equal(kinds, []string{monitoringv1.ServiceMonitorsKind, monitoringv1.PodMonitorsKind, monitoringv1.PrometheusRuleKind}) {
		t.Errorf("CRD kinds %v", kinds)
	}
}

// TestDocsListEveryValue: docs/kubernetes.md names every value of
// values.yaml: top-level keys, and the keys of the chart's own tables (not
// of Kubernetes objects passed through, as securityContext).
func TestDocsListEveryValue(t *testing.T) {
	doc, err := os.ReadFile("../../docs/kubernetes.md")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Chart()
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range c.Values {
		if !bytes.Contains(doc, []byte("`"+k)) {
			t.Errorf("docs/kubernetes.md does not name value %s", k)
		}
		sub, ok := v.(map[string]any)
		if !ok || !slices.Contains([]string{"image", "userPrograms", "webConfig", "probes", "serviceAccount", "rbac", "service", "serviceMonitor", "podMonitor", "test", "prometheusRule", "grafanaDashboard", "networkPolicy"}, k) {
			continue
		}
		for k2 := range sub {
			if !bytes.Contains(doc, []byte("`"+k+"."+k2+"`")) && !bytes.Contains(doc, []byte("."+k2+"`")) && !bytes.Contains(doc, []byte("`"+k+".*`")) {
				t.Errorf("docs/kubernetes.md does not name value %s.%s", k, k2)
			}
		}
	}
}

// TestNotes: NOTES.txt names the Pod Security Admission label the namespace
// needs and the values that depend on the cluster, and warns when an
// existing ConfigMap's programs would all be refused.
func TestNotes(t *testing.T) {
	notes, err := Notes(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"kubectl label namespace monitoring pod-security.kubernetes.io/enforce=privileged",
		"helm test kernel-exporter -n monitoring",
		"priorityClassName is empty",
		"image: kernel_exporter:0.1.0 must be pullable",
		"mountBTF",
		"SYS_RESOURCE",
		"Port 19435 is opened on every node",
	} {
		if !strings.Contains(notes, want) {
			t.Errorf("NOTES.txt lacks %q:\n%s", want, notes)
		}
	}
	t.Logf("NOTES.txt with the defaults:\n%s", notes)
	notes, err = Notes(parseValues(t, "userPrograms: {existingConfigMap: mine, names: [a]}\npriorityClassName: system-node-critical"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"WARNING: existingConfigMap is set and allowedDigests is empty", "priorityClassName system-node-critical: it must exist"} {
		if !strings.Contains(notes, want) {
			t.Errorf("NOTES.txt with existingConfigMap lacks %q:\n%s", want, notes)
		}
	}
}
