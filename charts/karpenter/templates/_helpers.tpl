{{/* The release's full name: the Service, the ServiceAccount and RBAC carry it. */}}
{{- define "karpenter.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "karpenter.selectorLabels" -}}
app.kubernetes.io/name: {{ default .Chart.Name .Values.nameOverride }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "karpenter.labels" -}}
{{ include "karpenter.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "karpenter.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "karpenter.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "karpenter.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}
{{- end -}}

{{- define "karpenter.certSecret" -}}
{{ include "karpenter.fullname" . }}-webhook-cert
{{- end -}}

{{/* cert-manager injects the webhook's CA into the configuration it annotates. */}}
{{- define "karpenter.webhookAnnotations" -}}
{{- if eq .Values.webhook.certMode "cert-manager" -}}
cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/{{ include "karpenter.fullname" . }}-webhook
{{- end -}}
{{- end -}}

{{/*
The webhook clientConfig's caBundle: none in Git. In self-signed mode the controller
injects it, with cert-manager cert-manager's cainjector does.
*/}}
{{- define "karpenter.caBundle" -}}
{{- end -}}
