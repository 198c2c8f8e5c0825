// Package cel_test checks the CRDs' OpenAPI schemas and CEL rules on a real kube-apiserver:
// each invalid object must be rejected with the offending field named.
package cel_test

import (
	"os"
	"testing"

	"github.com/karpenter-policy/karpenter/test/env"
)

var testEnv *env.Environment

func TestMain(m *testing.M) { os.Exit(env.Run(m, &testEnv)) }
