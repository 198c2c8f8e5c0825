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

{{- define "karpenter.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "karpenter.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "karpenter.labels" -}}
{{ include "karpenter.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- with .Values.additionalLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* additionalAnnotations, as a metadata.annotations block (nothing when empty). */}}
{{- define "karpenter.annotations" -}}
{{- with .Values.additionalAnnotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* The controller image: the deprecated image.* values win over controller.image when set. */}}
{{- define "karpenter.image" -}}
{{- $img := merge (deepCopy (.Values.image | default dict)) .Values.controller.image -}}
{{- if $img.digest -}}
{{ $img.repository }}@{{ $img.digest }}
{{- else -}}
{{ $img.repository }}:{{ default .Chart.AppVersion $img.tag }}
{{- end -}}
{{- end -}}

{{- define "karpenter.imagePullPolicy" -}}
{{- (.Values.image | default dict).pullPolicy | default .Values.imagePullPolicy -}}
{{- end -}}

{{/* The cluster's name: the deprecated aws.clusterName wins over settings.clusterName. */}}
{{- define "karpenter.clusterName" -}}
{{- .Values.aws.clusterName | default .Values.settings.clusterName -}}
{{- end -}}

{{/* cloudProvider, or aws when a cluster name is set, else kwok. */}}
{{- define "karpenter.cloudProvider" -}}
{{- if .Values.cloudProvider -}}
{{- .Values.cloudProvider -}}
{{- else if include "karpenter.clusterName" . -}}
aws
{{- else -}}
kwok
{{- end -}}
{{- end -}}

{{/* FEATURE_GATES: settings.featureGates by upstream's names, then the deprecated featureGates string (a later gate wins). */}}
{{- define "karpenter.featureGates" -}}
{{- $g := .Values.settings.featureGates -}}
{{- $parts := list -}}
{{- range $name := list "NodeRepair" "ReservedCapacity" "SpotToSpotConsolidation" "NodeOverlay" "StaticCapacity" "CapacityBuffer" "TerminateFirstDrift" "TerminateFirstRepair" "PodDeletionCostManagement" -}}
{{- $k := printf "%s%s" (lower (substr 0 1 $name)) (substr 1 (len $name) $name) -}}
{{- if hasKey $g $k -}}
{{- $parts = append $parts (printf "%s=%t" $name (index $g $k)) -}}
{{- end -}}
{{- end -}}
{{- with .Values.featureGates -}}
{{- $parts = append $parts . -}}
{{- end -}}
{{- join "," $parts -}}
{{- end -}}

{{/* Pod (anti-)affinity terms: a term without a labelSelector selects the controller's pods, as upstream's chart does. */}}
{{- define "karpenter.podAffinityTerms" -}}
{{- $root := index . 0 -}}
{{- $a := index . 1 -}}
{{- $out := dict -}}
{{- with $a.requiredDuringSchedulingIgnoredDuringExecution -}}
{{- $terms := list -}}
{{- range . -}}
{{- $t := deepCopy . -}}
{{- if not (hasKey $t "labelSelector") -}}
{{- $_ := set $t "labelSelector" (dict "matchLabels" (include "karpenter.selectorLabels" $root | fromYaml)) -}}
{{- end -}}
{{- $terms = append $terms $t -}}
{{- end -}}
{{- $_ := set $out "requiredDuringSchedulingIgnoredDuringExecution" $terms -}}
{{- end -}}
{{- with $a.preferredDuringSchedulingIgnoredDuringExecution -}}
{{- $terms := list -}}
{{- range . -}}
{{- $t := deepCopy . -}}
{{- if not (hasKey $t.podAffinityTerm "labelSelector") -}}
{{- $_ := set $t.podAffinityTerm "labelSelector" (dict "matchLabels" (include "karpenter.selectorLabels" $root | fromYaml)) -}}
{{- end -}}
{{- $terms = append $terms $t -}}
{{- end -}}
{{- $_ := set $out "preferredDuringSchedulingIgnoredDuringExecution" $terms -}}
{{- end -}}
{{- toYaml $out -}}
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
