//go:build tools

// Package tools pins upstream's end-to-end suites and their test-only dependencies in this
// module's go.mod and go.sum, so `go test -c sigs.k8s.io/karpenter/test/suites/...` builds
// them from the module cache. It is never compiled.
package tools

import (
	_ "github.com/onsi/ginkgo/v2"
	_ "github.com/onsi/gomega"
	_ "sigs.k8s.io/karpenter/test/pkg/environment/common"
)
