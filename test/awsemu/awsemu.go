// Package awsemu starts the local AWS of the AWS provider's tests: moto on loopback, seeded by
// hack/aws-emulator/emulator.py with EKS's AMI parameters and, optionally, a cluster's VPC,
// subnets, security group, node role and interruption queue. Tests reach it through the real
// aws-sdk-go-v2 with BaseEndpoint set; nothing here stands in for the SDK.
package awsemu

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/karpenter-policy/karpenter/test/env"
)

// Emulator is a running emulator.
type Emulator struct {
	Endpoint string            `json:"endpoint"`
	Region   string            `json:"region"`
	AMIs     map[string]string `json:"amis"`
	Cluster  *Cluster          `json:"cluster"`
	cmd      *exec.Cmd
}

// Cluster is what the emulator created for a cluster.
type Cluster struct {
	VPC           string   `json:"vpc"`
	Subnets       []string `json:"subnets"`
	SecurityGroup string   `json:"securityGroup"`
	Role          string   `json:"role"`
	Queue         string   `json:"queue"`
	QueueURL      string   `json:"queueURL"`
}

// Start runs the emulator until the test ends; with cluster set it seeds that cluster. It
// sets the SDK's environment for the test: static test credentials, no instance metadata.
func Start(t testing.TB, cluster string, extra ...string) *Emulator {
	t.Helper()
	e, err := Launch(cluster, extra...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	for k, v := range Environment() {
		t.Setenv(k, v)
	}
	return e
}

// Environment is what the SDK needs to talk to the emulator: static credentials and no
// instance metadata lookups (which would wait for a timeout off EC2).
func Environment() map[string]string {
	return map[string]string{"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_EC2_METADATA_DISABLED": "true"}
}

// Launch starts the emulator and waits for its ready line; Stop ends it.
func Launch(cluster string, extra ...string) (*Emulator, error) {
	args := []string{filepath.Join(env.RepoRoot(), "hack", "aws-emulator", "emulator.py")}
	if cluster != "" {
		args = append(args, "--seed-cluster", cluster)
	}
	args = append(args, extra...)
	cmd := exec.Command("python3", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the AWS emulator (python3 with moto): %w", err)
	}
	lines := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(stdout)
		s.Buffer(make([]byte, 1<<20), 1<<20)
		if s.Scan() {
			lines <- s.Text()
		}
		close(lines)
	}()
	select {
	case line, ok := <-lines:
		if !ok {
			_ = cmd.Wait()
			return nil, fmt.Errorf("the AWS emulator exited before it was ready:\n%s", stderr.String())
		}
		e := &Emulator{cmd: cmd}
		if err := json.Unmarshal([]byte(line), e); err != nil {
			e.Stop()
			return nil, fmt.Errorf("the AWS emulator's ready line %q: %w", line, err)
		}
		return e, nil
	case <-time.After(90 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		return nil, fmt.Errorf("the AWS emulator was not ready in 90s:\n%s", stderr.String())
	}
}

// Stop ends the emulator.
func (e *Emulator) Stop() {
	if e.cmd == nil || e.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-e.cmd.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = e.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-e.cmd.Process.Pid, syscall.SIGKILL)
	}
}

// Manager are the manager's flags and environment for running with --cloud-provider=aws on
// this emulator, for the cluster it seeded: its name, region and interruption queue, the API
// server nodes join, and the SDK pointed at the emulator (AWS_ENDPOINT_URL).
func (e *Emulator) Manager(cluster, apiServer string) (args, environ []string) {
	args = []string{"--cloud-provider=aws", "--cluster-name=" + cluster, "--cluster-endpoint=" + apiServer, "--aws-region=" + e.Region}
	if e.Cluster != nil && e.Cluster.Queue != "" {
		args = append(args, "--interruption-queue="+e.Cluster.Queue)
	}
	environ = []string{"AWS_ENDPOINT_URL=" + e.Endpoint, "AWS_REGION=" + e.Region}
	for k, v := range Environment() {
		environ = append(environ, k+"="+v)
	}
	return args, environ
}
