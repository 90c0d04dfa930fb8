{{/* The chart's name, and the release's full name (the prefix of every object's name). */}}
{{- define "flexsite.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "flexsite.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "flexsite.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "flexsite.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "flexsite.selectorLabels" -}}
app.kubernetes.io/name: {{ include "flexsite.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "flexsite.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "flexsite.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Names shared between templates. */}}
{{- define "flexsite.webhookServiceName" -}}{{ include "flexsite.fullname" . }}-webhook{{- end }}
{{- define "flexsite.webhookSecretName" -}}
{{- if .Values.webhook.certManager.enabled }}{{ include "flexsite.fullname" . }}-webhook-cert
{{- else }}{{ required "webhook.secretName is required when webhook.certManager.enabled is false" .Values.webhook.secretName }}
{{- end }}
{{- end }}

{{/*
flexsite.configObject: one object of a file that hack/sync-chart.sh copied from config/ into
files/config/, as YAML, so that the chart takes RBAC rules, webhook rules and the default rules
from the same source as `make manifests` and the kustomize installer.
Call with (list $ "files/config/<path>" "<kind>" "<name>"); it fails when the object is missing.
*/}}
{{- define "flexsite.configObject" -}}
{{- $root := index . 0 }}{{ $file := index . 1 }}{{ $kind := index . 2 }}{{ $name := index . 3 }}
{{- $found := dict }}
{{- range $doc := regexSplit "(?m)^---\\s*$" ($root.Files.Get $file) -1 }}
{{- $obj := fromYaml $doc }}
{{- if and (eq (dig "kind" "" $obj) $kind) (eq (dig "metadata" "name" "" $obj) $name) }}
{{- $found = $obj }}
{{- end }}
{{- end }}
{{- if not $found }}{{ fail (printf "%s: no %s %q (run make chart)" $file $kind $name) }}{{ end }}
{{- toYaml $found }}
{{- end }}

{{/* flexsite.configObjects: every object of such a file, as a YAML list under "items". */}}
{{- define "flexsite.configObjects" -}}
{{- $root := index . 0 }}{{ $file := index . 1 }}
{{- $items := list }}
{{- range $doc := regexSplit "(?m)^---\\s*$" ($root.Files.Get $file) -1 }}
{{- $obj := fromYaml $doc }}
{{- if dig "kind" "" $obj }}{{ $items = append $items $obj }}{{ end }}
{{- end }}
{{- if not $items }}{{ fail (printf "%s: no objects (run make chart)" $file) }}{{ end }}
{{- toYaml (dict "items" $items) }}
{{- end }}

{{/*
flexsite.publicURL: api.publicURL without a trailing slash, checked to be a scheme and a host
only; required when the ingress is on (behind TLS termination the request's Host and scheme
are the proxy's, and the OAuth callback and the hosted flow's postMessage target would be
built from them as http://).
*/}}
{{- define "flexsite.publicURL" -}}
{{- $url := .Values.api.publicURL | default "" | trimSuffix "/" }}
{{- if and .Values.api.ingress.enabled (not $url) }}
{{- fail "api.publicURL is required when api.ingress.enabled: the scheme and host households reach Flexsite at (e.g. https://flexsite.example.com); the OAuth callback, the hosted flow's postMessage target and the rewards links are built from it" }}
{{- end }}
{{- if and $url (not (regexMatch "^https?://[^/?#@\\s]+$" $url)) }}
{{- fail (printf "api.publicURL %q must be a scheme and a host only, e.g. https://flexsite.example.com" $url) }}
{{- end }}
{{- $url }}
{{- end }}
