{{/* The release's name for every object; roles append -edge, -worker, -coordinator. */}}
{{- define "relay.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels of every object. */}}
{{- define "relay.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Selector labels of one role's pods; call with (dict "root" $ "role" "edge"). */}}
{{- define "relay.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .role }}
{{- end -}}

{{- define "relay.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* Where the pods find their files. */}}
{{- define "relay.configDir" -}}/etc/relay/config{{- end -}}
{{- define "relay.secretDir" -}}/etc/relay/secret{{- end -}}

{{/*
The configuration of one role, as YAML (configs/README.md): what every
role shares (log, nats, streams, providers, models) and the role's own
section. Provider keys are files of the Secret (api_keys_file), so the
edge, which needs none, never sees them.
*/}}
{{- define "relay.config" -}}
{{- $v := .root.Values -}}
{{- $nats := dict "url" $v.nats.url -}}
{{- if $v.nats.credsSecret -}}
{{- $_ := set $nats "creds_file" "/etc/relay/nats/nats.creds" -}}
{{- end -}}
{{- $providers := list -}}
{{- range $v.providers -}}
{{- $p := deepCopy . -}}
{{- if and (ne $.role "edge") (hasKey $v.secret.providerKeys .name) -}}
{{- $_ := set $p "api_keys_file" (printf "%s/provider-%s" (include "relay.secretDir" $.root) .name) -}}
{{- end -}}
{{- $providers = append $providers $p -}}
{{- end -}}
{{- $cfg := dict "log" $v.log "nats" $nats "streams" $v.streams "providers" $providers -}}
{{- if $v.models -}}
{{- $_ := set $cfg "models" $v.models -}}
{{- end -}}
{{- if eq .role "edge" -}}
{{- $_ := set $cfg "edge" (merge (dict "listen" (printf "0.0.0.0:%d" (int $v.edge.port)) "ops_listen" (printf "127.0.0.1:%d" (int $v.edge.opsPort)) "allow_anonymous" $v.edge.allowAnonymous) (deepCopy $v.edge.config)) -}}
{{- else if eq .role "worker" -}}
{{- $_ := set $cfg "worker" (merge (dict "listen" (printf "127.0.0.1:%d" (int $v.worker.port)) "drain_timeout" (printf "%ds" (int $v.worker.drainTimeoutSeconds))) (deepCopy $v.worker.config)) -}}
{{- else -}}
{{- $_ := set $cfg "coordinator" (merge (dict "listen" (printf "127.0.0.1:%d" (int $v.coordinator.port))) (deepCopy $v.coordinator.config)) -}}
{{- end -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/* The Secret's key of a provider's API keys file. */}}
{{- define "relay.providerKey" -}}provider-{{ . }}{{- end -}}


{{/*
Whether a role's ops listener (/healthz, /readyz, /metrics, without
authentication) is bound to the pod's IP rather than to loopback: the
worker's and the coordinator's, only for the ServiceMonitor to scrape.
The edge's stays on loopback; its metrics are scraped on its API port,
with an operator's key.
*/}}
{{- define "relay.opsOnPodIP" -}}
{{- if and (ne .role "edge") .root.Values.serviceMonitor.enabled -}}true{{- end -}}
{{- end -}}

{{/* The port of a role's ops listener. */}}
{{- define "relay.opsPort" -}}
{{- if eq .role "edge" -}}{{ .root.Values.edge.opsPort }}{{- else -}}{{ (index .root.Values .role).port }}{{- end -}}
{{- end -}}
