package argocd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/hack/local-up/gitops"
)

// app is the Application's sync and health status, the last operation's phase and message,
// and the resources it reports out of sync.
type app struct {
	sync, health, phase, message, revision string
	outOfSync                              []string
}

func application(ctx context.Context) (app, error) { return applicationNamed(ctx, gitops.Application) }

func applicationNamed(ctx context.Context, name string) (app, error) {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("argoproj.io/v1alpha1")
	u.SetKind("Application")
	if err := kube.Get(ctx, client.ObjectKey{Namespace: gitops.Namespace, Name: name}, u); err != nil {
		return app{}, err
	}
	var a app
	a.sync, _, _ = unstructured.NestedString(u.Object, "status", "sync", "status")
	a.revision, _, _ = unstructured.NestedString(u.Object, "status", "sync", "revision")
	a.health, _, _ = unstructured.NestedString(u.Object, "status", "health", "status")
	a.phase, _, _ = unstructured.NestedString(u.Object, "status", "operationState", "phase")
	a.message, _, _ = unstructured.NestedString(u.Object, "status", "operationState", "message")
	resources, _, _ := unstructured.NestedSlice(u.Object, "status", "resources")
	for _, r := range resources {
		m, _ := r.(map[string]any)
		if m["status"] == "OutOfSync" {
			a.outOfSync = append(a.outOfSync, fmt.Sprintf("%v/%v", m["kind"], m["name"]))
		}
	}
	if conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions"); len(conds) > 0 {
		for _, c := range conds {
			m, _ := c.(map[string]any)
			a.message += fmt.Sprintf(" [%v: %v]", m["type"], m["message"])
		}
	}
	return a, nil
}

// head is the clone's current commit.
func head(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(stack.Clone, ".git", "refs", "heads", "main"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// push commits the clone's changes and pushes them: "merge to main".
func push(t *testing.T, message string) string {
	t.Helper()
	for _, args := range [][]string{{"add", "-A"}, {"commit", "-q", "-m", message}, {"push", "-q", "origin", "HEAD:main"}} {
		if err := stack.Git(args...); err != nil {
			t.Fatal(err)
		}
	}
	return head(t)
}

func edit(t *testing.T, file, old, replacement string) {
	t.Helper()
	path := filepath.Join(stack.Clone, file)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("%s has no %q", file, old)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), old, replacement, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// syncedAt waits until both Applications are Synced and Healthy at revision.
func syncedAt(t *testing.T, ctx context.Context, revision string, timeout time.Duration) {
	t.Helper()
	for _, name := range []string{gitops.CRDApplication, gitops.Application} {
		var last app
		var lastErr error
		if err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
			a, err := applicationNamed(ctx, name)
			if lastErr = err; err == nil {
				last = a
			}
			return err == nil && a.sync == "Synced" && a.health == "Healthy" && a.revision == revision, nil
		}); err != nil {
			t.Fatalf("the Application %s never reached Synced and Healthy at %s: sync %q, health %q, revision %s, operation %s %q, out of sync %v (%v)",
				name, revision[:8], last.sync, last.health, last.revision, last.phase, last.message, last.outOfSync, lastErr)
		}
	}
}

// appliedByArgoCD fails unless ArgoCD is a field manager of obj (it synced it) and the
// caBundle the manager injects is set: the fields Git does not hold that must not diff.
func appliedByArgoCD(t *testing.T, ctx context.Context, obj client.Object, caBundle func() []byte) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := kube.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return false, nil
		}
		argo := false
		for _, f := range obj.GetManagedFields() {
			argo = argo || f.Manager == "argocd-controller"
		}
		return argo && len(caBundle()) > 0, nil
	}); err != nil {
		var managers []string
		for _, f := range obj.GetManagedFields() {
			managers = append(managers, f.Manager+"/"+string(f.Operation))
		}
		t.Fatalf("%s: not applied by ArgoCD with its caBundle injected (field managers %v, caBundle %d bytes)", obj.GetName(), managers, len(caBundle()))
	}
}

func cpuLimit(np *karpv1.NodePool) string {
	q := np.Spec.Limits[corev1.ResourceCPU]
	return q.String()
}

func nodePool(ctx context.Context, name string) (*karpv1.NodePool, error) {
	np := &karpv1.NodePool{}
	return np, kube.Get(ctx, client.ObjectKey{Name: name}, np)
}

// The GitOps workflow, in the order a platform team meets it (one test: each step builds on
// the repository the last one left).
func TestGitOpsWorkflow(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()

	// 1. The seeded repository syncs: ArgoCD's own health checks for NodePools, ours for the
	// node class, the budget and the policy.
	syncedAt(t, ctx, head(t), 3*time.Minute)
	for _, name := range []string{"general", "spot", "legacy"} {
		if _, err := nodePool(ctx, name); err != nil {
			t.Fatalf("NodePool %s from Git is not in the cluster: %v", name, err)
		}
	}
	// ArgoCD owns the CRDs (from the chart) and the webhook configuration, whose caBundle the
	// manager injected: the fields that would be a perpetual diff if ArgoCD diffed them.
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "nodepools.karpenter.sh"}}
	appliedByArgoCD(t, ctx, crd, func() []byte {
		if c := crd.Spec.Conversion; c != nil && c.Webhook != nil && c.Webhook.ClientConfig != nil {
			return c.Webhook.ClientConfig.CABundle
		}
		return nil
	})
	hooks := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "validating-webhook-configuration"}}
	appliedByArgoCD(t, ctx, hooks, func() []byte {
		if len(hooks.Webhooks) == 0 {
			return nil
		}
		return hooks.Webhooks[0].ClientConfig.CABundle
	})

	// 2. A pushed NodePool change reaches the cluster, at v1 and at v1beta1 (converted).
	edit(t, "10-nodepool-general.yaml", `cpu: "1000"`, `cpu: "900"`)
	edit(t, "25-nodepool-legacy-v1beta1.yaml", `cpu: "1000"`, `cpu: "2000"`)
	rev := push(t, "general: at most 900 CPUs; legacy: 2000")
	syncedAt(t, ctx, rev, 2*time.Minute)
	if np, err := nodePool(ctx, "general"); err != nil || cpuLimit(np) != "900" {
		t.Fatalf("NodePool general's cpu limit after the push: %v (%v); want 900", np.Spec.Limits, err)
	}
	if np, err := nodePool(ctx, "legacy"); err != nil || cpuLimit(np) != "2k" {
		t.Fatalf("NodePool legacy's cpu limit after the push at v1beta1: %v (%v); want 2k", np.Spec.Limits, err)
	}

	// 3. While pods scale up and down for two minutes (nodes launched, status written,
	// consolidation), the Application never leaves Synced.
	scale := func(n int32) {
		d := &appsv1.Deployment{}
		if err := kube.Get(ctx, client.ObjectKey{Namespace: "default", Name: "inflate"}, d); err != nil {
			t.Fatal(err)
		}
		d.Spec.Replicas = ptr.To(n)
		if err := kube.Update(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	end := time.Now().Add(2 * time.Minute)
	replicas := []int32{12, 0, 20, 4, 0}
	step := 0
	next := time.Now()
	checks := 0
	for time.Now().Before(end) {
		if time.Now().After(next) && step < len(replicas) {
			scale(replicas[step])
			step++
			next = time.Now().Add(24 * time.Second)
		}
		for _, name := range []string{gitops.CRDApplication, gitops.Application} {
			a, err := applicationNamed(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			if a.sync != "Synced" {
				t.Fatalf("the Application %s left Synced while the cluster worked (%d checks in): %s, out of sync %v", name, checks, a.sync, a.outOfSync)
			}
		}
		checks++
		time.Sleep(2 * time.Second)
	}
	t.Logf("Synced through %d checks over two minutes of scaling", checks)

	// 4. A NodePool the API server refuses fails the sync, naming the field, and the cluster
	// keeps the last good one.
	edit(t, "10-nodepool-general.yaml", "spec:\n  template:", "spec:\n  weight: 1000\n  template:")
	bad := push(t, "general: weight 1000")
	var failed app
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		a, err := application(ctx)
		if err == nil {
			failed = a
		}
		return err == nil && a.sync == "OutOfSync" && strings.Contains(a.message, "spec.weight"), nil
	}); err != nil {
		t.Fatalf("the sync of weight 1000 never failed naming spec.weight: sync %s, operation %s %q", failed.sync, failed.phase, failed.message)
	}
	t.Logf("ArgoCD: %s", failed.message)
	if np, err := nodePool(ctx, "general"); err != nil || np.Spec.Weight != nil || cpuLimit(np) != "900" {
		t.Errorf("the cluster's NodePool general changed after a refused sync: weight %v (%v)", np.Spec.Weight, err)
	}
	if err := stack.Git("revert", "--no-edit", bad); err != nil {
		t.Fatal(err)
	}
	if err := stack.Git("push", "-q", "origin", "HEAD:main"); err != nil {
		t.Fatal(err)
	}
	syncedAt(t, ctx, head(t), 2*time.Minute)

	// 5. A NodePool deleted from Git is pruned, and its nodes drain: first some pods on it.
	scale(6)
	spotClaims := func(ctx context.Context) int {
		claims := &karpv1.NodeClaimList{}
		if err := kube.List(ctx, claims, client.MatchingLabels{karpv1.NodePoolLabelKey: "spot"}); err != nil {
			return -1
		}
		return len(claims.Items)
	}
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		return spotClaims(ctx) > 0, nil
	}); err != nil {
		t.Fatal("the spot pool never got a node for inflate, the cheapest pool for it")
	}
	if err := os.Remove(filepath.Join(stack.Clone, "20-nodepool-spot.yaml")); err != nil {
		t.Fatal(err)
	}
	rev = push(t, "no spot pool")
	syncedAt(t, ctx, rev, 2*time.Minute)
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := nodePool(ctx, "spot")
		if !apierrors.IsNotFound(err) {
			return false, nil
		}
		if spotClaims(ctx) != 0 {
			return false, nil
		}
		d := &appsv1.Deployment{}
		err = kube.Get(ctx, client.ObjectKey{Namespace: "default", Name: "inflate"}, d)
		return err == nil && d.Status.ReadyReplicas == 6, nil
	}); err != nil {
		t.Fatalf("the NodePool deleted from Git was not pruned, or its nodes did not drain with the pods running elsewhere (%d spot NodeClaims left)", spotClaims(ctx))
	}
}
