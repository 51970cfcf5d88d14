// SPDX-License-Identifier: Apache-2.0

package kubernetes

import (
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"
)

// ValueSet is a named set of chart values, as a -f values file holds them.
type ValueSet struct {
	Name   string
	Values map[string]any
}

// valueSets are the value sets the tests render, each turning on what the
// defaults leave off. The objects they reference but do not render (the
// ConfigMap my-programs, the Secrets my-web and scrape-auth, the service
// account node-agents) are the user's.
var valueSets = []struct{ name, doc string }{
	{"defaults", "{}"},
	{"monitors", `
serviceMonitor:
  enabled: true
  labels: {release: prom}
  interval: 30s
  scrapeTimeout: 10s
  metricRelabelings:
    - action: drop
      sourceLabels: [__name__]
      regex: go_.*
podMonitor:
  enabled: true
  interval: 15s
prometheusRule:
  enabled: true
  labels: {release: prom}
grafanaDashboard:
  enabled: true
  annotations: {grafana_folder: Kernel}
`},
	{"network", `
listenOnHostIP: true
networkPolicy:
  enabled: true
  ingressFrom:
    - namespaceSelector:
        matchLabels: {kubernetes.io/metadata.name: monitoring}
      podSelector:
        matchLabels: {app.kubernetes.io/name: prometheus}
  egress:
    - ports: [{port: 443, protocol: TCP}, {port: 6443, protocol: TCP}]
`},
	{"host-network-off", "hostNetwork: false\nport: 9999\n"},
	{"user-programs", `
programs: [none]
userPrograms:
  configs:
    mine: "metrics:\n  counters:\n    - name: x_total\n      help: \"quoted: yes\"\n"
    alpha: "metrics: {}\n"
  objects:
    mine: f0VMRgIBAQAgbm90IHJlYWxseSBhbiBvYmplY3Qg//4=
extraArgs: [--web.enable-lifecycle, --capabilities.keep=perfmon]
`},
	{"existing-configmap", "userPrograms: {existingConfigMap: my-programs, names: [b, a], allowedDigests: [sha256:" + strings.Repeat("AB", 32) + ", '" + strings.Repeat("01", 32) + "']}\n"},
	{"resources-tolerations", `
resources:
  requests: {cpu: 50m, memory: 64Mi}
  limits: {memory: 256Mi}
tolerations:
  - key: dedicated
    operator: Equal
    value: gpu
    effect: NoSchedule
nodeSelector: {pool: infra}
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms:
        - matchExpressions:
            - {key: kubernetes.io/arch, operator: In, values: [amd64, arm64]}
priorityClassName: ""
image: {repository: registry.example/kernel_exporter, tag: v9, pullPolicy: Always}
podAnnotations: {team: sre}
`},
	{"no-btf", `
mountBTF: false
extraVolumes:
  - name: vmlinux
    hostPath: {path: /var/lib/kernel_exporter/vmlinux.btf, type: File}
extraVolumeMounts:
  - {name: vmlinux, mountPath: /btf/vmlinux, readOnly: true}
extraArgs: [--btf.path=/btf/vmlinux]
`},
	{"rbac-off", "rbac: {create: false}\nserviceAccount: {create: false, name: node-agents}\n"},
	{"web-config", `
webConfig:
  enabled: true
  config:
    tls_server_config: {cert_file: /etc/kernel_exporter/web/tls.crt, key_file: /etc/kernel_exporter/web/tls.key}
    basic_auth_users: {prometheus: $2y$10$abcdefghijklmnopqrstuv}
  files:
    tls.crt: "-----BEGIN CERTIFICATE-----\n"
    tls.key: "-----BEGIN PRIVATE KEY-----\n"
probes:
  scheme: HTTPS
  httpHeaders: [{name: Authorization, value: Basic cHJvbWV0aGV1czpzZWNyZXQ=}]
serviceMonitor:
  enabled: true
  scheme: https
  tlsConfig: {insecureSkipVerify: true}
  basicAuth:
    username: {name: scrape-auth, key: username}
    password: {name: scrape-auth, key: password}
`},
	{"existing-secret", "webConfig: {enabled: true, existingSecret: my-web}\n"},
	{"loopback-probes", "webConfig: {enabled: true, existingSecret: my-web}\nprobes: {loopbackPort: 19436}\n"},
}

// ValueSets returns the value sets this package's tests render and check
// (defaults, monitors, network, host-network-off, user-programs, existing-configmap,
// resources-tolerations, no-btf, rbac-off, web-config, existing-secret,
// loopback-probes), in that
// order, for tests that apply them elsewhere (a real API server). Each
// call returns new maps.
func ValueSets() ([]ValueSet, error) {
	out := make([]ValueSet, 0, len(valueSets))
	for _, s := range valueSets {
		var v map[string]any
		if err := yaml.Unmarshal([]byte(s.doc), &v); err != nil {
			return nil, fmt.Errorf("value set %s: %w", s.name, err)
		}
		out = append(out, ValueSet{Name: s.name, Values: v})
	}
	return out, nil
}
