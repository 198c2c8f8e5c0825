// Package gitops is the GitOps half of `make run-argocd` and its e2e suite: a Git
// repository on disk served over smart HTTP on loopback (git http-backend) and seeded with
// the samples, a clone of it whose `git push origin HEAD` is "merge to main", and ArgoCD's
// application controller and repo server (with a Redis) syncing one Application from it
// into the local cluster, with this project's health checks in argocd-cm.
//
// It runs ArgoCD's own binaries (hack/argocd.sh) as they are; it must not stand in for any
// part of ArgoCD, nor be used outside local runs and tests.
package gitops

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpenter-policy/karpenter/test/cluster"
)

// Namespace is ArgoCD's namespace; Application is the one Application's name.
const (
	Namespace   = "argocd"
	Application = "karpenter"
)

// Options say where the stack keeps its state and what it runs.
type Options struct {
	// Dir holds the bare repository (gitops.git) and the clone (gitops).
	Dir string
	// RepoRoot is the repository, for the samples and config/argocd.
	RepoRoot string
	// ArgoCD is the binary of hack/argocd.sh; CRDs is ArgoCD's manifests/crds directory.
	ArgoCD, CRDs string
	// Resync is ArgoCD's reconciliation period (timeout.reconciliation).
	Resync time.Duration
	Log    func(format string, args ...any)
}

// Stack is a running GitOps stack.
type Stack struct {
	// RepoURL is the repository ArgoCD syncs from; Clone is the working copy.
	RepoURL, Clone string
	server         *http.Server
}

// Seed are the samples the repository starts with: the KWOKNodeClass, the NodePools, a
// Namespace with a CapacityBudget, and the sample CapacityPolicy.
var Seed = map[string]string{
	"00-kwoknodeclass.yaml":    "config/samples/00-kwoknodeclass.yaml",
	"10-nodepool-general.yaml": "config/samples/10-nodepool-general.yaml",
	"20-nodepool-spot.yaml":    "config/samples/20-nodepool-spot.yaml",
	"40-capacitybudget.yaml":   "config/samples/examples/capacitybudget.yaml",
	"50-capacitypolicy.yaml":   "config/samples/examples/capacitypolicy.yaml",
}

const namespaceDoc = `# The team namespace whose budget 40-capacitybudget.yaml sets.
apiVersion: v1
kind: Namespace
metadata:
  name: team-a
`

// Start seeds and serves the repository, installs ArgoCD's CRDs and configuration into the
// cluster, starts ArgoCD's processes as part of it, and creates the Application.
func Start(ctx context.Context, c *cluster.Cluster, kube client.Client, o Options) (*Stack, error) {
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	if o.Resync == 0 {
		o.Resync = 5 * time.Second
	}
	s := &Stack{Clone: filepath.Join(o.Dir, "gitops")}
	if err := s.seed(o); err != nil {
		return nil, fmt.Errorf("seeding the Git repository: %w", err)
	}
	if err := s.serve(o); err != nil {
		return nil, err
	}
	o.Log("Git repository %s (clone: %s)", s.RepoURL, s.Clone)
	if err := cluster.InstallCRDs(ctx, c.Config, o.CRDs, ""); err != nil {
		return nil, errorsJoin(fmt.Errorf("installing ArgoCD's CRDs: %w", err), s.Stop())
	}
	// A client whose REST mapper knows the kinds just installed.
	kube, err := client.New(c.Config, client.Options{Scheme: kube.Scheme()})
	if err != nil {
		return nil, errorsJoin(err, s.Stop())
	}
	if err := configure(ctx, kube, o); err != nil {
		return nil, errorsJoin(err, s.Stop())
	}
	if err := s.startArgoCD(c, o); err != nil {
		return nil, errorsJoin(err, s.Stop())
	}
	if err := kube.Create(ctx, application(s.RepoURL)); err != nil {
		return nil, errorsJoin(fmt.Errorf("creating the Application: %w", err), s.Stop())
	}
	return s, nil
}

func errorsJoin(a, b error) error {
	if b == nil {
		return a
	}
	return fmt.Errorf("%w; %v", a, b)
}

// Git runs git in the clone, as the user "gitops".
func (s *Stack) Git(args ...string) error {
	return git(s.Clone, args...)
}

func git(dir string, args ...string) error {
	cmd := exec.Command("git", append([]string{"-c", "user.name=gitops", "-c", "user.email=gitops@localhost", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (s *Stack) seed(o Options) error {
	bare := filepath.Join(o.Dir, "gitops.git")
	for _, d := range []string{bare, s.Clone} {
		if err := os.RemoveAll(d); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(bare, 0o755); err != nil {
		return err
	}
	if err := git(bare, "init", "-q", "--bare", "-b", "main"); err != nil {
		return err
	}
	// Pushes over HTTP need the backend's permission.
	if err := git(bare, "config", "http.receivepack", "true"); err != nil {
		return err
	}
	if err := git(o.Dir, "clone", "-q", bare, s.Clone); err != nil {
		return err
	}
	for name, src := range Seed {
		b, err := os.ReadFile(filepath.Join(o.RepoRoot, src))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(s.Clone, name), b, 0o644); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(s.Clone, "30-namespace-team-a.yaml"), []byte(namespaceDoc), 0o644); err != nil {
		return err
	}
	if err := s.Git("add", "."); err != nil {
		return err
	}
	if err := s.Git("commit", "-q", "-m", "The samples: a KWOKNodeClass, two NodePools, team-a's budget, a CapacityPolicy"); err != nil {
		return err
	}
	return s.Git("push", "-q", "origin", "HEAD:main")
}

// serve serves the bare repository over Git's smart HTTP protocol on loopback.
func (s *Stack) serve(o Options) error {
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		return fmt.Errorf("finding git http-backend: %w", err)
	}
	backend := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	abs, err := filepath.Abs(o.Dir)
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	s.server = &http.Server{Handler: &cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + abs, "GIT_HTTP_EXPORT_ALL=1"}},
		ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.server.Serve(l) }()
	s.RepoURL = "http://" + l.Addr().String() + "/gitops.git"
	return nil
}

// Stop stops serving the repository; the ArgoCD processes stop with the cluster.
func (s *Stack) Stop() error {
	if s.server == nil {
		return nil
	}
	return s.server.Close()
}

// configure creates ArgoCD's namespace, its settings (argocd-cm with this project's health
// checks and a short reconciliation period, argocd-secret) and the default AppProject.
func configure(ctx context.Context, kube client.Client, o Options) error {
	health := map[string]string{
		"policy.karpenter.sh_CapacityBudget": "health-capacitybudget.lua",
		"policy.karpenter.sh_CapacityPolicy": "health-capacitypolicy.lua",
		"karpenter.kwok.sh_KWOKNodeClass":    "health-nodeclass.lua",
		"karpenter.k8s.aws_EC2NodeClass":     "health-nodeclass.lua",
	}
	cm := map[string]string{"timeout.reconciliation": o.Resync.String(), "timeout.reconciliation.jitter": "0s"}
	for kind, file := range health {
		b, err := os.ReadFile(filepath.Join(o.RepoRoot, "config", "argocd", file))
		if err != nil {
			return err
		}
		cm["resource.customizations.health."+kind] = string(b)
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	labels := map[string]string{"app.kubernetes.io/part-of": "argocd"}
	project := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "AppProject",
		"metadata": map[string]any{"name": "default", "namespace": Namespace},
		"spec": map[string]any{
			"sourceRepos":              []any{"*"},
			"destinations":             []any{map[string]any{"server": "*", "namespace": "*"}},
			"clusterResourceWhitelist": []any{map[string]any{"group": "*", "kind": "*"}},
		},
	}}
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "argocd-cm", Namespace: Namespace, Labels: labels}, Data: cm},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "argocd-rbac-cm", Namespace: Namespace, Labels: labels}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "argocd-secret", Namespace: Namespace, Labels: labels},
			StringData: map[string]string{"server.secretkey": hex.EncodeToString(key)}},
		project,
	} {
		if err := kube.Create(ctx, obj); client.IgnoreAlreadyExists(err) != nil {
			return fmt.Errorf("creating %s %s: %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
		}
	}
	return nil
}

// startArgoCD starts Redis, the repo server and the application controller on free ports.
func (s *Stack) startArgoCD(c *cluster.Cluster, o Options) error {
	ports, err := cluster.FreePorts(4)
	if err != nil {
		return err
	}
	redis, repo, repoMetrics, controllerMetrics := ports[0], ports[1], ports[2], ports[3]
	addr := func(p int) string { return "127.0.0.1:" + strconv.Itoa(p) }
	// ArgoCD's paths default to its image's /app/config: here, directories of the stack's own
	// (empty: no extra TLS certificates, known hosts or plugins), and no GnuPG verification.
	data := filepath.Join(o.Dir, "argocd")
	for _, d := range []string{"tls", "ssh", "plugins", "tmp"} {
		if err := os.MkdirAll(filepath.Join(data, d), 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(data, "ssh", "ssh_known_hosts"), nil, 0o644); err != nil {
		return err
	}
	env := []string{"KUBECONFIG=" + c.Kubeconfig, "ARGOCD_FAKE_IN_CLUSTER=true", "ARGOCD_NAMESPACE=" + Namespace,
		"ARGOCD_GPG_ENABLED=false", "ARGOCD_TLS_DATA_PATH=" + filepath.Join(data, "tls"), "ARGOCD_SSH_DATA_PATH=" + filepath.Join(data, "ssh"),
		"ARGOCD_PLUGINSOCKFILEPATH=" + filepath.Join(data, "plugins"), "TMPDIR=" + filepath.Join(data, "tmp"),
		// ArgoCD's git-verify-wrapper.sh, which the repo server runs, sits next to the binary.
		"PATH=" + filepath.Dir(o.ArgoCD) + string(os.PathListSeparator) + os.Getenv("PATH")}
	for _, p := range []*cluster.Process{
		{Name: "argocd-redis", Path: o.ArgoCD, Args: []string{"redis", "--addr", addr(redis)}},
		{Name: "argocd-repo-server", Path: o.ArgoCD, Env: env, Args: []string{"repo-server",
			"--address", "127.0.0.1", "--port", strconv.Itoa(repo), "--metrics-address", "127.0.0.1", "--metrics-port", strconv.Itoa(repoMetrics),
			"--disable-tls", "--client-ca-path=", "--redis", addr(redis), "--loglevel", "info",
			// A push is seen at the next reconciliation, not when main's cached commit expires.
			"--revision-cache-expiration", o.Resync.String()}},
		{Name: "argocd-application-controller", Path: o.ArgoCD, Env: env, Args: []string{"application-controller",
			"--kubeconfig", c.Kubeconfig, "--namespace", Namespace,
			"--repo-server", addr(repo), "--repo-server-plaintext", "--redis", addr(redis),
			"--metrics-port", strconv.Itoa(controllerMetrics), "--loglevel", "info",
			"--status-processors", "4", "--operation-processors", "2", "--self-heal-timeout-seconds", "2",
			"--app-resync", strconv.Itoa(int(o.Resync.Seconds())), "--app-resync-jitter", "0"}},
	} {
		if err := c.StartProcess(p); err != nil {
			return err
		}
		o.Log("started %s", p.Name)
	}
	// Ready when Redis and the repo server accept connections (the controller has no port).
	for _, w := range []struct {
		name string
		port int
	}{{"argocd-redis", redis}, {"argocd-repo-server", repo}} {
		deadline := time.Now().Add(time.Minute)
		for {
			conn, err := net.DialTimeout("tcp", addr(w.port), time.Second)
			if err == nil {
				conn.Close()
				break
			}
			for _, p := range c.Processes() {
				if exited, perr := p.Exited(); exited && strings.HasPrefix(p.Name, "argocd") {
					return fmt.Errorf("%s exited (%v); last lines of its log:\n%s", p.Name, perr, c.LogTail(p.Name, 10))
				}
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s is not listening on %s after a minute:\n%s", w.name, addr(w.port), c.LogTail(w.name, 10))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return nil
}

// application is the one Application: the repository's main branch into the cluster, with
// automated sync, prune and self-heal, by server-side apply.
func application(repoURL string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": Application, "namespace": Namespace,
			// ServerSideApply=true turns on server-side diff, which (ArgoCD v3.6.1) reports a
			// change the API server refuses as Synced and never syncs it: the diff is
			// computed client-side, so the refusal is seen (docs/gitops.md).
			"annotations": map[string]any{"argocd.argoproj.io/compare-options": "ServerSideDiff=false"}},
		"spec": map[string]any{
			"project":     "default",
			"source":      map[string]any{"repoURL": repoURL, "targetRevision": "main", "path": "."},
			"destination": map[string]any{"server": "https://kubernetes.default.svc"},
			"syncPolicy": map[string]any{
				"automated":   map[string]any{"prune": true, "selfHeal": true},
				"syncOptions": []any{"ServerSideApply=true"},
				"retry":       map[string]any{"limit": 5, "backoff": map[string]any{"duration": "2s", "factor": 2, "maxDuration": "30s"}},
			},
		},
	}}
}
