package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpenter-policy/karpenter/api/install"
	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/test/env"
)

// impersonating is a client acting as user.
func impersonating(t *testing.T, user string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(local.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: install.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The chart's RBAC on a real cluster (whose controller manager aggregates ClusterRoles): a
// namespace admin reads its namespace's CapacityBudget but cannot raise, replace or delete
// it; the chart's platform role can.
func TestNamespaceAdminCannotChangeItsBudget(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	helm, err := exec.Command(filepath.Join(env.RepoRoot(), "hack", "helm.sh")).Output()
	if err != nil {
		t.Fatal("building helm:", err)
	}
	cmd := exec.Command(strings.TrimSpace(string(helm)), "template", "karpenter", "charts/karpenter", "--namespace", "karpenter")
	cmd.Dir = env.RepoRoot()
	rendered, err := cmd.Output()
	if err != nil {
		t.Fatal("helm template:", err)
	}
	// The chart's ClusterRoles for the policy layer, applied for real.
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(string(rendered)), 4096)
	applied := 0
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			break
		}
		if u.GetKind() != "ClusterRole" || !strings.HasPrefix(u.GetName(), "karpenter-policy-") {
			continue
		}
		data, _ := u.MarshalJSON()
		if err := kube.Patch(ctx, u, client.RawPatch(types.ApplyPatchType, data), client.FieldOwner("e2e"), client.ForceOwnership); err != nil {
			t.Fatal(err)
		}
		name := u.GetName()
		t.Cleanup(func() {
			_ = kube.Delete(context.Background(), &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}})
		})
		applied++
	}
	if applied != 2 {
		t.Fatalf("the chart rendered %d karpenter-policy-* ClusterRoles; want view and admin", applied)
	}

	ns := namespace(t, ctx, "team-rbac", nil)
	b := budget(ns, "2.00", nil)
	create(t, ctx, b)
	bindings := []client.Object{
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "alice-admin", Namespace: ns},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "alice"}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "e2e-platform"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "karpenter-policy-admin"},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "platform"}}},
	}
	create(t, ctx, bindings...)
	t.Cleanup(func() { _ = kube.Delete(context.Background(), bindings[1]) })

	alice, platform := impersonating(t, "alice"), impersonating(t, "platform")
	// Aggregation into admin happens in the controller manager, asynchronously.
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return alice.Get(ctx, client.ObjectKeyFromObject(b), &policyv1.CapacityBudget{}) == nil, nil
	}); err != nil {
		t.Fatal("a namespace admin never could read its CapacityBudget: the view rules were not aggregated into admin")
	}
	// Admin is otherwise in force: alice writes ordinary objects of her namespace.
	if err := alice.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "mine", Namespace: ns}}); err != nil {
		t.Fatalf("a namespace admin cannot create a ConfigMap: %v", err)
	}
	mine := &policyv1.CapacityBudget{}
	if err := alice.Get(ctx, client.ObjectKeyFromObject(b), mine); err != nil {
		t.Fatal(err)
	}
	raised := policyv1.Money("200.00")
	mine.Spec.Limits.HourlyCost = &raised
	if err := alice.Update(ctx, mine); !apierrors.IsForbidden(err) {
		t.Errorf("a namespace admin raising its budget: %v; want Forbidden", err)
	}
	if err := alice.Delete(ctx, mine); !apierrors.IsForbidden(err) {
		t.Errorf("a namespace admin deleting its budget: %v; want Forbidden", err)
	}
	if err := alice.Create(ctx, budget(ns, "100.00", nil).DeepCopy()); !apierrors.IsForbidden(err) && !apierrors.IsAlreadyExists(err) {
		t.Errorf("a namespace admin creating a budget: %v; want Forbidden", err)
	}
	other := budget(ns, "100.00", nil)
	other.Name = "another"
	if err := alice.Create(ctx, other); !apierrors.IsForbidden(err) {
		t.Errorf("a namespace admin creating a second budget: %v; want Forbidden", err)
	}
	// The platform role may.
	theirs := &policyv1.CapacityBudget{}
	if err := platform.Get(ctx, client.ObjectKeyFromObject(b), theirs); err != nil {
		t.Fatal(err)
	}
	lowered := policyv1.Money("1.50")
	theirs.Spec.Limits.HourlyCost = &lowered
	if err := platform.Update(ctx, theirs); err != nil {
		t.Errorf("the platform role changing a budget: %v", err)
	}
}
