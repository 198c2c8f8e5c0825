package scheduling

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
)

func TestCapacityTypeOf(t *testing.T) {
	for name, tc := range map[string]struct {
		labels   map[string]string
		ct, from string
	}{
		"karpenter's label":             {map[string]string{karpv1.CapacityTypeLabelKey: "spot", LabelEKSCapacityType: "ON_DEMAND"}, "spot", karpv1.CapacityTypeLabelKey},
		"EKS managed node group, Spot":  {map[string]string{LabelEKSCapacityType: "SPOT"}, "spot", LabelEKSCapacityType},
		"EKS on-demand":                 {map[string]string{LabelEKSCapacityType: "ON_DEMAND"}, "on-demand", LabelEKSCapacityType},
		"EKS capacity block":            {map[string]string{LabelEKSCapacityType: "CAPACITY_BLOCK"}, "reserved", LabelEKSCapacityType},
		"AKS spot pool":                 {map[string]string{LabelAKSScaleSetPriority: "spot"}, "spot", LabelAKSScaleSetPriority},
		"GKE Spot":                      {map[string]string{LabelGKESpot: "true"}, "spot", LabelGKESpot},
		"GKE preemptible":               {map[string]string{LabelGKEPreemptible: "true"}, "spot", LabelGKEPreemptible},
		"GKE standard":                  {map[string]string{LabelGKEProvisioning: "standard"}, "on-demand", LabelGKEProvisioning},
		"nothing says: on-demand":       {map[string]string{corev1.LabelInstanceTypeStable: "m6i.xlarge"}, "on-demand", ""},
		"an unknown EKS value: assumed": {map[string]string{LabelEKSCapacityType: "SOMETHING"}, "on-demand", ""},
	} {
		if ct, from := CapacityTypeOf(tc.labels); ct != tc.ct || from != tc.from {
			t.Errorf("%s: %s from %q, want %s from %q", name, ct, from, tc.ct, tc.from)
		}
	}
}

// A node the cluster did not label is priced on-demand, not at its type's cheapest (Spot)
// offering; one another provisioner labels Spot is priced Spot.
func TestNodePriceOfAnUnlabelledNode(t *testing.T) {
	it := &cloudprovider.InstanceType{Name: "m6i.xlarge", Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
		Offerings: cloudprovider.Offerings{
			{Zone: "us-east-1c", CapacityType: karpv1.CapacityTypeOnDemand, Price: 0.192, Available: true},
			{Zone: "us-east-1c", CapacityType: karpv1.CapacityTypeSpot, Price: 0.072021, Available: true},
		}}
	its := []*cloudprovider.InstanceType{it}
	base := map[string]string{corev1.LabelInstanceTypeStable: "m6i.xlarge", corev1.LabelTopologyZone: "us-east-1c"}
	if p, ok := NodePrice(its, base); !ok || p != 0.192 {
		t.Errorf("unlabelled: $%v/hour (%v), want the on-demand 0.192", p, ok)
	}
	spot := map[string]string{LabelEKSCapacityType: "SPOT"}
	for k, v := range base {
		spot[k] = v
	}
	if p, ok := NodePrice(its, spot); !ok || p != 0.072021 {
		t.Errorf("EKS Spot: $%v/hour, want 0.072021", p)
	}
}
