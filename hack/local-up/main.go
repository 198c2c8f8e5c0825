// Command local-up is `make run`: it starts the local cluster (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, kwok) on loopback with the CRDs installed, starts
// the karpenter manager against it, applies config/samples, and stays up until Ctrl-C; then
// it stops every process it started and checks that none of their ports is still bound.
//
// With -cloud-provider=aws it is `make run-aws`: it also starts the AWS emulator
// (hack/aws-emulator, seeded for the cluster "local" in us-west-2), runs the manager with
// --cloud-provider=aws against it, plays the kubelet of the instances the provider launches
// (package ec2kubelet), applies config/samples/aws, and writes the emulator's URL to
// <dir>/aws-endpoint.
//
// With -argocd it is `make run-argocd`: it also serves a Git repository seeded with the
// samples (a clone at <dir>/gitops), and runs ArgoCD's application controller and repo
// server syncing one Application from it (package gitops).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpenter-policy/karpenter/hack/local-up/ec2kubelet"
	"github.com/karpenter-policy/karpenter/hack/local-up/gitops"
	awsprovider "github.com/karpenter-policy/karpenter/providers/aws"
	"github.com/karpenter-policy/karpenter/test/awsemu"
	"github.com/karpenter-policy/karpenter/test/cluster"
)

// awsCluster is the cluster name the emulator is seeded for and config/samples/aws selects.
const awsCluster = "local"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "make run:", err)
		os.Exit(1)
	}
}

func run() error {
	dir := flag.String("dir", ".local", "state directory: kubeconfig, certificates, etcd data, logs")
	samples := flag.String("samples", "", "objects to apply once the manager runs (default config/samples, or config/samples/aws); \"none\" applies none")
	provider := flag.String("cloud-provider", "kwok", "kwok (simulated nodes) or aws (the AWS provider against a local AWS emulator)")
	argocd := flag.Bool("argocd", false, "also run ArgoCD syncing the samples from a local Git repository (make run-argocd)")
	apiPort := flag.Int("apiserver-port", 6443, "kube-apiserver port on 127.0.0.1")
	basePort := flag.Int("port-base", 17000, "first of the other ports: etcd +379/+380, kwok +10, manager metrics +80, probes +81, pprof +82, webhooks +443")
	manager := flag.String("manager", "bin/karpenter", "manager binary; empty starts none")
	kwokStages := flag.String("kwok-stages", "", "the stages kwok plays instead of config/kwok/stages.yaml")
	managers := flag.Int("managers", 1, "how many managers to run; two or more elect a leader (Lease kube-system/"+cluster.LeaderElectionLease+") and share the webhook port")
	flag.Parse()
	if *managers < 1 || *managers > 5 {
		return fmt.Errorf("-managers=%d: want 1 to 5", *managers)
	}
	if *provider != "kwok" && *provider != "aws" {
		return fmt.Errorf("-cloud-provider=%s: want kwok or aws", *provider)
	}
	switch *samples {
	case "":
		*samples = "config/samples"
		switch {
		case *provider == "aws":
			*samples = "config/samples/aws"
		case *argocd:
			*samples = "config/samples/30-deployment.yaml" // the rest comes from Git
		}
	case "none":
		*samples = ""
	}

	root, err := os.Getwd()
	if err != nil {
		return err
	}
	binDir, err := exec.Command(filepath.Join(root, "hack", "kube-binaries.sh")).Output()
	if err != nil {
		return fmt.Errorf("building the Kubernetes binaries: %w", err)
	}
	bins := strings.TrimSpace(string(binDir))
	logf := func(format string, args ...any) { fmt.Printf("==> "+format+"\n", args...) }

	opts := cluster.Options{
		Dir: *dir, BinDir: bins, RepoRoot: root, Log: logf, KwokStages: *kwokStages,
		APIServerPort: *apiPort, EtcdPort: *basePort + 379, EtcdPeerPort: *basePort + 380, KwokPort: *basePort + 10,
	}
	// Manager i's ports are +80+10i (metrics), +81+10i (probes), +82+10i (pprof); the
	// webhooks are served at +443, by the manager alone or, among several, by the cluster's
	// forwarder in front of their own ports +444+i.
	webhooks := *basePort + 443
	managerPorts := map[string]cluster.ManagerPorts{}
	var managerNames []string
	for i := range *managers {
		mp := cluster.ManagerPorts{Metrics: *basePort + 80 + 10*i, Probes: *basePort + 81 + 10*i, Pprof: *basePort + 82 + 10*i, Webhooks: webhooks}
		if *managers > 1 {
			mp.Webhooks = webhooks + 1 + i
		}
		name := cluster.ManagerName(i, *managers)
		managerPorts[name] = mp
		managerNames = append(managerNames, name)
	}
	providerArgs, providerEnv := []string{"--cloud-provider=kwok"}, []string(nil)
	var emulator *awsemu.Emulator
	if *provider == "aws" {
		logf("starting the AWS emulator (moto, seeded for cluster %q)", awsCluster)
		if emulator, err = awsemu.Launch(awsCluster, "--region", "us-west-2"); err != nil {
			return err
		}
		defer emulator.Stop()
		providerArgs, providerEnv = emulator.Manager(awsCluster, "https://127.0.0.1:"+strconv.Itoa(*apiPort))
	}
	if *manager != "" {
		opts.WebhookPort = webhooks
		for _, name := range managerNames {
			mp := managerPorts[name]
			if *managers > 1 {
				opts.WebhookBackends = append(opts.WebhookBackends, mp.Webhooks)
			}
			opts.Managers = append(opts.Managers, cluster.ManagerProcess(name, *manager, mp,
				filepath.Join(*dir, "webhook-certs", name), *managers > 1, providerArgs, providerEnv))
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	c, err := cluster.Start(ctx, opts)
	if err != nil {
		return err
	}
	c.ManagerPorts = managerPorts
	stopAll := func() error {
		fmt.Println("\n==> stopping")
		err := c.Stop()
		ports := []int{opts.APIServerPort, opts.EtcdPort, opts.EtcdPeerPort, opts.KwokPort}
		if *manager != "" {
			ports = append(ports, webhooks)
			for _, mp := range managerPorts {
				ports = append(ports, mp.Metrics, mp.Probes, mp.Pprof)
				if *managers > 1 {
					ports = append(ports, mp.Webhooks)
				}
			}
		}
		for _, p := range ports {
			if l, lerr := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p)); lerr != nil {
				err = errors.Join(err, fmt.Errorf("port %d is still bound after stopping", p))
			} else {
				l.Close()
			}
		}
		if err == nil {
			fmt.Println("==> every process stopped; no port left bound")
		}
		return err
	}

	if *manager != "" {
		logf("waiting for the manager to be ready (webhooks serving)")
		for _, name := range managerNames {
			if err := c.WaitManagerReady(ctx, managerPorts[name].Probes); err != nil {
				return errors.Join(err, stopAll())
			}
		}
		// A manager that dies is started again, as a Deployment's kubelet would.
		c.Supervise(managerNames, cluster.CrashLoopBackOff, logf)
	}
	if *samples != "" {
		logf("applying %s", *samples)
		if err := cluster.Apply(ctx, c.Config, *samples); err != nil {
			return errors.Join(err, stopAll())
		}
	}
	awsHelp := ""
	if emulator != nil {
		endpointFile := filepath.Join(*dir, "aws-endpoint")
		if err := os.WriteFile(endpointFile, []byte(emulator.Endpoint+"\n"), 0o644); err != nil {
			return errors.Join(err, stopAll())
		}
		if err := startKubelet(ctx, c, emulator, logf); err != nil {
			return errors.Join(err, stopAll())
		}
		awsHelp = fmt.Sprintf(`
  AWS:        the emulator at %s (also in %s), region %s, cluster %q;
              any AWS client works with it, e.g.
              AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test aws --endpoint-url $(cat %s) --region %s ec2 describe-instances
`, emulator.Endpoint, endpointFile, emulator.Region, awsCluster, endpointFile, emulator.Region)
	}
	gitopsHelp := ""
	if *argocd {
		stack, err := startGitOps(ctx, c, root, *dir, logf)
		if err != nil {
			return errors.Join(err, stopAll())
		}
		defer func() { _ = stack.Stop() }()
		gitopsHelp = fmt.Sprintf(`
  GitOps:     ArgoCD syncs the Applications %s/%s (the CRD chart) and %s/%s
              (NodePools, node classes, budgets, policies, webhooks) from %s every 5s;
              the clone %s is your checkout: edit, commit, then
              (cd %s && git push origin HEAD) is "merge to main"
              bin/kubectl -n %s get applications -w
`, gitops.Namespace, gitops.CRDApplication, gitops.Namespace, gitops.Application, stack.RepoURL, stack.Clone, stack.Clone, gitops.Namespace)
	}
	managersHelp := ""
	if *manager != "" && *managers > 1 {
		managersHelp = fmt.Sprintf(`
  Managers:   %s under leader election; the leader holds the Lease
              bin/kubectl -n kube-system get lease %s
              one that dies (kill -9 it) is started again, as a Deployment would
`, strings.Join(managerNames, ", "), cluster.LeaderElectionLease)
	}
	kubectl := filepath.Join(root, "bin", "kubectl")
	_ = os.MkdirAll(filepath.Dir(kubectl), 0o755)
	if err := relink(filepath.Join(bins, "kubectl"), kubectl); err != nil {
		return errors.Join(err, stopAll())
	}
	// helm, for the charts (charts/), built into the same cache on first use.
	helmBin, err := exec.Command(filepath.Join(root, "hack", "helm.sh")).Output()
	if err != nil {
		return errors.Join(fmt.Errorf("building helm: %w", err), stopAll())
	}
	helm := filepath.Join(root, "bin", "helm")
	if err := relink(strings.TrimSpace(string(helmBin)), helm); err != nil {
		return errors.Join(err, stopAll())
	}

	fmt.Printf(`
Local cluster is up in %s (Kubernetes v1.37.2, %s provider).

  kubeconfig: %s
  logs:       %s/<process>.log
  kubectl:    bin/kubectl (linked to the built v1.37.2 client); helm: bin/helm (v3.22.0)
%s%s%s
Try:
  export KUBECONFIG=%s
  bin/kubectl get nodepools,%s
  bin/kubectl get nodepool %s -o wide
  bin/kubectl scale deployment inflate --replicas=5 && bin/kubectl get nodeclaims,nodes,pods -o wide

Press Ctrl-C to stop every process.
`, time.Since(start).Round(100*time.Millisecond), *provider, c.Kubeconfig, c.LogDir, managersHelp, awsHelp, gitopsHelp, c.Kubeconfig,
		map[string]string{"kwok": "kwoknodeclasses", "aws": "ec2nodeclasses"}[*provider], map[string]string{"kwok": "general", "aws": "default"}[*provider])

	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return stopAll()
		case <-ticker.C:
			for _, p := range c.Processes() {
				if _, ok := managerPorts[p.Name]; ok {
					continue // supervised
				}
				if exited, perr := p.Exited(); exited {
					return errors.Join(fmt.Errorf("%s exited (%v); last lines of its log:\n%s", p.Name, perr, c.LogTail(p.Name, 20)), stopAll())
				}
			}
		}
	}
}

// startKubelet plays the kubelet of the instances launched into the emulator, until ctx ends.
func startKubelet(ctx context.Context, c *cluster.Cluster, e *awsemu.Emulator, logf func(string, ...any)) error {
	for k, v := range awsemu.Environment() {
		os.Setenv(k, v)
	}
	clients, err := awsprovider.NewClients(ctx, awsprovider.Settings{ClusterName: awsCluster, Region: e.Region, Endpoint: e.Endpoint})
	if err != nil {
		return err
	}
	kube, err := client.New(c.Config, client.Options{Scheme: clientgoscheme.Scheme})
	if err != nil {
		return err
	}
	k := &ec2kubelet.Kubelet{EC2: clients.EC2, Kube: kube, Cluster: awsCluster, ClusterEndpoint: c.APIServerURL, CA: c.Config.CAData, Log: logf}
	go k.Run(ctx, time.Second)
	return nil
}

// startGitOps builds (or finds) ArgoCD and helm, and starts the GitOps stack against the cluster.
func startGitOps(ctx context.Context, c *cluster.Cluster, root, dir string, logf func(string, ...any)) (*gitops.Stack, error) {
	logf("building (or finding) ArgoCD v3.6.1 (cold: about 7 minutes) and helm")
	kube, err := client.New(c.Config, client.Options{})
	if err != nil {
		return nil, err
	}
	return gitops.Start(ctx, c, kube, gitops.Options{Dir: dir, RepoRoot: root, Log: logf})
}

// relink points the symlink link at target. Two stacks starting side by side (make
// upstream-e2e's instances) may both relink: one that finds the link already pointing at
// target is done.
func relink(target, link string) error {
	_ = os.Remove(link)
	err := os.Symlink(target, link)
	if os.IsExist(err) {
		if got, rerr := os.Readlink(link); rerr == nil && got == target {
			return nil
		}
	}
	return err
}
