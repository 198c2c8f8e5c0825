package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"time"
)

// ManagerPorts are the local manager's ports on 127.0.0.1; a zero Pprof serves no profiles.
type ManagerPorts struct {
	Metrics, Probes, Pprof, Webhooks int
}

// BuildManager builds this repository's manager (./cmd/karpenter of root) to path, or, under
// KARPENTER_E2E_MANAGER (the e2e lanes build it once for every suite), links that binary there.
func BuildManager(root, path string) error {
	if built := os.Getenv("KARPENTER_E2E_MANAGER"); built != "" {
		if err := os.Symlink(built, path); err != nil {
			return fmt.Errorf("linking the manager built by the e2e lanes: %w", err)
		}
		return nil
	}
	build := exec.Command("go", "build", "-o", path, "./cmd/karpenter")
	build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building the manager: %w", err)
	}
	return nil
}

// ManagerProcess is the manager at path as the local stacks (`make run`, the e2e suites) run
// it: its endpoints on loopback, and its webhooks in self-signed mode: the CA kept in the
// Secret kube-system/karpenter-webhook-cert and injected into the webhook configuration and
// the CRDs, which point at Options.WebhookPort (InstallWebhooks), the serving certificate
// written to certDir. With leaderElect it elects a leader with the other managers through
// the Lease kube-system/karpenter-leader-election, as upstream's chart deploys it; without,
// it acts alone. args (a cloud provider's flags) and env are added.
func ManagerProcess(name, path string, ports ManagerPorts, certDir string, leaderElect bool, args, env []string) *Process {
	election := []string{"--leader-elect=false"}
	if leaderElect {
		election = []string{"--leader-elect=true", "--leader-election-id=" + LeaderElectionLease, "--leader-election-namespace=kube-system"}
	}
	flags := append(election,
		"--metrics-bind-address=127.0.0.1:"+strconv.Itoa(ports.Metrics),
		"--health-probe-bind-address=127.0.0.1:"+strconv.Itoa(ports.Probes),
		"--webhook-host=127.0.0.1", "--webhook-port="+strconv.Itoa(ports.Webhooks),
		"--webhook-cert-mode=self-signed", "--webhook-cert-secret=kube-system/karpenter-webhook-cert",
		"--webhook-cert-ips=127.0.0.1", "--webhook-configuration=validating-webhook-configuration",
		"--mutating-webhook-configuration=mutating-webhook-configuration",
		"--webhook-cert-dir="+certDir,
	)
	if ports.Pprof != 0 {
		flags = append(flags, "--profiling-bind-address=127.0.0.1:"+strconv.Itoa(ports.Pprof))
	}
	return &Process{Name: name, Path: path, Args: append(flags, args...), Env: env}
}

// ManagerName is the process name of manager i of n: "karpenter" alone, "karpenter-<i>"
// among several.
func ManagerName(i, n int) string {
	if n <= 1 {
		return "karpenter"
	}
	return "karpenter-" + strconv.Itoa(i)
}

// WaitManagerReady polls the manager's readiness endpoint (its webhooks serve once it
// answers) for up to a minute, and fails at once when any of the cluster's processes exits.
func (c *Cluster) WaitManagerReady(ctx context.Context, probePort int) error {
	url := fmt.Sprintf("http://127.0.0.1:%d/readyz", probePort)
	hc := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if resp, err := hc.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		// Only the manager waited for: another process may be down on purpose (a chaos test
		// killed it, and its supervisor has not restarted it yet).
		probe := "--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(probePort)
		for _, p := range c.Processes() {
			if !slices.Contains(p.Args, probe) {
				continue
			}
			if exited, err := p.Exited(); exited {
				return fmt.Errorf("%s exited (%v); last lines of its log:\n%s", p.Name, err, c.LogTail(p.Name, 20))
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("manager not ready at %s after a minute; last lines of its log:\n%s", url, c.managerLogTail(probePort, 30))
}

// ManagedOptions say where a cluster with this repository's manager keeps its state, and
// what the manager adds for its cloud provider.
type ManagedOptions struct {
	// Dir holds the manager binary, its certificates and the cluster's state.
	Dir, BinDir, RepoRoot string
	// Provider, when set, gives the manager's extra flags and environment from the API
	// server's URL (the AWS provider's endpoint and cluster settings).
	Provider func(apiServerURL string) (args, env []string)
	// Managers is how many managers run; two or more elect a leader and share the webhook
	// port (Options.WebhookBackends). Zero means one.
	Managers int
}

// StartWithManager builds the manager, starts the local cluster with it (o.Managers of it)
// on free ports, and waits until every manager is ready, as the e2e suites run it. The
// ports returned are the first manager's; Cluster.ManagerPorts has them all. On error
// nothing is left running.
func StartWithManager(ctx context.Context, o ManagedOptions) (*Cluster, ManagerPorts, error) {
	manager := filepath.Join(o.Dir, "karpenter")
	if err := BuildManager(o.RepoRoot, manager); err != nil {
		return nil, ManagerPorts{}, err
	}
	n := max(o.Managers, 1)
	// Every port at once, so that none of the cluster's processes can take one of the manager's.
	ports, err := FreePorts(5 + 3*n)
	if err != nil {
		return nil, ManagerPorts{}, err
	}
	var args, env []string
	if o.Provider != nil {
		args, env = o.Provider("https://127.0.0.1:" + strconv.Itoa(ports[1]))
	}
	opts := Options{
		Dir: filepath.Join(o.Dir, "cluster"), BinDir: o.BinDir, RepoRoot: o.RepoRoot, WebhookPort: ports[0],
		APIServerPort: ports[1], EtcdPort: ports[2], EtcdPeerPort: ports[3], KwokPort: ports[4],
	}
	all := map[string]ManagerPorts{}
	for i := range n {
		mp := ManagerPorts{Webhooks: ports[0], Probes: ports[5+3*i], Metrics: ports[6+3*i]}
		if n > 1 {
			mp.Webhooks = ports[7+3*i]
			opts.WebhookBackends = append(opts.WebhookBackends, mp.Webhooks)
		}
		name := ManagerName(i, n)
		all[name] = mp
		opts.Managers = append(opts.Managers, ManagerProcess(name, manager, mp, filepath.Join(o.Dir, "certs", name), n > 1, args, env))
	}
	c, err := Start(ctx, opts)
	if err != nil {
		return nil, ManagerPorts{}, err
	}
	c.ManagerPorts = all
	for _, mp := range all {
		if err := c.WaitManagerReady(ctx, mp.Probes); err != nil {
			return nil, ManagerPorts{}, errors.Join(err, c.Stop())
		}
	}
	return c, all[ManagerName(0, n)], nil
}

// managerLogTail is the end of the log of the manager whose probes are at probePort.
func (c *Cluster) managerLogTail(probePort, lines int) string {
	for name, mp := range c.ManagerPorts {
		if mp.Probes == probePort {
			return c.LogTail(name, lines)
		}
	}
	return c.LogTail("karpenter", lines)
}
