{{/*
Sharding (sharding.enabled): names and labels of the sharder, which runs as its own Deployment
of the upstream image (github.com/timebertt/kubernetes-controller-sharding).
*/}}

{{/* The ring the manager's --shard joins: the manager names it in code, so it is not the release's. */}}
{{- define "flexsite.controllerRing" -}}flexsite{{- end }}

{{/* The ring's MutatingWebhookConfiguration: upstream names it controllerring-<ring>. */}}
{{- define "flexsite.sharderWebhookConfig" -}}controllerring-{{ include "flexsite.controllerRing" . }}{{- end }}

{{- define "flexsite.sharderName" -}}{{ include "flexsite.fullname" . | trunc 55 | trimSuffix "-" }}-sharder{{- end }}

{{/*
The sharder's pods must not carry the manager's selector labels (name and instance), or the
manager's Services, PodDisruptionBudget and NetworkPolicy would select them too: their name is
upstream's, controller-sharding.
*/}}
{{- define "flexsite.sharderSelectorLabels" -}}
app.kubernetes.io/name: controller-sharding
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: sharder
{{- end }}

{{- define "flexsite.sharderLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "flexsite.sharderSelectorLabels" . }}
app.kubernetes.io/version: {{ .Values.sharding.sharder.image.tag | quote }}
app.kubernetes.io/part-of: {{ include "flexsite.name" . }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The Secret holding the sharder webhook server's certificate (tls.crt, tls.key). */}}
{{- define "flexsite.sharderWebhookSecretName" -}}
{{- if .Values.webhook.certManager.enabled }}{{ include "flexsite.sharderName" . }}-webhook-cert
{{- else }}{{ required "sharding.sharder.webhook.secretName is required when sharding.enabled and webhook.certManager.enabled is false" .Values.sharding.sharder.webhook.secretName }}
{{- end }}
{{- end }}

{{/*
flexsite.sharderConfig: the sharder's SharderConfig (config.sharding.timebertt.dev/v1alpha1,
upstream's config/sharder/config.yaml). Its defaults name the sharding-system namespace for the
leader Lease and the webhook Service; here both are the release's. The sharder writes the
MutatingWebhookConfiguration controllerring-<ring> itself, with this clientConfig and these
annotations: cert-manager injects the CA into it as into Flexsite's own webhook configurations,
else the clientConfig carries the CA.
*/}}
{{- define "flexsite.sharderConfig" -}}
{{- $sharder := include "flexsite.sharderName" . }}
{{- $caBundle := .Values.sharding.sharder.webhook.caBundle | default .Values.webhook.caBundle -}}
apiVersion: config.sharding.timebertt.dev/v1alpha1
kind: SharderConfig
clientConnection:
  qps: {{ .Values.sharding.sharder.clientConnection.qps }}
  burst: {{ .Values.sharding.sharder.clientConnection.burst }}
leaderElection:
  leaderElect: true
  resourceName: {{ $sharder }}
  resourceNamespace: {{ .Release.Namespace }}
controller:
  sharder:
    syncPeriod: {{ .Values.sharding.sharder.syncPeriod }}
webhook:
  config:
    {{- if .Values.webhook.certManager.enabled }}
    annotations:
      cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/{{ $sharder }}-webhook-cert
    {{- end }}
    clientConfig:
      service:
        name: {{ $sharder }}
        namespace: {{ .Release.Namespace }}
        port: 443
      {{- if not .Values.webhook.certManager.enabled }}
      caBundle: {{ required "sharding.sharder.webhook.caBundle (or webhook.caBundle) is required when sharding.enabled and webhook.certManager.enabled is false" $caBundle }}
      {{- end }}
{{- end }}

{{/*
The controller tier (sharding.enabled, docs/scale.md "Two tiers"): the per-site reconcilers as
shards of the ring, in a Deployment of their own. Its pods must not carry the API tier's
selector labels (name and instance), or the API's Services, PodDisruptionBudget and
NetworkPolicy would select them too: their name is <name>-controllers.
*/}}
{{- define "flexsite.controllersName" -}}{{ include "flexsite.fullname" . | trunc 51 | trimSuffix "-" }}-controllers{{- end }}

{{- define "flexsite.controllersSelectorLabels" -}}
app.kubernetes.io/name: {{ include "flexsite.name" . }}-controllers
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controllers
{{- end }}

{{- define "flexsite.controllersLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "flexsite.controllersSelectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: {{ include "flexsite.name" . }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}
