package argocd

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/hack/local-up/gitops"
)

func httpStatus(url string) (int, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// app is the Application's sync and health status, the last operation's phase and message,
// and the resources it reports out of sync.
type app struct {
	sync, health, phase, message, revision string
	outOfSync                              []string
}

func application(ctx context.Context) (app, error) {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("argoproj.io/v1alpha1")
	u.SetKind("Application")
	if err := kube.Get(ctx, client.ObjectKey{Namespace: gitops.Namespace, Name: gitops.Application}, u); err != nil {
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

// syncedAt waits until the Application is Synced and Healthy at revision.
func syncedAt(t *testing.T, ctx context.Context, revision string, timeout time.Duration) {
	t.Helper()
	var last app
	var lastErr error
	if err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		a, err := application(ctx)
		if lastErr = err; err == nil {
			last = a
		}
		return err == nil && a.sync == "Synced" && a.health == "Healthy" && a.revision == revision, nil
	}); err != nil {
		t.Fatalf("the Application never reached Synced and Healthy at %s: sync %q, health %q, revision %s, operation %s %q, out of sync %v (%v)",
			revision[:8], last.sync, last.health, last.revision, last.phase, last.message, last.outOfSync, lastErr)
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
	for _, name := range []string{"general", "spot"} {
		if _, err := nodePool(ctx, name); err != nil {
			t.Fatalf("NodePool %s from Git is not in the cluster: %v", name, err)
		}
	}

	// 2. A pushed NodePool change reaches the cluster.
	edit(t, "10-nodepool-general.yaml", `cpu: "1000"`, `cpu: "900"`)
	rev := push(t, "general: at most 900 CPUs")
	syncedAt(t, ctx, rev, 2*time.Minute)
	if np, err := nodePool(ctx, "general"); err != nil || cpuLimit(np) != "900" {
		t.Fatalf("NodePool general's cpu limit after the push: %v (%v); want 900", np.Spec.Limits, err)
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
		a, err := application(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if a.sync != "Synced" {
			t.Fatalf("the Application left Synced while the cluster worked (%d checks in): %s, out of sync %v", checks, a.sync, a.outOfSync)
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
