package static

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
)

func instanceType(name, family string, cpu int64, price float64) *cloudprovider.InstanceType {
	return &cloudprovider.InstanceType{Name: name,
		Labels: map[string]string{corev1.LabelInstanceTypeStable: name, karpv1.LabelInstanceFamily: family, corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux"},
		Capacity: corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(cpu, resource.DecimalSI), corev1.ResourceMemory: resource.MustParse("8Gi"),
			corev1.ResourcePods: resource.MustParse("110")},
		Offerings: []cloudprovider.Offering{{Zone: "z-a", CapacityType: karpv1.CapacityTypeOnDemand, Price: price, Available: true}}}
}

// A static pool launches the cheapest node its template allows, with its labels and taints.
func TestShapeIsTheCheapestTheTemplateAllows(t *testing.T) {
	its := []*cloudprovider.InstanceType{instanceType("c5.large", "c5", 2, 0.085), instanceType("m5.large", "m5", 2, 0.096), instanceType("m5.xlarge", "m5", 4, 0.192)}
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "static"}, Spec: karpv1.NodePoolSpec{Replicas: ptr.To[int64](3),
		Limits: karpv1.Limits{"nodes": resource.MustParse("5")},
		Template: karpv1.NodeClaimTemplate{ObjectMeta: karpv1.ObjectMeta{Labels: map[string]string{"team": "a"}}, Spec: karpv1.NodeClaimTemplateSpec{
			Taints:       []corev1.Taint{{Key: "dedicated", Value: "a", Effect: corev1.TaintEffectNoSchedule}},
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.LabelInstanceFamily, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5"}}}}}}}
	shape, err := Shape(np, its)
	if err != nil {
		t.Fatal(err)
	}
	if shape.InstanceType.Name != "m5.large" {
		t.Errorf("launches %s, want m5.large (the cheapest m5)", shape.InstanceType.Name)
	}
	for _, it := range shape.InstanceTypes {
		if it.Labels[karpv1.LabelInstanceFamily] != "m5" {
			t.Errorf("offers %s, outside the template's families", it.Name)
		}
	}
	np.Spec.Template.Spec.Requirements[0].Values = []string{"r5"}
	if _, err := Shape(np, its); err == nil {
		t.Error("a template no instance type meets gave a shape")
	}
}
