package nodepool

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/karpenter-policy/karpenter/api/install"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

// A NodePool stamped under another hash version has its NodeClaims re-stamped (a drifted one
// keeps its hash), then its own annotations written; once current, a template change moves
// the NodePool's hash and leaves the NodeClaims', so they drift.
func TestHashMigratesNodeClaimsOnANewVersion(t *testing.T) {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "general", Annotations: map[string]string{
		karpv1.NodePoolHashAnnotationKey: "old", karpv1.NodePoolHashVersionAnnotationKey: "v1"}}}
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"}
	nodeClaim := func(name string, drifted bool) *karpv1.NodeClaim {
		nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.NodePoolLabelKey: "general"},
			Annotations: map[string]string{karpv1.NodePoolHashAnnotationKey: "old-" + name, karpv1.NodePoolHashVersionAnnotationKey: "v1"}}}
		if drifted {
			nc.Status.Conditions = []metav1.Condition{{Type: karpv1.ConditionTypeDrifted, Status: metav1.ConditionTrue, Reason: "NodePoolDrifted", LastTransitionTime: metav1.Now()}}
		}
		return nc
	}
	other := nodeClaim("other-pool", false)
	other.Labels[karpv1.NodePoolLabelKey] = "spot"
	kube := fake.NewClientBuilder().WithScheme(install.NewScheme()).WithObjects(np, nodeClaim("fresh", false), nodeClaim("drifted", true), other).Build()
	c := NewHashController(kube)
	ctx := context.Background()
	reconcileAndGet := func() *karpv1.NodePool {
		t.Helper()
		got := &karpv1.NodePool{}
		if err := kube.Get(ctx, client.ObjectKeyFromObject(np), got); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Reconcile(ctx, got); err != nil {
			t.Fatal(err)
		}
		if err := kube.Get(ctx, client.ObjectKeyFromObject(np), got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	annotations := func(name string) map[string]string {
		nc := &karpv1.NodeClaim{}
		if err := kube.Get(ctx, client.ObjectKey{Name: name}, nc); err != nil {
			t.Fatal(err)
		}
		return nc.Annotations
	}

	got := reconcileAndGet()
	hash := np.Hash()
	if got.Annotations[karpv1.NodePoolHashAnnotationKey] != hash || got.Annotations[karpv1.NodePoolHashVersionAnnotationKey] != karpv1.NodePoolHashVersion {
		t.Fatalf("NodePool annotations %v, want hash %s version %s", got.Annotations, hash, karpv1.NodePoolHashVersion)
	}
	if a := annotations("fresh"); a[karpv1.NodePoolHashAnnotationKey] != hash || a[karpv1.NodePoolHashVersionAnnotationKey] != karpv1.NodePoolHashVersion {
		t.Errorf("a NodeClaim under the old version is re-stamped: %v", a)
	}
	if a := annotations("drifted"); a[karpv1.NodePoolHashAnnotationKey] != "old-drifted" || a[karpv1.NodePoolHashVersionAnnotationKey] != karpv1.NodePoolHashVersion {
		t.Errorf("a drifted NodeClaim keeps its hash under the new version: %v", a)
	}
	if a := annotations("other-pool"); a[karpv1.NodePoolHashVersionAnnotationKey] != "v1" {
		t.Errorf("another NodePool's NodeClaim was touched: %v", a)
	}

	got.Spec.Template.Labels = map[string]string{"team": "a"}
	if err := kube.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	got = reconcileAndGet()
	if got.Annotations[karpv1.NodePoolHashAnnotationKey] == hash || got.Annotations[karpv1.NodePoolHashAnnotationKey] != got.Hash() {
		t.Errorf("after a template change the NodePool's hash is %s, want %s", got.Annotations[karpv1.NodePoolHashAnnotationKey], got.Hash())
	}
	if a := annotations("fresh"); a[karpv1.NodePoolHashAnnotationKey] != hash {
		t.Errorf("a template change under the current version re-stamped a NodeClaim (it must drift): %v", a)
	}
}
