package kwok

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/karpenter-policy/karpenter/api/install"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	kwokv1alpha1 "github.com/karpenter-policy/karpenter/api/kwok/v1alpha1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/scheduling/solver"
)

// onDemandOnly is a policy that keeps every pod off Spot by an offering filter, as a
// CapacityBudget's Spot bounds do: nothing in the NodeClaim's requirements says so.
type onDemandOnly struct{}

func (onDemandOnly) Constraints(*corev1.Pod, string) *solver.Constraints {
	return &solver.Constraints{OfferingKey: "on-demand", AllowOffering: func(_ *cloudprovider.InstanceType, o cloudprovider.Offering) bool {
		return o.CapacityType == karpv1.CapacityTypeOnDemand
	}}
}

func pendingPods(n int, cpu string) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range n {
		out = append(out, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i), Namespace: "team", UID: types.UID(fmt.Sprint("uid-", cpu, "-", i))},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}})
	}
	return out
}

// The provider launches the offering the solver priced (the one price rule): for every
// NodeClaim of solves with and without a policy filter the requirements do not carry, the
// launched instance type, zone, capacity type and price are the solver's. Without the priced
// offering the same NodeClaim would launch on Spot, which the policy refused; and when the
// priced offering has no capacity, the provider launches the next and says why.
func TestLaunchesTheOfferingTheSolverPriced(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	nodeClass := &kwokv1alpha1.KWOKNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: kwokv1alpha1.KWOKNodeClassSpec{Catalog: "embedded"}}
	kube := fake.NewClientBuilder().WithScheme(install.NewScheme()).WithObjects(nodeClass).WithStatusSubresource(&corev1.Node{}).Build()
	p := New(kube, clk, 1)
	np := pool()
	its, err := p.GetInstanceTypes(ctx, np)
	if err != nil {
		t.Fatal(err)
	}
	launched := 0
	for _, tc := range []struct {
		name   string
		policy solver.PolicyHook
		pods   []*corev1.Pod
	}{
		{"no policy", nil, pendingPods(7, "1500m")},
		{"on-demand by filter", onDemandOnly{}, pendingPods(7, "1500m")},
		{"small pods", onDemandOnly{}, pendingPods(3, "100m")},
	} {
		res, err := solver.Solve(&solver.Input{Pods: tc.pods, NodePools: []*solver.NodePool{{NodePool: np, InstanceTypes: its}}, Policy: tc.policy})
		if err != nil || len(res.NodeClaims) == 0 {
			t.Fatalf("%s: %d NodeClaims, %v", tc.name, len(res.NodeClaims), err)
		}
		for _, c := range res.NodeClaims {
			claim := solver.NodeClaimFor(np, c)
			got, err := p.Create(ctx, claim)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			launched++
			want := cloudprovider.Priced(c.InstanceType.Name, c.Offering)
			if g := got.Labels; g[karpv1.LabelInstanceType] != want.InstanceType || g[karpv1.LabelTopologyZone] != want.Zone || g[karpv1.CapacityTypeLabelKey] != want.CapacityType {
				t.Errorf("%s: launched %s/%s/%s, the solver priced %s", tc.name, g[karpv1.LabelInstanceType], g[karpv1.LabelTopologyZone], g[karpv1.CapacityTypeLabelKey], want)
			}
			if price := priceOf(its, got.Labels); price != c.Offering.Price {
				t.Errorf("%s: launched at $%v/h, the solver priced $%v/h", tc.name, price, c.Offering.Price)
			}
			if d := got.Annotations[cloudprovider.LaunchDeviationAnnotation]; d != "" {
				t.Errorf("%s: launched as priced, yet says %q", tc.name, d)
			}
			if tc.policy != nil && c.Offering.CapacityType != karpv1.CapacityTypeOnDemand {
				t.Errorf("%s: the solver priced %s, which the policy refuses", tc.name, want)
			}
			if tc.policy != nil {
				// The same NodeClaim without its priced offering: the provider would take
				// the cheapest its requirements allow, a Spot offering the policy refused.
				bare := claim.DeepCopy()
				bare.Name += "-bare"
				delete(bare.Annotations, cloudprovider.PricedOfferingAnnotation)
				if other, err := p.Create(ctx, bare); err != nil || other.Labels[karpv1.CapacityTypeLabelKey] != karpv1.CapacityTypeSpot {
					t.Errorf("%s: without the priced offering the launch is %v (%v); the test needs it to differ", tc.name, other.Labels, err)
				}
			}
		}
	}
	if launched < 3 {
		t.Fatalf("only %d launches", launched)
	}

	// No capacity for the priced offering: the next is launched, and the NodeClaim says why.
	res, err := solver.Solve(&solver.Input{Pods: pendingPods(1, "1"), NodePools: []*solver.NodePool{{NodePool: np, InstanceTypes: its}}})
	if err != nil || len(res.NodeClaims) != 1 {
		t.Fatalf("%v, %v", res, err)
	}
	c := res.NodeClaims[0]
	nodeClass.Spec.InsufficientCapacity = &kwokv1alpha1.InsufficientCapacityInjection{Percent: 100, Offerings: []kwokv1alpha1.OfferingSelector{
		{InstanceType: c.InstanceType.Name, Zone: c.Offering.Zone, CapacityType: c.Offering.CapacityType}}}
	if err := kube.Update(ctx, nodeClass); err != nil {
		t.Fatal(err)
	}
	got, err := p.Create(ctx, solver.NodeClaimFor(np, c))
	if err != nil {
		t.Fatal(err)
	}
	d := got.Annotations[cloudprovider.LaunchDeviationAnnotation]
	if !strings.Contains(d, "priced "+cloudprovider.Priced(c.InstanceType.Name, c.Offering).String()) || !strings.Contains(d, "no capacity for") {
		t.Errorf("launched %v past a priced offering without capacity; the deviation says %q", got.Labels, d)
	}
}

func priceOf(its []*cloudprovider.InstanceType, labels map[string]string) float64 {
	for _, it := range its {
		if it.Name != labels[karpv1.LabelInstanceType] {
			continue
		}
		for _, o := range it.Offerings {
			if o.Zone == labels[karpv1.LabelTopologyZone] && o.CapacityType == labels[karpv1.CapacityTypeLabelKey] {
				return o.Price
			}
		}
	}
	return -1
}
