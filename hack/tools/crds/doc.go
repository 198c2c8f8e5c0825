// Package crds pins the Go types the third-party CRDs of the chart tests are rendered from;
// it is never built into anything.
package crds

import _ "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
