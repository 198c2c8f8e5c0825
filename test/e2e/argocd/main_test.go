// Package argocd runs the stack of `make run-argocd` end to end: the local cluster with the
// manager on the kwok provider, a Git repository seeded with the samples, and ArgoCD's own
// application controller and repo server syncing one Application from it; it checks what a
// platform team relies on: Git changes reach the cluster, the Application stays Synced while
// the cluster works, a change the API server refuses fails the sync and leaves the cluster as
// it was, and a NodePool deleted from Git is pruned.
package argocd

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/karpenter-policy/karpenter/api/install"
	"github.com/karpenter-policy/karpenter/hack/local-up/gitops"
	"github.com/karpenter-policy/karpenter/test/cluster"
	"github.com/karpenter-policy/karpenter/test/env"
)

var (
	local *cluster.Cluster
	kube  client.Client
	stack *gitops.Stack
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
	root := env.RepoRoot()
	tools := gitops.Options{RepoRoot: root}
	if err := tools.FindTools(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dir, err := os.MkdirTemp("", "karpenter-e2e-argocd")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	if local, _, err = cluster.StartWithManager(ctx, cluster.ManagedOptions{Dir: dir, BinDir: bins, RepoRoot: root}); err != nil {
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
	if err := cluster.Apply(ctx, local.Config, filepath.Join(root, "config", "samples", "30-deployment.yaml")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	tools.Dir, tools.Log = dir, func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }
	stack, err = gitops.Start(ctx, local, kube, tools)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = stack.Stop() }()
	// A client whose REST mapper knows ArgoCD's kinds, installed above.
	if kube, err = client.New(local.Config, client.Options{Scheme: install.NewScheme()}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	if code != 0 {
		for _, p := range []string{"argocd-application-controller", "argocd-repo-server", "karpenter"} {
			fmt.Fprintf(os.Stderr, "%s log:\n%s\n", p, local.LogTail(p, 40))
		}
	}
	return code
}
