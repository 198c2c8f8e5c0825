#!/usr/bin/env bash
# Gives a NodeClaim's taints and startup taints the key and value syntax in its CRD schema, as
# upstream Karpenter's CRD does: NodeClaims have no validating webhook (the manager that
# creates them must not need its own webhook endpoint to launch), so the API server checks
# what it can. controller-gen cannot put markers on corev1.Taint's fields; `make manifests`
# runs this right after it. Idempotent.
set -euo pipefail
key='^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$'
value='^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$'
for crd in "$@"; do
  awk -v key="$key" -v value="$value" '
    function indent(s) { match(s, /^ */); return substr(s, 1, RLENGTH) }
    # After the type line of a taint key or value, add the pattern unless it is there.
    pending != "" && /^ *type: string$/ {
      print
      ind = indent($0)
      getline nxt
      if (nxt !~ /^ *(pattern|maxLength|minLength):/) {
        if (pending == "key") { print ind "maxLength: 316"; print ind "minLength: 1"; print ind "pattern: " key }
        else { print ind "maxLength: 63"; print ind "pattern: " value }
      }
      print nxt
      pending = ""
      next
    }
    /description: Required. The taint key to be applied to a node.$/ { pending = "key" }
    /description: The taint value corresponding to the taint key.$/ { pending = "value" }
    { print }
  ' "$crd" > "$crd.tmp"
  mv "$crd.tmp" "$crd"
done
