// Package cluster runs a local Kubernetes control plane on loopback from the binaries that
// hack/kube-binaries.sh builds: etcd, kube-apiserver, kube-controller-manager, kube-scheduler
// and kwok, with this project's CRDs installed and, optionally, the karpenter manager. `make
// run` and the e2e suites both start it through Start, so they exercise the same cluster.
//
// Every process binds to 127.0.0.1, writes its log under Dir/logs, and is stopped by Stop
// (or killed with its parent). It must not be used for anything but local runs and tests.
package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Options say where the cluster keeps its state and which ports it binds.
type Options struct {
	// Dir holds certificates, etcd data, logs and the kubeconfig. It is emptied at start.
	Dir string
	// BinDir holds the binaries (the output of hack/kube-binaries.sh).
	BinDir string
	// RepoRoot is the repository, for the CRDs and the kwok stages.
	RepoRoot string
	// Ports; zero picks a free port.
	APIServerPort, EtcdPort, EtcdPeerPort, KwokPort int
	// WebhookPort, when set, points the CRDs' conversion webhook and the validating webhooks of
	// config/webhook at https://127.0.0.1:<WebhookPort>, where a local manager serves them.
	WebhookPort int
	// WebhookBackends, when set, are the webhook ports of several managers: the cluster then
	// listens on WebhookPort itself and forwards each connection to a backend that accepts
	// it, as a Service in front of a Deployment's replicas would.
	WebhookBackends []int
	// KwokStages, when set, replaces config/kwok/stages.yaml as the stages kwok plays (make
	// upstream-e2e's kubelet keeps a deleted pod until its grace period ends).
	KwokStages string
	// Managers are started once the control plane is up and the CRDs are installed.
	Managers []*Process
	// Log receives progress lines; nil discards them.
	Log func(format string, args ...any)
}

// Process is a command run as part of the cluster.
type Process struct {
	Name string
	Path string
	Args []string
	Env  []string

	cmd     *exec.Cmd
	done    chan struct{}
	err     error
	log     *os.File
	started time.Time
}

// Cluster is a running local control plane.
type Cluster struct {
	// Kubeconfig is the path of an admin kubeconfig for the cluster.
	Kubeconfig string
	// Config is the admin REST config.
	Config *rest.Config
	// APIServerURL is https://127.0.0.1:<port>.
	APIServerURL string
	// LogDir holds one log file per process.
	LogDir string

	// ManagerPorts are the ports of each manager process, by name, when the cluster was
	// started with managers (StartWithManager, `make run`).
	ManagerPorts map[string]ManagerPorts

	opts       Options
	supervisor context.CancelFunc // stops Supervise
	replay     context.CancelFunc // stops replayBoundPods
	mu         sync.Mutex         // guards procs
	procs      []*Process
	proxy      *proxy
}

// ServiceCIDR is the cluster's service range; PodCIDR is the range kwok hands pod IPs from.
const (
	ServiceCIDR = "10.0.0.0/24"
	PodCIDR     = "10.128.0.0/12"
	// KwokNodeAnnotation marks the nodes kwok manages (the kwok provider sets it).
	KwokNodeAnnotation = "kwok.x-k8s.io/node"
)

// Start starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok, waits
// until the API server is ready, installs the CRDs, and starts the manager if one is given.
// On error it stops whatever it started.
func Start(ctx context.Context, o Options) (*Cluster, error) {
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	c := &Cluster{opts: o, LogDir: filepath.Join(o.Dir, "logs")}
	if err := c.boot(ctx, &o); err != nil {
		if stopErr := c.Stop(); stopErr != nil {
			err = errors.Join(err, stopErr)
		}
		return nil, err
	}
	return c, nil
}

func (c *Cluster) boot(ctx context.Context, o *Options) (err error) {
	var zero []*int
	for _, p := range []*int{&o.APIServerPort, &o.EtcdPort, &o.EtcdPeerPort, &o.KwokPort} {
		if *p == 0 {
			zero = append(zero, p)
		} else if err := portFree(*p); err != nil {
			return err
		}
	}
	free, err := FreePorts(len(zero))
	if err != nil {
		return err
	}
	for i, p := range zero {
		*p = free[i]
	}
	c.opts = *o
	for _, d := range []string{filepath.Join(o.Dir, "pki"), filepath.Join(o.Dir, "etcd"), c.LogDir} {
		if err := os.RemoveAll(d); err != nil {
			return err
		}
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	pki, err := newPKI(filepath.Join(o.Dir, "pki"))
	if err != nil {
		return fmt.Errorf("creating certificates: %w", err)
	}
	loopback := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")}
	names := []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}
	if err := pki.issue("apiserver", "kube-apiserver", nil, loopback, names, true); err != nil {
		return err
	}
	if err := pki.issue("admin", "admin", []string{"system:masters"}, nil, nil, false); err != nil {
		return err
	}
	if err := pki.serviceAccountKey(); err != nil {
		return err
	}
	c.APIServerURL = fmt.Sprintf("https://127.0.0.1:%d", o.APIServerPort)
	c.Kubeconfig = filepath.Join(o.Dir, "kubeconfig")
	if err := c.writeKubeconfig(pki); err != nil {
		return err
	}
	if c.Config, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig); err != nil {
		return err
	}
	c.Config.QPS, c.Config.Burst = 200, 400

	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", o.EtcdPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", o.EtcdPeerPort)
	o.Log("starting etcd on %s", etcdURL)
	if err := c.start(&Process{Name: "etcd", Path: c.bin("etcd"), Args: []string{
		"--name=local", "--data-dir=" + filepath.Join(o.Dir, "etcd"),
		"--listen-client-urls=" + etcdURL, "--advertise-client-urls=" + etcdURL,
		"--listen-peer-urls=" + peerURL, "--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=local=" + peerURL, "--listen-metrics-urls=",
		"--unsafe-no-fsync", "--quota-backend-bytes=4294967296", "--log-level=warn",
	}}); err != nil {
		return err
	}
	if err := waitHTTP(ctx, http.DefaultClient, etcdURL+"/health", 60*time.Second, c.procs[0]); err != nil {
		return fmt.Errorf("etcd: %w", err)
	}

	o.Log("starting kube-apiserver on %s", c.APIServerURL)
	apiserver := &Process{Name: "kube-apiserver", Path: c.bin("kube-apiserver"), Args: []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		// The kubernetes Service cannot point at loopback; nothing here needs it to.
		"--endpoint-reconciler-type=none",
		"--secure-port=" + strconv.Itoa(o.APIServerPort),
		"--tls-cert-file=" + pki.path("apiserver.crt"), "--tls-private-key-file=" + pki.path("apiserver.key"),
		"--client-ca-file=" + pki.path("ca.crt"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + pki.path("sa.pub"),
		"--service-account-signing-key-file=" + pki.path("sa.key"),
		"--service-cluster-ip-range=" + ServiceCIDR,
		"--authorization-mode=Node,RBAC", "--allow-privileged=true",
		"--max-requests-inflight=1000", "--max-mutating-requests-inflight=500",
	}}
	if err := c.start(apiserver); err != nil {
		return err
	}
	if err := waitHTTP(ctx, c.httpClient(pki), c.APIServerURL+"/readyz", 120*time.Second, apiserver); err != nil {
		return fmt.Errorf("kube-apiserver: %w", err)
	}

	kubeconfig := "--kubeconfig=" + c.Kubeconfig
	o.Log("starting kube-controller-manager, kube-scheduler and kwok")
	if err := c.start(&Process{Name: "kube-controller-manager", Path: c.bin("kube-controller-manager"), Args: []string{
		kubeconfig, "--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=0",
		"--controllers=deployment-controller,replicaset-controller,statefulset-controller,daemonset-controller," +
			"job-controller,garbage-collector-controller,pod-garbage-collector-controller,namespace-controller," +
			"serviceaccount-controller,node-lifecycle-controller,disruption-controller,clusterrole-aggregation-controller," +
			// Volumes: claims bind to PersistentVolumes, and their protection finalizers go
			// when they are deleted. No attach-detach controller: nothing attaches here, and
			// tests create the VolumeAttachments a CSI driver would leave behind. NoExecute
			// taints evict the pods that do not tolerate them, as in any cluster.
			"persistentvolume-binder-controller,persistentvolume-protection-controller,persistentvolumeclaim-protection-controller," +
			"ephemeral-volume-controller,taint-eviction-controller",
		"--use-service-account-credentials=false",
		"--service-cluster-ip-range=" + ServiceCIDR,
		"--kube-api-qps=" + controlPlaneQPS, "--kube-api-burst=" + controlPlaneQPS,
		"--concurrent-deployment-syncs=20", "--concurrent-replicaset-syncs=20",
	}}); err != nil {
		return err
	}
	// Pods that failed to schedule are retried after 1s at most: nodes appear within seconds
	// here, and the default backoff (up to 10s) would dominate every scale-up. MostAllocated
	// scoring packs pods as the provisioner planned, instead of spreading them over the nodes
	// launched for others.
	//
	// The scheduler's and the controller manager's clients are not rate limited (kwokctl's
	// --disable-qps-limits does the same): with a few hundred queries per second, marking a
	// thousand new pods unschedulable took the scheduler seconds, which every scale-out here
	// waited for before its batch could close.
	schedulerConfig := filepath.Join(o.Dir, "kube-scheduler.yaml")
	if err := os.WriteFile(schedulerConfig, []byte(fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %q
  qps: %s
  burst: %s
leaderElection:
  leaderElect: false
podInitialBackoffSeconds: 1
podMaxBackoffSeconds: 1
profiles:
- schedulerName: default-scheduler
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
        resources: [{name: cpu, weight: 1}, {name: memory, weight: 1}]
`, c.Kubeconfig, controlPlaneQPS, controlPlaneQPS)), 0o600); err != nil {
		return err
	}
	if err := c.start(&Process{Name: "kube-scheduler", Path: c.bin("kube-scheduler"), Args: []string{
		"--config=" + schedulerConfig, "--bind-address=127.0.0.1", "--secure-port=0",
	}}); err != nil {
		return err
	}
	// kwok plays every node's kubelet, four nodes and four pods at a time by default; real
	// kubelets work side by side, one per node, so a scale-out of hundreds of nodes would
	// measure kwok's queue rather than the cluster.
	kwokConfig := filepath.Join(o.Dir, "kwok.yaml")
	if err := os.WriteFile(kwokConfig, []byte(`apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  podPlayStageParallelism: 16
  nodePlayStageParallelism: 16
  nodeLeaseParallelism: 16
`), 0o600); err != nil {
		return err
	}
	stages := o.KwokStages
	if stages == "" {
		stages = filepath.Join(o.RepoRoot, "config", "kwok", "stages.yaml")
	}
	if err := c.start(&Process{Name: "kwok", Path: c.bin("kwok"), Args: []string{
		kubeconfig, "-c", stages, "-c", kwokConfig,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=" + KwokNodeAnnotation + "=fake",
		"--cidr=" + PodCIDR, "--node-ip=127.0.0.1", "--node-lease-duration-seconds=40",
		"--server-address=127.0.0.1:" + strconv.Itoa(o.KwokPort),
	}}); err != nil {
		return err
	}

	replayCtx, stopReplay := context.WithCancel(context.Background())
	c.replay = stopReplay
	go replayBoundPods(replayCtx, c)

	o.Log("installing CRDs from config/crd/bases")
	webhookURL := c.WebhookURL()
	if err := InstallCRDs(ctx, c.Config, filepath.Join(o.RepoRoot, "config", "crd", "bases"), webhookURL); err != nil {
		return err
	}
	if webhookURL != "" {
		o.Log("installing the webhooks of config/webhook, served at %s", webhookURL)
		if err := InstallWebhooks(ctx, c.Config, webhookURL, WebhookFiles(o.RepoRoot)...); err != nil {
			return err
		}
	}
	if len(o.WebhookBackends) > 0 {
		if c.proxy, err = serveProxy(o.WebhookPort, o.WebhookBackends); err != nil {
			return fmt.Errorf("serving the webhook port: %w", err)
		}
	}
	for _, m := range o.Managers {
		o.Log("starting %s", m.Name)
		m.Env = append(m.Env, "KUBECONFIG="+c.Kubeconfig)
		if err := c.start(m); err != nil {
			return err
		}
	}
	return nil
}

// controlPlaneQPS is the client rate limit of kube-scheduler and kube-controller-manager.
const controlPlaneQPS = "5000"

// WebhookURL is where the local manager serves the conversion and validating webhooks
// (Options.WebhookPort), or "" when it serves none.
func (c *Cluster) WebhookURL() string {
	if c.opts.WebhookPort == 0 {
		return ""
	}
	return fmt.Sprintf("https://127.0.0.1:%d", c.opts.WebhookPort)
}

func (c *Cluster) bin(name string) string { return filepath.Join(c.opts.BinDir, name) }

func (c *Cluster) start(p *Process) error {
	if _, err := os.Stat(p.Path); err != nil {
		return fmt.Errorf("%s: %w (run hack/kube-binaries.sh)", p.Name, err)
	}
	f, err := os.OpenFile(filepath.Join(c.LogDir, p.Name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.Path, p.Args...)
	cmd.Env = append(os.Environ(), p.Env...)
	cmd.Stdout, cmd.Stderr = f, f
	// Own process group, so a terminal's Ctrl-C reaches us first and we stop in order; and a
	// signal when the parent dies, so nothing outlives a killed `make run` or test.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("starting %s: %w", p.Name, err)
	}
	p.cmd, p.log, p.done, p.started = cmd, f, make(chan struct{}), time.Now()
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	c.mu.Lock()
	c.procs = append(c.procs, p)
	c.mu.Unlock()
	return nil
}

// StartProcess starts another process as part of the cluster: its log is under LogDir, Stop
// stops it, and it is killed with its parent.
func (c *Cluster) StartProcess(p *Process) error { return c.start(p) }

// Exited reports whether a process has stopped, and why.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Kill kills a process (SIGKILL, as a crash would) and waits for it to exit.
func (c *Cluster) Kill(name string) error {
	p := c.process(name)
	if p == nil {
		return fmt.Errorf("no process %s", name)
	}
	if exited, _ := p.Exited(); exited {
		return nil
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
	return nil
}

// process is the running (or last) process of that name, or nil.
func (c *Cluster) process(name string) *Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.procs {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// Restart starts a killed process again with the same command, appending to its log.
func (c *Cluster) Restart(name string) error {
	c.mu.Lock()
	var old *Process
	for i, p := range c.procs {
		if p.Name != name {
			continue
		}
		if exited, _ := p.Exited(); !exited {
			c.mu.Unlock()
			return fmt.Errorf("%s is still running", name)
		}
		p.log.Close()
		c.procs = append(c.procs[:i], c.procs[i+1:]...)
		old = p
		break
	}
	c.mu.Unlock()
	if old == nil {
		return fmt.Errorf("no process %s", name)
	}
	return c.start(&Process{Name: old.Name, Path: old.Path, Args: old.Args, Env: old.Env})
}

// Processes are the processes started so far, in start order.
func (c *Cluster) Processes() []*Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Process(nil), c.procs...)
}

// Stop stops every process in reverse start order: SIGTERM, then SIGKILL after 15 seconds.
func (c *Cluster) Stop() error {
	var errs []error
	c.mu.Lock()
	stopSupervising := c.supervisor
	c.mu.Unlock()
	if stopSupervising != nil {
		stopSupervising()
	}
	if c.replay != nil {
		c.replay()
	}
	if c.proxy != nil {
		c.proxy.close()
	}
	procs := c.Processes()
	for i := len(procs) - 1; i >= 0; i-- {
		p := procs[i]
		if exited, _ := p.Exited(); !exited {
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
			select {
			case <-p.done:
			case <-time.After(15 * time.Second):
				_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
				<-p.done
				errs = append(errs, fmt.Errorf("%s did not stop within 15s and was killed", p.Name))
			}
		}
		p.log.Close()
	}
	c.mu.Lock()
	c.procs = nil
	c.mu.Unlock()
	return errors.Join(errs...)
}

func (c *Cluster) writeKubeconfig(p *pki) error {
	cfg := clientcmdapi.NewConfig()
	// Embed the certificates, so the kubeconfig can be copied anywhere on the machine.
	cert, err := os.ReadFile(p.path("admin.crt"))
	if err != nil {
		return err
	}
	key, err := os.ReadFile(p.path("admin.key"))
	if err != nil {
		return err
	}
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: c.APIServerURL, CertificateAuthorityData: p.caPEM()}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	cfg.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "admin"}
	cfg.CurrentContext = "local"
	abs, err := filepath.Abs(c.Kubeconfig)
	if err != nil {
		return err
	}
	c.Kubeconfig = abs
	return clientcmd.WriteToFile(*cfg, c.Kubeconfig)
}

func (c *Cluster) httpClient(p *pki) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.caPEM())
	cert, _ := tls.LoadX509KeyPair(p.path("admin.crt"), p.path("admin.key"))
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
	}}
}

// waitHTTP polls url until it answers 200, the process exits, or the timeout passes.
func waitHTTP(ctx context.Context, client *http.Client, url string, timeout time.Duration, p *Process) error {
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		if exited, err := p.Exited(); exited {
			return fmt.Errorf("exited before it was ready (%v); see %s", err, p.log.Name())
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s not ready after %s (last: %s); see %s", url, timeout, last, p.log.Name())
}

// FreePorts returns n distinct free ports on 127.0.0.1, held open together while they are
// chosen so that no two are the same. Under KARPENTER_E2E_PORT_BASE (set by the e2e lanes,
// hack/e2e-lanes) they come from [base, base+KARPENTER_E2E_PORT_SPAN), each port handed out at
// most once per process, so that clusters of parallel lanes never race for a port; otherwise
// the kernel picks them.
func FreePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	base, span, ranged := portRange()
	ports := make([]int, 0, n)
	for range n {
		if !ranged {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return nil, err
			}
			ls = append(ls, l)
			ports = append(ports, l.Addr().(*net.TCPAddr).Port)
			continue
		}
		l, port, err := nextRangedPort(base, span)
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, port)
	}
	return ports, nil
}

// nextPort is the offset in the lane's range of the next port to try.
var (
	nextPortMu sync.Mutex
	nextPort   int
)

func portRange() (base, span int, ok bool) {
	base, err := strconv.Atoi(os.Getenv("KARPENTER_E2E_PORT_BASE"))
	if err != nil || base <= 0 {
		return 0, 0, false
	}
	if span, err = strconv.Atoi(os.Getenv("KARPENTER_E2E_PORT_SPAN")); err != nil || span <= 0 {
		span = 1000
	}
	return base, span, true
}

// nextRangedPort listens on the next port of the range no one holds.
func nextRangedPort(base, span int) (net.Listener, int, error) {
	nextPortMu.Lock()
	defer nextPortMu.Unlock()
	for nextPort < span {
		port := base + nextPort
		nextPort++
		if l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
			return l, port, nil
		}
	}
	return nil, 0, fmt.Errorf("no free port left in 127.0.0.1:%d-%d (KARPENTER_E2E_PORT_BASE)", base, base+span-1)
}

func portFree(port int) error {
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return fmt.Errorf("port %d on 127.0.0.1 is in use (is another local cluster running?): %w", port, err)
	}
	return l.Close()
}

// LogTail returns the last lines of a process's log, for error messages.
func (c *Cluster) LogTail(name string, lines int) string {
	b, err := os.ReadFile(filepath.Join(c.LogDir, name+".log"))
	if err != nil {
		return ""
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// LogMatching returns the lines of a process's log that mention any of the words, the last
// most of them, for a failure to tell the story of the objects it names.
func (c *Cluster) LogMatching(name string, most int, words ...string) string {
	b, err := os.ReadFile(filepath.Join(c.LogDir, name+".log"))
	if err != nil || len(words) == 0 {
		return ""
	}
	var out []string
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		for _, w := range words {
			if strings.Contains(line, w) {
				out = append(out, line)
				break
			}
		}
	}
	if len(out) > most {
		out = out[len(out)-most:]
	}
	return strings.Join(out, "\n")
}
