{{/*
TLS and credentials towards NATS (every tier) and Redis (builder and edge: call with
(dict "root" $ "redis" true)). Certificates come from Secrets mounted read-only under
/etc/shoal/<server>-tls; a .creds file from one under /etc/shoal/nats-auth; passwords
and tokens only into environment variables (SHOAL_NATS_PASSWORD, SHOAL_NATS_TOKEN,
SHOAL_REDIS_PASSWORD), never into args. All off by default.
*/}}
{{- define "shoal.transportArgs" -}}
{{- $nats := .root.Values.nats -}}
{{- if $nats.tls.enabled }}
- --nats-tls-ca
- /etc/shoal/nats-tls/{{ $nats.tls.caKey }}
{{- if $nats.tls.certKey }}
- --nats-tls-cert
- /etc/shoal/nats-tls/{{ $nats.tls.certKey }}
- --nats-tls-key
- /etc/shoal/nats-tls/{{ required "nats.tls.keyKey is required with nats.tls.certKey" $nats.tls.keyKey }}
{{- end }}
{{- end }}
{{- if $nats.auth.user }}
- --nats-user
- {{ $nats.auth.user | quote }}
{{- end }}
{{- if $nats.auth.credsKey }}
- --nats-creds
- /etc/shoal/nats-auth/{{ $nats.auth.credsKey }}
{{- end }}
{{- if .redis }}
{{- $redis := .root.Values.redis -}}
{{- if $redis.tls.enabled }}
- --redis-tls-ca
- /etc/shoal/redis-tls/{{ $redis.tls.caKey }}
{{- if $redis.tls.certKey }}
- --redis-tls-cert
- /etc/shoal/redis-tls/{{ $redis.tls.certKey }}
- --redis-tls-key
- /etc/shoal/redis-tls/{{ required "redis.tls.keyKey is required with redis.tls.certKey" $redis.tls.keyKey }}
{{- end }}
{{- end }}
{{- if $redis.auth.username }}
- --redis-username
- {{ $redis.auth.username | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{/* An env var from a key of a Secret; call with (list "VAR" "what" secretName key). */}}
{{- define "shoal.secretEnv" -}}
- name: {{ index . 0 }}
  valueFrom:
    secretKeyRef:
      name: {{ required (printf "%s.secretName is required with its keys" (index . 1)) (index . 2) }}
      key: {{ index . 3 }}
{{- end -}}

{{- define "shoal.transportEnv" -}}
{{- with .root.Values.nats.auth }}
{{- if .passwordKey }}
{{ include "shoal.secretEnv" (list "SHOAL_NATS_PASSWORD" "nats.auth" .secretName .passwordKey) }}
{{- end }}
{{- if .tokenKey }}
{{ include "shoal.secretEnv" (list "SHOAL_NATS_TOKEN" "nats.auth" .secretName .tokenKey) }}
{{- end }}
{{- end }}
{{- if .redis }}
{{- with .root.Values.redis.auth }}
{{- if .passwordKey }}
{{ include "shoal.secretEnv" (list "SHOAL_REDIS_PASSWORD" "redis.auth" .secretName .passwordKey) }}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The Secrets holding files: (name, secret) pairs, mounted under /etc/shoal/<name>. */}}
{{- define "shoal.transportSecrets" -}}
{{- $nats := .root.Values.nats -}}
{{- if $nats.tls.enabled }}
nats-tls: {{ required "nats.tls.secretName is required with nats.tls.enabled" $nats.tls.secretName }}
{{- end }}
{{- if $nats.auth.credsKey }}
nats-auth: {{ required "nats.auth.secretName is required with nats.auth.credsKey" $nats.auth.secretName }}
{{- end }}
{{- if and .redis .root.Values.redis.tls.enabled }}
redis-tls: {{ required "redis.tls.secretName is required with redis.tls.enabled" .root.Values.redis.tls.secretName }}
{{- end }}
{{- end -}}

{{- define "shoal.transportMounts" -}}
{{- range $name, $secret := include "shoal.transportSecrets" . | fromYaml }}
- name: {{ $name }}
  mountPath: /etc/shoal/{{ $name }}
  readOnly: true
{{- end }}
{{- end -}}

{{- define "shoal.transportVolumes" -}}
{{- range $name, $secret := include "shoal.transportSecrets" . | fromYaml }}
- name: {{ $name }}
  secret:
    secretName: {{ $secret }}
{{- end }}
{{- end -}}
