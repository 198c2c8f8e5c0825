#!/usr/bin/env bash
# Copies the OpenReports CRDs (openreports.io/v1alpha1 Report and ClusterReport) from the
# github.com/openreports/reports-api module go.mod names into config/crd/bases, so that the
# CRD chart, make run and the test environments install the very schema the audit's Go types
# come from. `make manifests` runs it; verify fails when the copy and the module disagree.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$(go list -m -f '{{.Dir}}' github.com/openreports/reports-api)
for crd in openreports.io_reports.yaml openreports.io_clusterreports.yaml; do
  { echo "# Copied from github.com/openreports/reports-api $(go list -m -f '{{.Version}}' github.com/openreports/reports-api) (config/crd/$crd) by hack/openreports-crds.sh."
    cat "$dir/config/crd/$crd"
  } > "config/crd/bases/$crd"
done
