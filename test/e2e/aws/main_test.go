// Package aws runs the stack of `make run-aws` end to end: the local cluster, the AWS
// emulator seeded for the cluster "local", the manager with --cloud-provider=aws against it,
// and the kubelet player registering a Node per running instance; it applies
// config/samples/aws and checks what a user would see on EC2 and in the cluster.
package aws

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/karpenter-policy/karpenter/api/install"
	"github.com/karpenter-policy/karpenter/hack/local-up/ec2kubelet"
	awsprovider "github.com/karpenter-policy/karpenter/providers/aws"
	"github.com/karpenter-policy/karpenter/test/awsemu"
	"github.com/karpenter-policy/karpenter/test/cluster"
	"github.com/karpenter-policy/karpenter/test/env"
)

const clusterName = "local"

var (
	local    *cluster.Cluster
	kube     client.Client
	emulator *awsemu.Emulator
	clients  *awsprovider.Clients
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctrllog.SetLogger(logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	bins := os.Getenv("KUBEBUILDER_ASSETS")
	if bins == "" {
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set: run the suite with 'make e2e'")
		return 1
	}
	dir, err := os.MkdirTemp("", "karpenter-e2e-aws")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if emulator, err = awsemu.Launch(clusterName, "--region", "us-west-2"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer emulator.Stop()
	for k, v := range awsemu.Environment() {
		os.Setenv(k, v)
	}
	ctx := context.Background()
	if local, _, err = cluster.StartWithManager(ctx, cluster.ManagedOptions{Dir: dir, BinDir: bins, RepoRoot: env.RepoRoot(),
		Provider: func(apiServerURL string) ([]string, []string) { return emulator.Manager(clusterName, apiServerURL) }}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := local.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	if kube, err = client.New(local.Config, client.Options{Scheme: install.NewScheme()}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if clients, err = awsprovider.NewClients(ctx, awsprovider.Settings{ClusterName: clusterName, Region: emulator.Region, Endpoint: emulator.Endpoint}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	kubeletCtx, stopKubelet := context.WithCancel(ctx)
	defer stopKubelet()
	// The nodes join only if their user data names this API server and carries its CA.
	k := &ec2kubelet.Kubelet{EC2: clients.EC2, Kube: kube, Cluster: clusterName, ClusterEndpoint: local.APIServerURL, CA: local.Config.CAData, Log: func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, format+"\n", args...)
	}}
	go k.Run(kubeletCtx, time.Second)
	if err := cluster.Apply(ctx, local.Config, filepath.Join(env.RepoRoot(), "config", "samples", "aws")); err != nil {
		fmt.Fprintln(os.Stderr, "applying the samples:", err)
		return 1
	}
	code := m.Run()
	if code != 0 {
		fmt.Fprintln(os.Stderr, "manager log:\n"+local.LogTail("karpenter", 60))
	}
	return code
}
