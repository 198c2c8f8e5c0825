package aws_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/karpenter-policy/karpenter/test/awsemu"
)

// emulator is the package's local AWS (moto, seeded with cluster "local"), shared by its
// tests: each names what it creates, so they do not meet.
var emulator *awsemu.Emulator

func TestMain(m *testing.M) {
	e, err := awsemu.Launch("local")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for k, v := range awsemu.Environment() {
		os.Setenv(k, v)
	}
	emulator = e
	code := m.Run()
	e.Stop()
	os.Exit(code)
}
