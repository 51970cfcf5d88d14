{{/* The chart name, or nameOverride. */}}
{{- define "kernel-exporter.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The name of every object: fullnameOverride, else the release name when it
already holds the chart name, else <release>-<chart>. At most 63 bytes.
*/}}
{{- define "kernel-exporter.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "kernel-exporter.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The labels that select the pods: stable across upgrades. */}}
{{- define "kernel-exporter.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kernel-exporter.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The labels of every object. */}}
{{- define "kernel-exporter.labels" -}}
{{ include "kernel-exporter.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: node-agent
app.kubernetes.io/part-of: kernel-exporter
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "kernel-exporter.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "kernel-exporter.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The ConfigMap of user programs: existingConfigMap, else the chart's. */}}
{{- define "kernel-exporter.configMapName" -}}
{{- default (printf "%s-programs" (include "kernel-exporter.fullname" .)) .Values.userPrograms.existingConfigMap -}}
{{- end -}}

{{/* --config.names: userPrograms.names, else the keys of configs, sorted. */}}
{{- define "kernel-exporter.configNames" -}}
{{- if .Values.userPrograms.names -}}
{{- join "," .Values.userPrograms.names -}}
{{- else -}}
{{- join "," (keys .Values.userPrograms.configs | sortAlpha) -}}
{{- end -}}
{{- end -}}

{{/* The Secret holding web-config.yml, or "" without webConfig. */}}
{{- define "kernel-exporter.webSecretName" -}}
{{- if .Values.webConfig.enabled -}}
{{- default (printf "%s-web" (include "kernel-exporter.fullname" .)) .Values.webConfig.existingSecret -}}
{{- end -}}
{{- end -}}

{{/* The endpoint fields a ServiceMonitor and a PodMonitor share. */}}
{{- define "kernel-exporter.monitorEndpoint" -}}
port: metrics
path: /metrics
{{- with .interval }}
interval: {{ . }}
{{- end }}
{{- with .scrapeTimeout }}
scrapeTimeout: {{ . }}
{{- end }}
{{- with .scheme }}
scheme: {{ . }}
{{- end }}
{{- with .tlsConfig }}
tlsConfig:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .basicAuth }}
basicAuth:
  {{- toYaml . | nindent 2 }}
{{- end }}
relabelings:
  - sourceLabels: [__meta_kubernetes_pod_node_name]
    targetLabel: node
{{- with .relabelings }}
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .metricRelabelings }}
metricRelabelings:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
The allow-list of user programs' objects, one "<sha256>  <name>.bpf.o" line
each: the digests of userPrograms.objects, then allowedDigests. "" without
checkDigests or user programs.
*/}}
{{- define "kernel-exporter.allowedDigests" -}}
{{- if and .Values.userPrograms.checkDigests (include "kernel-exporter.configNames" .) -}}
{{- $lines := list -}}
{{- range $name, $b64 := .Values.userPrograms.objects -}}
{{- $lines = append $lines (printf "%s  %s.bpf.o" ($b64 | toString | nospace | b64dec | sha256sum) $name) -}}
{{- end -}}
{{- range .Values.userPrograms.allowedDigests -}}
{{- $lines = append $lines (printf "%s  allowedDigests" (trimPrefix "sha256:" . | lower)) -}}
{{- end -}}
{{- printf "# The objects the exporter may load (sha256sum format).\n%s\n" (join "\n" $lines) -}}
{{- end -}}
{{- end -}}

{{/* The image: <repository>@<digest> when image.digest is set, else <repository>:<tag>. */}}
{{- define "kernel-exporter.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{/*
The labels of helm test's objects: the chart's, but not its selector's
(the DaemonSet, the Service and the monitors must not take the test pod
for an exporter).
*/}}
{{- define "kernel-exporter.testLabels" -}}
app.kubernetes.io/name: {{ include "kernel-exporter.name" . }}-test
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: test
app.kubernetes.io/part-of: kernel-exporter
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}
