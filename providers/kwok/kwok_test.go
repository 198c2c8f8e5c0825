package kwok

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/karpenter-policy/karpenter/api/install"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	kwokv1alpha1 "github.com/karpenter-policy/karpenter/api/kwok/v1alpha1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
)

func pool() *karpv1.NodePool {
	return &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
		NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"}}}}}
}

// Instance types are built once per node class and availability: asked again, the same list
// comes back; an offering marked unavailable, or the node class changing, builds them anew; and
// when the offering is available again, so are they.
func TestInstanceTypesAreMemoizedPerNodeClassAndAvailability(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	nc := &kwokv1alpha1.KWOKNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: kwokv1alpha1.KWOKNodeClassSpec{Catalog: "embedded"}}
	c := fake.NewClientBuilder().WithScheme(install.NewScheme()).WithObjects(nc).Build()
	p := New(c, clk, 1)
	first, err := p.GetInstanceTypes(ctx, pool())
	if err != nil || len(first) == 0 {
		t.Fatal(err)
	}
	again, _ := p.GetInstanceTypes(ctx, pool())
	if again[0] != first[0] {
		t.Fatal("asked again with nothing changed, the provider builds the list again")
	}
	it, o := first[0], first[0].Offerings[0]
	p.MarkUnavailable(it.Name, o.Zone, o.CapacityType)
	marked, _ := p.GetInstanceTypes(ctx, pool())
	if marked[0] == first[0] || marked[0].Offerings[0].Available {
		t.Fatal("an offering marked unavailable shows in a new list")
	}
	if !first[0].Offerings[0].Available {
		t.Fatal("the lists handed out before are not changed")
	}
	clk.Step(UnavailableFor + time.Second)
	if back, _ := p.GetInstanceTypes(ctx, pool()); !back[0].Offerings[0].Available {
		t.Fatal("once UnavailableFor passed, the offering is available again")
	}
	nc.Spec.Zones = []string{o.Zone}
	if err := c.Update(ctx, nc); err != nil {
		t.Fatal(err)
	}
	zoned, _ := p.GetInstanceTypes(ctx, pool())
	for _, off := range zoned[0].Offerings {
		if off.Zone != o.Zone {
			t.Fatalf("a changed node class gives a new list: offering in %s", off.Zone)
		}
	}
}

// Deleting an instance terminates it as a cloud does: its node goes NotReady, kwok no longer
// plays its kubelet, the provider no longer has it, and the Node object is deleted (it stays
// while a finalizer holds it).
func TestDeleteTerminatesTheInstance(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Annotations: map[string]string{NodeAnnotation: "fake"}, Finalizers: []string{karpv1.TerminationFinalizer}},
		Spec:   corev1.NodeSpec{ProviderID: ProviderIDPrefix + "n"},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	c := fake.NewClientBuilder().WithScheme(install.NewScheme()).WithObjects(node).WithStatusSubresource(&corev1.Node{}).Build()
	p := New(c, clk, 1)
	claim := &karpv1.NodeClaim{Status: karpv1.NodeClaimStatus{ProviderID: node.Spec.ProviderID}}
	if _, err := p.Get(ctx, claim.Status.ProviderID); err != nil {
		t.Fatalf("a running instance is there: %v", err)
	}
	if err := p.Delete(ctx, claim); err != nil {
		t.Fatalf("terminating: %v", err)
	}
	if _, err := p.Get(ctx, claim.Status.ProviderID); !cloudprovider.IsNodeClaimNotFoundError(err) {
		t.Fatalf("a terminated instance is not found, got %v", err)
	}
	if err := p.Delete(ctx, claim); !cloudprovider.IsNodeClaimNotFoundError(err) {
		t.Fatalf("deleting a terminated instance says it is gone, got %v", err)
	}
	got := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(node), got); err != nil {
		t.Fatal(err)
	}
	ready := corev1.ConditionTrue
	for _, cond := range got.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			ready = cond.Status
		}
	}
	if got.DeletionTimestamp == nil || got.Annotations[NodeAnnotation] == "fake" || ready != corev1.ConditionUnknown {
		t.Fatalf("the node is deleted, unmanaged and NotReady: deleting %v, %s=%q, Ready %s", got.DeletionTimestamp != nil, NodeAnnotation, got.Annotations[NodeAnnotation], ready)
	}
	if list, _ := p.List(ctx); len(list) != 0 {
		t.Fatalf("the provider lists no terminated instance: %d", len(list))
	}
}

// With overlays, Create launches the cheapest offering at the overlaid prices: of c6a.large
// ($0.0765/h) and m5.large ($0.096/h), m5.large once it is priced at $0.01/h.
func TestCreateLaunchesAtOverlaidPrices(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	nc := &kwokv1alpha1.KWOKNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: kwokv1alpha1.KWOKNodeClassSpec{Catalog: "embedded"}}
	c := fake.NewClientBuilder().WithScheme(install.NewScheme()).WithObjects(nc).WithStatusSubresource(&corev1.Node{}).Build()
	claim := func(name string) *karpv1.NodeClaim {
		return &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.NodePoolLabelKey: "p"}}, Spec: karpv1.NodeClaimSpec{
			NodeClassRef: pool().Spec.Template.Spec.NodeClassRef,
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
				{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"c6a.large", "m5.large"}},
				{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.CapacityTypeOnDemand}}}}}
	}
	p := New(c, clk, 1)
	plain, err := p.Create(ctx, claim("plain"))
	if err != nil || plain.Labels[corev1.LabelInstanceTypeStable] != "c6a.large" {
		t.Fatalf("without overlays: %v, %v", plain.Labels, err)
	}
	var asked string
	p.WithOverlays(func(pool string, its []*cloudprovider.InstanceType) []*cloudprovider.InstanceType {
		asked = pool
		out := make([]*cloudprovider.InstanceType, len(its))
		for i, it := range its {
			out[i] = it
			if it.Name == "m5.large" {
				cp := *it
				cp.Offerings = append(cloudprovider.Offerings(nil), it.Offerings...)
				for j := range cp.Offerings {
					cp.Offerings[j].Price = 0.01
				}
				out[i] = &cp
			}
		}
		return out
	})
	overlaid, err := p.Create(ctx, claim("overlaid"))
	if err != nil || overlaid.Labels[corev1.LabelInstanceTypeStable] != "m5.large" || asked != "p" {
		t.Fatalf("with m5.large at $0.01/h: %v (asked for pool %q), %v", overlaid.Labels, asked, err)
	}
}

// A node class whose Ready condition is False launches nothing, with a NodeClassNotReady
// error (the lifecycle deletes the NodeClaim), as upstream's kwok provider; one without a
// condition yet launches.
func TestCreateRefusesANodeClassNotReady(t *testing.T) {
	ctx := context.Background()
	nc := &kwokv1alpha1.KWOKNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: kwokv1alpha1.KWOKNodeClassSpec{Catalog: "embedded"}}
	c := fake.NewClientBuilder().WithScheme(install.NewScheme()).WithObjects(nc).WithStatusSubresource(&corev1.Node{}, &kwokv1alpha1.KWOKNodeClass{}).Build()
	p := New(c, clocktesting.NewFakeClock(time.Now()), 1)
	claim := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Labels: map[string]string{karpv1.NodePoolLabelKey: "p"}},
		Spec: karpv1.NodeClaimSpec{NodeClassRef: pool().Spec.Template.Spec.NodeClassRef}}
	if _, err := p.Create(ctx, claim.DeepCopy()); err != nil {
		t.Fatalf("a node class not reconciled yet: %v", err)
	}
	nc.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "TestingNotReady", Message: "not ready", LastTransitionTime: metav1.Now()}}
	if err := c.Status().Update(ctx, nc); err != nil {
		t.Fatal(err)
	}
	claim.Name = "d"
	if _, err := p.Create(ctx, claim); !cloudprovider.IsNodeClassNotReadyError(err) {
		t.Errorf("Ready False: %v, want a NodeClassNotReady error", err)
	}
}

// The repair policies are upstream kwok's Ready ones, forceful, and the node class's: each
// with its toleration and action, its terminationGracePeriod as the drain bound (unset:
// forceful, as before the bound was built) and its rebootDrain.
func TestRepairPoliciesCarryTheNodeClassBounds(t *testing.T) {
	d := func(s string) *metav1.Duration {
		v, err := time.ParseDuration(s)
		if err != nil {
			t.Fatal(err)
		}
		return &metav1.Duration{Duration: v}
	}
	nc := &kwokv1alpha1.KWOKNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: kwokv1alpha1.KWOKNodeClassSpec{Catalog: "embedded",
		RepairPolicies: []kwokv1alpha1.RepairPolicy{
			{ConditionType: "KWOKUnhealthy", ConditionStatus: "True", Toleration: *d("30s"), TerminationGracePeriod: d("45s")},
			{ConditionType: "KWOKRebootRequired", ConditionStatus: "True", Toleration: *d("30s"), Action: "Reboot", RebootDrain: d("1m")},
		}}}
	c := fake.NewClientBuilder().WithScheme(install.NewScheme()).WithObjects(nc).Build()
	got, err := New(c, clocktesting.NewFakeClock(time.Now()), 1).RepairPolicies(context.Background(), pool())
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		cond, status  string
		toleration    time.Duration
		action        cloudprovider.RepairAction
		bound, reboot string
	}
	str := func(d *time.Duration) string {
		if d == nil {
			return "nil"
		}
		return d.String()
	}
	var rows []row
	for _, p := range got {
		rows = append(rows, row{string(p.ConditionType), string(p.ConditionStatus), p.TolerationDuration, p.Action, str(p.TerminationGracePeriod), str(p.RebootDrain)})
	}
	want := []row{
		{"Ready", "False", 10 * time.Minute, cloudprovider.RepairReplace, "0s", "nil"},
		{"Ready", "Unknown", 10 * time.Minute, cloudprovider.RepairReplace, "0s", "nil"},
		{"KWOKUnhealthy", "True", 30 * time.Second, cloudprovider.RepairReplace, "45s", "nil"},
		{"KWOKRebootRequired", "True", 30 * time.Second, cloudprovider.RepairReboot, "0s", "1m0s"},
	}
	if len(rows) != len(want) {
		t.Fatalf("policies %+v, want %+v", rows, want)
	}
	for i := range want {
		if rows[i] != want[i] {
			t.Errorf("policy %d: %+v, want %+v", i, rows[i], want[i])
		}
	}
}
