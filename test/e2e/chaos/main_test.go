// Package chaos holds the promises the manager keeps while its own process, the API server,
// etcd and the cloud fail under it, on a local cluster of its own: two managers under
// leader election (Lease kube-system/karpenter-leader-election), restarted when they die
// as a Deployment's kubelet would, as `make run MANAGERS=2` runs them.
//
// The suite's short form runs inside `make test`; `make chaos` runs it at full size
// (-chaos.full: 500 pods, more faults). Every run prints its seed; -chaos.seed replays one.
// It must not be run against a cluster that matters: it kills and restarts its processes.
package chaos

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/karpenter-policy/karpenter/api/install"
	"github.com/karpenter-policy/karpenter/test/cluster"
	"github.com/karpenter-policy/karpenter/test/env"
)

var (
	full = flag.Bool("chaos.full", false, "run at full size (make chaos): 500 pods, more kills")
	seed = flag.Int64("chaos.seed", 0, "seed of the fault schedule; 0 picks one from the clock")

	local *cluster.Cluster
	kube  client.Client
	// watchClient also watches.
	watchClient client.WithWatch
	// managerBin is the manager binary the suite built.
	managerBin string
	// restartDelay is how long a killed manager stays down.
	restartDelay atomic.Int64
)

// managers is how many managers the suite runs.
const managers = 2

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctrllog.SetLogger(logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	bins := os.Getenv("KUBEBUILDER_ASSETS")
	if bins == "" {
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set: run the suite with 'make e2e' or 'make chaos'")
		return 1
	}
	dir, err := os.MkdirTemp("", "karpenter-chaos")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := 1
	defer func() {
		if code == 0 {
			os.RemoveAll(dir)
		} else {
			fmt.Fprintln(os.Stderr, "logs kept in", filepath.Join(dir, "cluster", "logs"))
		}
	}()
	ctx := context.Background()
	managerBin = filepath.Join(dir, "karpenter") // where StartWithManager builds it
	if local, _, err = cluster.StartWithManager(ctx, cluster.ManagedOptions{Dir: dir, BinDir: bins, RepoRoot: env.RepoRoot(), Managers: managers}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := local.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	var names []string
	for i := range managers {
		names = append(names, cluster.ManagerName(i, managers))
	}
	// A killed manager comes back after restartDelay: what a Deployment does, without the
	// kubelet's growing backoff that would only make the suite slower.
	restartDelay.Store(int64(time.Second))
	local.Supervise(names, func(int) time.Duration { return time.Duration(restartDelay.Load()) }, func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, time.Now().Format(time.TimeOnly)+" supervisor: "+format+"\n", args...)
	})
	if kube, err = client.New(local.Config, client.Options{Scheme: install.NewScheme()}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if watchClient, err = client.NewWithWatch(local.Config, client.Options{Scheme: install.NewScheme()}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code = m.Run()
	if code != 0 {
		for _, n := range names {
			fmt.Fprintf(os.Stderr, "%s log:\n%s\n", n, local.LogTail(n, 40))
		}
	}
	return code
}
