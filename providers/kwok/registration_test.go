package kwok

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/karpenter-policy/karpenter/api/install"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	kwokv1alpha1 "github.com/karpenter-policy/karpenter/api/kwok/v1alpha1"
)

// With a registrationDelay, the instance exists from launch (Get and List answer for it, so
// garbage collection keeps its NodeClaim) and its Node appears when the delay has run, with the
// labels and capacity it would have had at launch; a NodeClaim being deleted, or one already
// registered whose Node is gone, gets no Node.
func TestRegistrationDelay(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	nc := &kwokv1alpha1.KWOKNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: kwokv1alpha1.KWOKNodeClassSpec{Catalog: "upstream",
		RegistrationDelay: &metav1.Duration{Duration: 5 * time.Second}}}
	c := fake.NewClientBuilder().WithScheme(install.NewScheme()).WithObjects(nc).
		WithStatusSubresource(&corev1.Node{}, &karpv1.NodeClaim{}).Build()
	p := New(c, clk, 1)
	r := p.Registrar()
	launch := func(name string) *karpv1.NodeClaim {
		t.Helper()
		claim := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{karpv1.NodePoolLabelKey: "p"}},
			Spec: karpv1.NodeClaimSpec{NodeClassRef: pool().Spec.Template.Spec.NodeClassRef,
				Taints: []corev1.Taint{{Key: "team", Value: "a", Effect: corev1.TaintEffectNoSchedule}},
				Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
					{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"c-4x-amd64-linux"}},
					{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.CapacityTypeOnDemand}}}}}
		// The lifecycle persists what Create returns.
		launched, err := p.Create(ctx, claim)
		if err != nil {
			t.Fatal(err)
		}
		status := launched.Status
		if err := c.Create(ctx, launched); err != nil {
			t.Fatal(err)
		}
		launched.Status = status
		if err := c.Status().Update(ctx, launched); err != nil {
			t.Fatal(err)
		}
		return launched
	}
	nodeOf := func(name string) *corev1.Node {
		t.Helper()
		n := &corev1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, n); apierrors.IsNotFound(err) {
			return nil
		} else if err != nil {
			t.Fatal(err)
		}
		return n
	}
	listed := func() map[string]int {
		t.Helper()
		list, err := p.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		for _, inst := range list {
			out[inst.Status.ProviderID]++
		}
		return out
	}

	a := launch("a")
	if a.Status.ProviderID != ProviderIDPrefix+"a" || a.Annotations[RegistersAtAnnotation] != "2026-12-01T12:00:05Z" || a.Status.Capacity.Cpu().IsZero() {
		t.Fatalf("launched: provider ID %q, %s=%q, cpu %s", a.Status.ProviderID, RegistersAtAnnotation, a.Annotations[RegistersAtAnnotation], a.Status.Capacity.Cpu())
	}
	if nodeOf("a") != nil {
		t.Fatal("the Node appeared at launch, before the registration delay ran")
	}
	if got, err := p.Get(ctx, a.Status.ProviderID); err != nil || got.Status.ProviderID != a.Status.ProviderID {
		t.Fatalf("Get of an instance not registered yet: %v, %v", got, err)
	}
	if l := listed(); l[a.Status.ProviderID] != 1 {
		t.Fatalf("List of an instance not registered yet: %v", l)
	}

	clk.Step(4 * time.Second)
	if err := r.Step(ctx); err != nil || nodeOf("a") != nil {
		t.Fatalf("after 4s of 5s: err %v, node %v", err, nodeOf("a") != nil)
	}
	b := launch("b") // due at 12:00:09
	gone := launch("gone")
	if err := c.Delete(ctx, gone); err != nil { // no finalizer: the fake client removes it
		t.Fatal(err)
	}

	clk.Step(time.Second)
	if err := r.Step(ctx); err != nil {
		t.Fatal(err)
	}
	n := nodeOf("a")
	if n == nil {
		t.Fatal("after the delay, no Node")
	}
	if n.Spec.ProviderID != a.Status.ProviderID || n.Labels[corev1.LabelInstanceTypeStable] != "c-4x-amd64-linux" ||
		n.Labels["karpenter.kwok.sh/instance-size"] == "" || n.Labels[karpv1.NodePoolLabelKey] != "p" || n.Labels[corev1.LabelHostname] != "a" ||
		n.Labels[corev1.LabelTopologyZone] != a.Labels[corev1.LabelTopologyZone] || n.Annotations[NodeAnnotation] != "fake" ||
		n.Annotations[NodeClassHashAnnotation] != a.Annotations[NodeClassHashAnnotation] {
		t.Fatalf("the Node: provider ID %q, labels %v, annotations %v", n.Spec.ProviderID, n.Labels, n.Annotations)
	}
	if !n.Status.Capacity.Cpu().Equal(*a.Status.Capacity.Cpu()) || n.Status.NodeInfo.BootID != "kwok-uid-a" || len(n.Spec.Taints) != 2 {
		t.Fatalf("the Node: capacity %v, boot ID %q, taints %v", n.Status.Capacity, n.Status.NodeInfo.BootID, n.Spec.Taints)
	}
	if nodeOf("b") != nil || nodeOf("gone") != nil {
		t.Fatal("a Node appeared before its delay ran, or for a deleted NodeClaim")
	}
	if l := listed(); l[a.Status.ProviderID] != 1 || l[b.Status.ProviderID] != 1 || len(l) != 2 {
		t.Fatalf("List once the first registered: %v", l)
	}

	// Registered, and then its Node gone (the instance terminated): not made again.
	a.Status.Conditions = []metav1.Condition{{Type: karpv1.ConditionTypeRegistered, Status: metav1.ConditionTrue, Reason: "Registered", LastTransitionTime: metav1.NewTime(clk.Now())}}
	if err := c.Status().Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, n); err != nil {
		t.Fatal(err)
	}
	clk.Step(5 * time.Second)
	if err := r.Step(ctx); err != nil {
		t.Fatal(err)
	}
	if nodeOf("a") != nil {
		t.Fatal("a registered NodeClaim whose Node is gone got a new one")
	}
	if nodeOf("b") == nil {
		t.Fatal("the second instance did not register after its delay")
	}
	if l := listed(); len(l) != 1 || l[b.Status.ProviderID] != 1 {
		t.Fatalf("List at the end: %v", l)
	}
}
