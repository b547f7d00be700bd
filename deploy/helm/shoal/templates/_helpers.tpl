{{/*
Names: the release name when it already says "shoal" (helm install shoal ...), else
<release>-shoal; each tier's objects are <fullname>-<tier> (shoal-edge, shoal-ingest).
*/}}
{{- define "shoal.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* <fullname>-<tier>; call with (dict "root" $ "tier" "edge"). */}}
{{- define "shoal.tierName" -}}
{{- printf "%s-%s" (include "shoal.fullname" .root) .tier | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels that select one tier's pods; they never change across upgrades. */}}
{{- define "shoal.selectorLabels" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .tier }}
{{- end -}}

{{/* Every object's labels. */}}
{{- define "shoal.labels" -}}
{{ include "shoal.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: shoal
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "shoal.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{/* The admin HTTP port every tier serves: /metrics, /healthz/ready, /debug/*. */}}
{{- define "shoal.httpPort" -}}15014{{- end -}}

{{/* Flags every tier takes the same way. */}}
{{- define "shoal.commonArgs" -}}
- --http-addr
- 0.0.0.0:{{ include "shoal.httpPort" .root }}
- --drain-grace
- {{ printf "%ds" (int .values.drainGraceSeconds) }}
- --nats-config-max-bytes
- {{ int64 .root.Values.nats.configMaxBytes | quote }}
- --nats-push-max-bytes
- {{ int64 .root.Values.nats.pushMaxBytes | quote }}
{{- end -}}

{{/*
Pod template metadata shared by the tiers: labels and Prometheus scrape annotations for
the admin port.
*/}}
{{- define "shoal.podMetadata" -}}
labels:
  {{- include "shoal.labels" . | nindent 2 }}
  {{- with .root.Values.podLabels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
annotations:
  prometheus.io/scrape: "true"
  prometheus.io/port: {{ include "shoal.httpPort" .root | quote }}
  prometheus.io/path: /metrics
  {{- with .root.Values.podAnnotations }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end -}}

{{/* The admin port, and probes on it. */}}
{{- define "shoal.httpPortSpec" -}}
- name: http-monitoring
  containerPort: {{ include "shoal.httpPort" . }}
  protocol: TCP
{{- end -}}

{{/*
Readiness is /healthz/ready: ready once the tier serves (ingest: its first lists are
published; edge: a snapshot is served); not ready again from SIGTERM. Liveness only asks
that the admin server answers: a tier waiting on NATS or Redis is not helped by a
restart, and an edge restarted while it cannot sync would drop the proxies it still
serves from its last snapshot.
*/}}
{{- define "shoal.probes" -}}
readinessProbe:
  httpGet:
    path: /healthz/ready
    port: http-monitoring
  periodSeconds: 5
  failureThreshold: 3
livenessProbe:
  httpGet:
    path: /metrics
    port: http-monitoring
  initialDelaySeconds: 10
  periodSeconds: 10
  failureThreshold: 6
{{- end -}}

{{- define "shoal.commonEnv" -}}
- name: RUST_LOG
  value: {{ .root.Values.logLevel | quote }}
- name: SHOAL_LOG_FORMAT
  value: {{ .root.Values.logFormat | quote }}
{{- with .values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Scheduling knobs of one tier. */}}
{{- define "shoal.scheduling" -}}
{{- with .values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
Replicas of a tier spread across nodes and zones, so one node's loss takes only its
share (of builders; of edges and so of proxies). A preference: a small cluster still runs
every replica.
*/}}
{{- define "shoal.topologySpread" -}}
{{- if .values.topologySpread -}}
topologySpreadConstraints:
  {{- range list "kubernetes.io/hostname" "topology.kubernetes.io/zone" }}
  - maxSkew: 1
    topologyKey: {{ . }}
    whenUnsatisfiable: ScheduleAnyway
    labelSelector:
      matchLabels:
        {{- include "shoal.selectorLabels" $ | nindent 8 }}
  {{- end }}
{{- end -}}
{{- end -}}
