#!/usr/bin/env bash
# Adds the conversion webhook stanza to the CRDs that serve v1beta1 and v1 (v1 is the hub and
# storage version). controller-gen cannot express it; `make manifests` runs this right after
# controller-gen, so the committed bases are complete on their own. The service reference
# uses kubebuilder's placeholders (webhook-service in namespace system), which config/default
# rewrites to the deployed names, and which the self-signed mode and envtest replace.
set -euo pipefail
for crd in "$@"; do
  grep -q '^  conversion:' "$crd" && continue
  awk '
    /^  group: / && !done {
      print "  conversion:"
      print "    strategy: Webhook"
      print "    webhook:"
      print "      clientConfig:"
      print "        service:"
      print "          name: webhook-service"
      print "          namespace: system"
      print "          path: /convert"
      print "      conversionReviewVersions:"
      print "      - v1"
      done = 1
    }
    { print }
  ' "$crd" > "$crd.tmp"
  mv "$crd.tmp" "$crd"
done
