// Package cel_test checks the CRDs' OpenAPI schemas and CEL rules on a real kube-apiserver:
// each invalid object must be rejected with the offending field named.
package cel_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/karpenter-policy/karpenter/test/env"
)

var testEnv *env.Environment

func TestMain(m *testing.M) {
	var err error
	testEnv, err = env.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := testEnv.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping envtest:", err)
	}
	os.Exit(code)
}
