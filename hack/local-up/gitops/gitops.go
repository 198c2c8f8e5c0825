// Package gitops is the GitOps half of `make run-argocd` and its e2e suite: a Git
// repository on disk served over smart HTTP on loopback (git http-backend) and seeded with
// the samples, the CRD chart and the webhook configuration, a clone of it whose `git push
// origin HEAD` is "merge to main", and ArgoCD's application controller and repo server (with
// a Redis, and helm for the chart) syncing two Applications from it into the local cluster,
// with this project's health checks in argocd-cm.
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
	"sigs.k8s.io/yaml"

	"github.com/karpenter-policy/karpenter/test/cluster"
)

// Namespace is ArgoCD's namespace. Application syncs the repository's top directory (node
// classes, NodePools, budgets, policies, the webhook configuration); CRDApplication syncs the
// CRD chart at charts/karpenter-crd.
const (
	Namespace      = "argocd"
	Application    = "karpenter"
	CRDApplication = "karpenter-crd"
)

// Options say where the stack keeps its state and what it runs.
type Options struct {
	// Dir holds the bare repository (gitops.git) and the clone (gitops).
	Dir string
	// RepoRoot is the repository, for the samples and config/argocd.
	RepoRoot string
	// ArgoCD is the binary of hack/argocd.sh, CRDs ArgoCD's manifests/crds directory and Helm
	// the binary of hack/helm.sh (the repo server renders the CRD chart with it); FindTools
	// builds or finds them.
	ArgoCD, CRDs, Helm string
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

// FindTools builds (or finds, when cached) ArgoCD and helm with their scripts under hack/,
// and sets the options' ArgoCD, CRDs and Helm.
func (o *Options) FindTools() error {
	for _, t := range []struct {
		into *string
		args []string
		what string
	}{
		{&o.ArgoCD, []string{"argocd.sh"}, "building ArgoCD"},
		{&o.CRDs, []string{"argocd.sh", "crds"}, "finding ArgoCD's CRDs"},
		{&o.Helm, []string{"helm.sh"}, "building helm"},
	} {
		cmd := exec.Command(filepath.Join(o.RepoRoot, "hack", t.args[0]), t.args[1:]...)
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			return fmt.Errorf("%s (hack/%s): %w", t.what, strings.Join(t.args, " "), err)
		}
		*t.into = strings.TrimSpace(string(out))
	}
	return nil
}

// Seed are the samples the repository starts with: the KWOKNodeClass, the NodePools, a
// Namespace with a CapacityBudget, and the sample CapacityPolicy. seed adds a v1beta1
// NodePool, the validating webhook configuration and the CRD chart.
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

// legacyFile is a NodePool kept in Git at the deprecated v1beta1 API, as a repository
// written for Karpenter v0.37 holds it: the conversion webhook stores it as v1 and gives the
// text back as written when ArgoCD reads it at v1beta1, so it stays Synced. Its taint keeps
// it to the pods that ask for it.
const legacyFile = "25-nodepool-legacy-v1beta1.yaml"

const legacyDoc = `# Written for Karpenter v0.37 (karpenter.sh/v1beta1); stored as v1 by the conversion webhook.
apiVersion: karpenter.sh/v1beta1
kind: NodePool
metadata:
  name: legacy
spec:
  template:
    spec:
      nodeClassRef:
        apiVersion: karpenter.kwok.sh/v1alpha1
        kind: KWOKNodeClass
        name: default
      requirements:
      - key: karpenter.sh/capacity-type
        operator: In
        values: ["on-demand"]
      taints:
      - key: legacy
        value: "true"
        effect: NoSchedule
      kubelet:
        maxPods: 110
        systemReserved:
          memory: 1024Mi
  limits:
    cpu: "1000"
    memory: 4096Gi
  disruption:
    consolidationPolicy: WhenUnderutilized
    expireAfter: 720h
`

// webhooksFile holds the webhook configurations (validating, and the CapacityBudget gate),
// pointed at the local manager.
// In a cluster it is the karpenter chart's; here the manager runs as a local process, not
// from the chart (the local cluster's nodes are kwok's, which run no containers), so Git
// holds the rendered object. Its caBundle is not in Git: the manager injects it.
const webhooksFile = "60-validating-webhook-configuration.yaml"

// Start seeds and serves the repository, installs ArgoCD's CRDs and configuration into the
// cluster, starts ArgoCD's processes as part of it, and creates the Applications.
func Start(ctx context.Context, c *cluster.Cluster, kube client.Client, o Options) (*Stack, error) {
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	if o.Resync == 0 {
		o.Resync = 5 * time.Second
	}
	if o.ArgoCD == "" || o.CRDs == "" || o.Helm == "" {
		if err := o.FindTools(); err != nil {
			return nil, err
		}
	}
	// git runs in and clones between the stack's directories: every path is absolute.
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	o.Dir = dir
	if c.WebhookURL() == "" {
		return nil, fmt.Errorf("the cluster runs no local manager serving webhooks (cluster.Options.WebhookPort)")
	}
	s := &Stack{Clone: filepath.Join(o.Dir, "gitops")}
	if err := s.seed(o, c.WebhookURL()); err != nil {
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
	kube, err = client.New(c.Config, client.Options{Scheme: kube.Scheme()})
	if err != nil {
		return nil, errorsJoin(err, s.Stop())
	}
	if err := configure(ctx, kube, o); err != nil {
		return nil, errorsJoin(err, s.Stop())
	}
	if err := s.startArgoCD(c, o); err != nil {
		return nil, errorsJoin(err, s.Stop())
	}
	for _, app := range []*unstructured.Unstructured{crdApplication(s.RepoURL, c.WebhookURL()), application(s.RepoURL)} {
		if err := kube.Create(ctx, app); err != nil {
			return nil, errorsJoin(fmt.Errorf("creating the Application %s: %w", app.GetName(), err), s.Stop())
		}
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

func (s *Stack) seed(o Options, webhookURL string) error {
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
	for name, doc := range map[string]string{"30-namespace-team-a.yaml": namespaceDoc, legacyFile: legacyDoc} {
		if err := os.WriteFile(filepath.Join(s.Clone, name), []byte(doc), 0o644); err != nil {
			return err
		}
	}
	hooks, err := cluster.LocalWebhooks(webhookURL, cluster.WebhookFiles(o.RepoRoot)...)
	if err != nil {
		return err
	}
	if err := writeObjects(filepath.Join(s.Clone, webhooksFile), "# The validating webhooks and the CapacityBudget gate, served by the local manager; their CA is injected, not kept in Git.\n", hooks); err != nil {
		return err
	}
	if err := os.CopyFS(filepath.Join(s.Clone, "charts", "karpenter-crd"), os.DirFS(filepath.Join(o.RepoRoot, "charts", "karpenter-crd"))); err != nil {
		return fmt.Errorf("copying the CRD chart: %w", err)
	}
	if err := s.Git("add", "."); err != nil {
		return err
	}
	if err := s.Git("commit", "-q", "-m", "The samples: a KWOKNodeClass, three NodePools (one at v1beta1), team-a's budget, a CapacityPolicy, the webhooks and the CRD chart"); err != nil {
		return err
	}
	return s.Git("push", "-q", "origin", "HEAD:main")
}

// writeObjects writes objects as one YAML stream under a comment.
func writeObjects(path, comment string, objs []*unstructured.Unstructured) error {
	var b strings.Builder
	b.WriteString(comment)
	for _, u := range objs {
		y, err := yaml.Marshal(u.Object)
		if err != nil {
			return err
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
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
		"policy.karpenter.sh_CapacityBudget":        "health-capacitybudget.lua",
		"policy.karpenter.sh_ClusterCapacityBudget": "health-capacitybudget.lua",
		"policy.karpenter.sh_CapacityPolicy":        "health-capacitypolicy.lua",
		"policy.karpenter.sh_CapacityException":     "health-capacityexception.lua",
		"karpenter.sh_NodeOverlay":                  "health-nodeoverlay.lua",
		"karpenter.kwok.sh_KWOKNodeClass":           "health-nodeclass.lua",
		"karpenter.k8s.aws_EC2NodeClass":            "health-nodeclass.lua",
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
		// ArgoCD's git-verify-wrapper.sh, which the repo server runs, sits next to the binary;
		// the repo server renders Helm sources with the helm it finds first on PATH.
		"PATH=" + filepath.Dir(o.ArgoCD) + string(os.PathListSeparator) + filepath.Dir(o.Helm) + string(os.PathListSeparator) + os.Getenv("PATH")}
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

// application syncs the repository's top directory into the cluster, with automated sync,
// prune and self-heal, by server-side apply.
func application(repoURL string) *unstructured.Unstructured {
	return argoApplication(Application, map[string]any{"repoURL": repoURL, "targetRevision": "main", "path": "."}, true)
}

// crdApplication syncs the CRD chart from the repository, its conversion webhook pointed at
// the local manager. It never prunes: a CRD deleted by a sync deletes every object of its
// kind (docs/gitops.md).
func crdApplication(repoURL, webhookURL string) *unstructured.Unstructured {
	return argoApplication(CRDApplication, map[string]any{"repoURL": repoURL, "targetRevision": "main", "path": "charts/karpenter-crd",
		"helm": map[string]any{"releaseName": "karpenter-crd", "valuesObject": map[string]any{"webhook": map[string]any{"url": webhookURL}}}}, false)
}

// argoApplication is an Application created with a first sync operation, as `argocd app
// create` followed by `argocd app sync` would: the local cluster installed the CRDs and the
// webhook configuration before ArgoCD ran, and ArgoCD (finding no diff) would never apply
// them on its own, so ArgoCD would not become their field manager.
func argoApplication(name string, source map[string]any, prune bool) *unstructured.Unstructured {
	options := []any{"ServerSideApply=true"}
	retry := map[string]any{"limit": 5, "backoff": map[string]any{"duration": "2s", "factor": 2, "maxDuration": "30s"}}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": name, "namespace": Namespace,
			// ServerSideApply=true turns on server-side diff, which (ArgoCD v3.6.1) reports a
			// change the API server refuses as Synced and never syncs it: the diff is
			// computed client-side, so the refusal is seen (docs/gitops.md).
			"annotations": map[string]any{"argocd.argoproj.io/compare-options": "ServerSideDiff=false"}},
		"spec": map[string]any{
			"project":     "default",
			"source":      source,
			"destination": map[string]any{"server": "https://kubernetes.default.svc"},
			"syncPolicy": map[string]any{
				"automated":   map[string]any{"prune": prune, "selfHeal": true},
				"syncOptions": options,
				"retry":       retry,
			},
		},
		"operation": map[string]any{
			"initiatedBy": map[string]any{"username": "local-up"},
			"sync":        map[string]any{"revision": "main", "prune": prune, "syncOptions": options},
			"retry":       retry,
		},
	}}
}
