package aws_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/karpenter-policy/karpenter/api/install"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/providers/aws"
	"github.com/karpenter-policy/karpenter/scheduling/solver"
)

// refuse keeps pods off the offerings a policy refuses by an offering filter, which the
// NodeClaim's requirements do not carry.
type refuse func(it *cloudprovider.InstanceType, o cloudprovider.Offering) bool

func (r refuse) Constraints(*corev1.Pod, string) *solver.Constraints {
	return &solver.Constraints{OfferingKey: "refuse", AllowOffering: func(it *cloudprovider.InstanceType, o cloudprovider.Offering) bool { return !r(it, o) }}
}

// The provider launches the offering the solver priced (the one price rule), through the SDK
// against the emulator: for the NodeClaims of solves with no policy and with policies the
// requirements do not carry (on-demand only; not the cheapest type), the instance's type,
// zone and capacity type are the priced offering's, at its price.
func TestLaunchesTheOfferingTheSolverPriced(t *testing.T) {
	e := emulator
	ctx := context.Background()
	r := resolver(t, e, "local")
	nc := readyNodeClass(t, r, "priced-01")
	kube := fake.NewClientBuilder().WithScheme(install.NewScheme()).WithObjects(nc).Build()
	clients, pricing, its := providers(t, e)
	if err := pricing.UpdateSpot(ctx); err != nil {
		t.Fatal(err)
	}
	p := aws.NewProvider(kube, aws.Settings{ClusterName: "local", ClusterEndpoint: "https://10.0.0.1:6443", Region: e.Region, KubernetesVersion: "1.37"}, clients, its, pricing)
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
		NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: nc.Name},
		Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.LabelInstanceFamily, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5", "c5", "r5", "t3"}}}}}}}
	offered, err := p.GetInstanceTypes(ctx, np)
	if err != nil || len(offered) == 0 {
		t.Fatalf("%d instance types, %v", len(offered), err)
	}
	var cheapest string
	for _, tc := range []struct {
		name   string
		policy solver.PolicyHook
	}{
		{"no policy", nil},
		{"on-demand only", refuse(func(_ *cloudprovider.InstanceType, o cloudprovider.Offering) bool {
			return o.CapacityType != karpv1.CapacityTypeOnDemand
		})},
		{"not the cheapest type", refuse(func(it *cloudprovider.InstanceType, _ cloudprovider.Offering) bool { return it.Name == cheapest })},
	} {
		var pods []*corev1.Pod
		for i := range 3 {
			pods = append(pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i), Namespace: "team", UID: types.UID(fmt.Sprintf("%s-%d", tc.name, i))},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("700m"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}})
		}
		res, err := solver.Solve(&solver.Input{Pods: pods, NodePools: []*solver.NodePool{{NodePool: np, InstanceTypes: offered}}, Policy: tc.policy})
		if err != nil || len(res.NodeClaims) == 0 {
			t.Fatalf("%s: %d NodeClaims, %v", tc.name, len(res.NodeClaims), err)
		}
		for _, c := range res.NodeClaims {
			if cheapest == "" {
				cheapest = c.InstanceType.Name
			}
			got, err := p.Create(ctx, solver.NodeClaimFor(np, c))
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			want := cloudprovider.Priced(c.InstanceType.Name, c.Offering)
			if g := got.Labels; g[karpv1.LabelInstanceType] != want.InstanceType || g[karpv1.LabelTopologyZone] != want.Zone || g[karpv1.CapacityTypeLabelKey] != want.CapacityType {
				t.Errorf("%s: launched %s/%s/%s, the solver priced %s (deviation %q)", tc.name, g[karpv1.LabelInstanceType], g[karpv1.LabelTopologyZone],
					g[karpv1.CapacityTypeLabelKey], want, got.Annotations[cloudprovider.LaunchDeviationAnnotation])
			}
			for _, it := range offered {
				for _, o := range it.Offerings {
					if it.Name == got.Labels[karpv1.LabelInstanceType] && o.Zone == got.Labels[karpv1.LabelTopologyZone] && o.CapacityType == got.Labels[karpv1.CapacityTypeLabelKey] && o.Price != c.Offering.Price {
						t.Errorf("%s: launched at $%v/h, the solver priced $%v/h", tc.name, o.Price, c.Offering.Price)
					}
				}
			}
		}
	}
}
