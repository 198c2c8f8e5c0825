package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// ManagerPorts are the local manager's ports on 127.0.0.1; a zero Pprof serves no profiles.
type ManagerPorts struct {
	Metrics, Probes, Pprof, Webhooks int
}

// BuildManager builds this repository's manager (./cmd/karpenter of root) to path.
func BuildManager(root, path string) error {
	build := exec.Command("go", "build", "-o", path, "./cmd/karpenter")
	build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building the manager: %w", err)
	}
	return nil
}

// ManagerProcess is the manager at path as the local stacks (`make run`, the e2e suites) run
// it: no leader election, its endpoints on loopback, and its webhooks in self-signed mode:
// the CA kept in the Secret kube-system/karpenter-webhook-cert and injected into the webhook
// configuration and the CRDs, which point at ports.Webhooks (Options.WebhookPort,
// InstallWebhooks), the serving certificate written to certDir. args (a cloud provider's
// flags) and env are added.
func ManagerProcess(path string, ports ManagerPorts, certDir string, args, env []string) *Process {
	flags := []string{
		"--leader-elect=false",
		"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(ports.Metrics),
		"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(ports.Probes),
		"--webhook-host=127.0.0.1", "--webhook-port=" + strconv.Itoa(ports.Webhooks),
		"--webhook-cert-mode=self-signed", "--webhook-cert-secret=kube-system/karpenter-webhook-cert",
		"--webhook-cert-ips=127.0.0.1", "--webhook-configuration=validating-webhook-configuration",
		"--webhook-cert-dir=" + certDir,
	}
	if ports.Pprof != 0 {
		flags = append(flags, "--profiling-bind-address=127.0.0.1:"+strconv.Itoa(ports.Pprof))
	}
	return &Process{Name: "karpenter", Path: path, Args: append(flags, args...), Env: env}
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
		for _, p := range c.Processes() {
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
	return fmt.Errorf("manager not ready at %s after a minute; last lines of its log:\n%s", url, c.LogTail("karpenter", 30))
}

// ManagedOptions say where a cluster with this repository's manager keeps its state, and
// what the manager adds for its cloud provider.
type ManagedOptions struct {
	// Dir holds the manager binary, its certificates and the cluster's state.
	Dir, BinDir, RepoRoot string
	// Provider, when set, gives the manager's extra flags and environment from the API
	// server's URL (the AWS provider's endpoint and cluster settings).
	Provider func(apiServerURL string) (args, env []string)
}

// StartWithManager builds the manager, starts the local cluster with it on free ports, and
// waits until the manager is ready, as the e2e suites run it. On error nothing is left running.
func StartWithManager(ctx context.Context, o ManagedOptions) (*Cluster, ManagerPorts, error) {
	manager := filepath.Join(o.Dir, "karpenter")
	if err := BuildManager(o.RepoRoot, manager); err != nil {
		return nil, ManagerPorts{}, err
	}
	// Every port at once, so that none of the cluster's processes can take one of the manager's.
	ports, err := FreePorts(7)
	if err != nil {
		return nil, ManagerPorts{}, err
	}
	mp := ManagerPorts{Webhooks: ports[0], Probes: ports[1], Metrics: ports[2]}
	var args, env []string
	if o.Provider != nil {
		args, env = o.Provider("https://127.0.0.1:" + strconv.Itoa(ports[3]))
	}
	c, err := Start(ctx, Options{
		Dir: filepath.Join(o.Dir, "cluster"), BinDir: o.BinDir, RepoRoot: o.RepoRoot, WebhookPort: mp.Webhooks,
		APIServerPort: ports[3], EtcdPort: ports[4], EtcdPeerPort: ports[5], KwokPort: ports[6],
		Manager: ManagerProcess(manager, mp, filepath.Join(o.Dir, "certs"), args, env),
	})
	if err != nil {
		return nil, ManagerPorts{}, err
	}
	if err := c.WaitManagerReady(ctx, mp.Probes); err != nil {
		return nil, ManagerPorts{}, errors.Join(err, c.Stop())
	}
	return c, mp, nil
}
