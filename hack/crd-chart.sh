#!/usr/bin/env bash
# Copies the generated CRDs into charts/karpenter-crd/templates, pointing their conversion
# webhook at the chart's values instead of kubebuilder's placeholders (the karpenter chart's
# Service, or webhook.url for a controller running outside the cluster). `make manifests` runs
# it, so the chart never drifts from config/crd/bases.
set -euo pipefail
cd "$(dirname "$0")/.."
out=charts/karpenter-crd/templates
rm -f "$out"/*.yaml
for crd in config/crd/bases/*.yaml; do
  awk '
    /^    controller-gen.kubebuilder.io\/version: / { print; print "    {{- if .Values.webhook.certManager.enabled }}"; print "    cert-manager.io/inject-ca-from: {{ .Values.webhook.serviceNamespace | default .Release.Namespace }}/{{ .Values.webhook.serviceName }}-webhook"; print "    {{- end }}"; next }
    /^        service:$/                { print "        {{- if .Values.webhook.url }}"; print "        url: {{ trimSuffix \"/\" .Values.webhook.url }}/convert"; print "        {{- else }}"; print; next }
    /^          path: \/convert$/        { print; print "        {{- end }}"; next }
    /^          name: webhook-service$/ { print "          name: {{ .Values.webhook.serviceName }}"; next }
    /^          namespace: system$/     { print "          namespace: {{ .Values.webhook.serviceNamespace | default .Release.Namespace }}"; print "          port: {{ .Values.webhook.port }}"; next }
    { print }
  ' "$crd" > "$out/$(basename "$crd")"
done
