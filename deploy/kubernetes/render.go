// SPDX-License-Identifier: Apache-2.0

// Package kubernetes holds the Helm chart that runs kernel_exporter on every
// node of a Kubernetes cluster (chart/kernel-exporter) and the plain
// manifest rendered from it with the default values (daemonset.yaml).
//
// Render renders the chart as `helm install` does, with the Helm SDK: the
// user's values merged over values.yaml and checked against
// values.schema.json, every template executed (strictly: a template that
// reads a value values.yaml lacks is an error), and the documents sorted in
// Helm's install order. Decode turns a rendered object into its typed Go
// value (k8s.io/api, prometheus-operator's monitoring/v1), rejecting any
// field the type does not have. Tests render several value sets, and an
// integration test applies the objects to a real API server. Nothing in the
// exporter imports this package: Helm is a dependency of tests only.
package kubernetes

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/releaseutil"
	"sigs.k8s.io/yaml"
)

//go:embed all:chart/kernel-exporter
var chartFiles embed.FS

//go:embed daemonset.yaml
var manifest []byte

//go:embed testdata/monitoring-crds.yaml
var monitoringCRDs []byte

// ChartDir is the chart's directory in this package; `helm install
// kernel-exporter deploy/kubernetes/chart/kernel-exporter` installs it.
const ChartDir = "chart/kernel-exporter"

// The release that daemonset.yaml is rendered for, and Render's default.
const (
	DefaultRelease   = "kernel-exporter"
	DefaultNamespace = "monitoring"
)

// Object is one rendered Kubernetes object.
type Object struct {
	// Template is the file it came from: "kernel-exporter/templates/daemonset.yaml".
	Template   string
	APIVersion string // "apps/v1"
	Kind       string // "DaemonSet"
	Name       string
	Namespace  string // "" for cluster-scoped objects (ClusterRole)
	// YAML is the document as the template rendered it, without the
	// leading "---" and the "# Source:" comment.
	YAML []byte
	// Hook is "test" for an object of helm test (annotation helm.sh/hook),
	// "" for one helm install creates.
	Hook string
}

// JSON returns the object as JSON, as client-go and kubectl send it.
func (o Object) JSON() ([]byte, error) {
	j, err := yaml.YAMLToJSON(o.YAML)
	if err != nil {
		return nil, fmt.Errorf("%s %s (%s): %w", o.Kind, o.Name, o.Template, err)
	}
	return j, nil
}

// Chart loads the embedded chart.
func Chart() (*chart.Chart, error) {
	var files []*loader.BufferedFile
	err := fs.WalkDir(chartFiles, ChartDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := chartFiles.ReadFile(p)
		if err != nil {
			return err
		}
		files = append(files, &loader.BufferedFile{Name: strings.TrimPrefix(p, ChartDir+"/"), Data: data})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the embedded chart: %w", err)
	}
	c, err := loader.LoadFiles(files)
	if err != nil {
		return nil, fmt.Errorf("load the chart: %w", err)
	}
	return c, nil
}

// Render renders the chart for release DefaultRelease in namespace
// DefaultNamespace; see RenderRelease.
func Render(values map[string]any) ([]Object, error) {
	return RenderRelease(DefaultRelease, DefaultNamespace, values)
}

// RenderRelease renders the chart as `helm install <release> -n
// <namespace>` would, with values (the map of a -f values file; nil for
// the defaults) over values.yaml, and returns its objects in Helm's install
// order (ServiceAccount, Secret, ConfigMap, ClusterRole, ClusterRoleBinding,
// Service, DaemonSet, then the monitors), then the objects of helm test
// (Hook "test") by their hook weight. NOTES.txt is left out. It fails
// when the values do not meet values.schema.json, a template fails (a
// `fail`, a value missing from values.yaml), or a document has no kind or
// name.
func RenderRelease(release, namespace string, values map[string]any) ([]Object, error) {
	files, err := renderFiles(release, namespace, values)
	if err != nil {
		return nil, err
	}
	for name := range files {
		if path.Base(name) == "NOTES.txt" {
			delete(files, name)
		}
	}
	hooks, manifests, err := releaseutil.SortManifests(files, chartutil.DefaultVersionSet, releaseutil.InstallOrder)
	if err != nil {
		return nil, fmt.Errorf("split the rendered documents: %w", err)
	}
	out := make([]Object, 0, len(manifests)+len(hooks))
	for _, m := range manifests {
		o, err := object(m)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	// The test hooks, in Helm's order (by weight, then name): created by
	// helm test, not by helm install.
	for _, h := range hooks {
		if len(h.Events) != 1 || h.Events[0] != helmrelease.HookTest {
			return nil, fmt.Errorf("%s: a hook of %v, which this package does not render (only test hooks)", h.Path, h.Events)
		}
		var head releaseutil.SimpleHead
		if err := yaml.Unmarshal([]byte(h.Manifest), &head); err != nil {
			return nil, fmt.Errorf("%s: %w", h.Path, err)
		}
		o, err := object(releaseutil.Manifest{Name: h.Path, Content: h.Manifest, Head: &head})
		if err != nil {
			return nil, err
		}
		o.Hook = string(helmrelease.HookTest)
		out = append(out, o)
	}
	return out, nil
}

// renderFiles renders every template of the chart, NOTES.txt included, as
// RenderRelease does.
func renderFiles(release, namespace string, values map[string]any) (map[string]string, error) {
	c, err := Chart()
	if err != nil {
		return nil, err
	}
	if values == nil {
		values = map[string]any{}
	}
	opts := chartutil.ReleaseOptions{Name: release, Namespace: namespace, Revision: 1, IsInstall: true}
	top, err := chartutil.ToRenderValues(c, values, opts, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	files, err := engine.Engine{Strict: true}.Render(c, top)
	if err != nil {
		return nil, fmt.Errorf("render: %w", err)
	}
	return files, nil
}

// Notes renders NOTES.txt, what helm install prints, for release
// DefaultRelease in DefaultNamespace with values.
func Notes(values map[string]any) (string, error) {
	files, err := renderFiles(DefaultRelease, DefaultNamespace, values)
	if err != nil {
		return "", err
	}
	for name, text := range files {
		if path.Base(name) == "NOTES.txt" {
			return text, nil
		}
	}
	return "", fmt.Errorf("the chart has no NOTES.txt")
}

// object parses the head of one rendered document.
func object(m releaseutil.Manifest) (Object, error) {
	if m.Head == nil || m.Head.Kind == "" || m.Head.Version == "" || m.Head.Metadata == nil || m.Head.Metadata.Name == "" {
		return Object{}, fmt.Errorf("%s: a document without apiVersion, kind or metadata.name", m.Name)
	}
	var meta struct {
		Metadata struct {
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal([]byte(m.Content), &meta); err != nil {
		return Object{}, fmt.Errorf("%s: %w", m.Name, err)
	}
	body := m.Content
	// SortManifests keeps each document's "# Source:" line.
	if first, rest, ok := strings.Cut(body, "\n"); ok && strings.HasPrefix(first, "# Source: ") {
		body = rest
	}
	return Object{
		Template:   m.Name,
		APIVersion: m.Head.Version,
		Kind:       m.Head.Kind,
		Name:       m.Head.Metadata.Name,
		Namespace:  meta.Metadata.Namespace,
		YAML:       []byte(strings.TrimSpace(body) + "\n"),
	}, nil
}

// manifestHeader opens daemonset.yaml.
const manifestHeader = `# kernel_exporter on every node: the objects of the Helm chart
# deploy/kubernetes/chart/kernel-exporter rendered with its default values,
# as release "kernel-exporter" in namespace "monitoring". Do not edit:
# regenerate with
#   go test ./deploy/kubernetes -run TestManifestIsDefaultRender -update
# Install with
#   kubectl create namespace monitoring
#   kubectl apply -f deploy/kubernetes/daemonset.yaml
# docs/kubernetes.md explains every object.
`

// Manifest joins objects into one multi-document YAML file, each under a
// "# Source:" line, as daemonset.yaml holds them. Hooks (helm test's) are
// left out: kubectl apply would create them at once.
func Manifest(objs []Object) []byte {
	var b bytes.Buffer
	b.WriteString(manifestHeader)
	for _, o := range objs {
		if o.Hook != "" {
			continue
		}
		fmt.Fprintf(&b, "---\n# Source: %s\n", o.Template)
		b.Write(o.YAML)
	}
	return b.Bytes()
}

// PlainManifest returns daemonset.yaml, the default render of the chart.
func PlainManifest() []byte { return bytes.Clone(manifest) }

// MonitoringCRDs returns testdata/monitoring-crds.yaml: minimal
// CustomResourceDefinitions of prometheus-operator's ServiceMonitor,
// PodMonitor and PrometheusRule (monitoring.coreos.com/v1, every field
// preserved unchecked),
// so that an API server without prometheus-operator accepts the monitors
// the chart renders. They are for tests only, not for a cluster that runs
// prometheus-operator, which installs the real ones.
func MonitoringCRDs() []byte { return bytes.Clone(monitoringCRDs) }
