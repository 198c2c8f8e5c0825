package aws

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/karpenter-policy/karpenter/api/aws/v1"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

// An alias's variants go to the instance types they serve: NVIDIA GPUs get the nvidia build,
// Neuron accelerators the neuron build, the rest the standard one, each of its architecture;
// an image selected by id serves every type of its architecture.
func TestImageForInstanceType(t *testing.T) {
	ami := func(id, arch string, v Variant) awsv1.AMI {
		return awsv1.AMI{ID: id, Requirements: append([]corev1.NodeSelectorRequirement{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{arch}}},
			v.Requirements()...)}
	}
	nc := &awsv1.EC2NodeClass{Status: awsv1.EC2NodeClassStatus{AMIs: []awsv1.AMI{
		ami("ami-1-std-amd", "amd64", VariantStandard), ami("ami-2-nv-amd", "amd64", VariantNvidia), ami("ami-3-neuron", "amd64", VariantNeuron),
		ami("ami-4-std-arm", "arm64", VariantStandard), ami("ami-5-nv-arm", "arm64", VariantNvidia)}}}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   string
	}{
		{"m5.large", map[string]string{corev1.LabelArchStable: "amd64"}, "ami-1-std-amd"},
		{"g5.xlarge", map[string]string{corev1.LabelArchStable: "amd64", karpv1.LabelInstanceGPUManufacturer: "nvidia", karpv1.LabelInstanceGPUCount: "1"}, "ami-2-nv-amd"},
		{"inf2.xlarge", map[string]string{corev1.LabelArchStable: "amd64", karpv1.LabelInstanceAcceleratorManufacturer: "aws", karpv1.LabelInstanceAcceleratorCount: "1"}, "ami-3-neuron"},
		{"g5g.xlarge", map[string]string{corev1.LabelArchStable: "arm64", karpv1.LabelInstanceGPUManufacturer: "nvidia", karpv1.LabelInstanceGPUCount: "1"}, "ami-5-nv-arm"},
		{"m6g.large", map[string]string{corev1.LabelArchStable: "arm64"}, "ami-4-std-arm"},
		{"an AMD GPU: no variant serves it", map[string]string{corev1.LabelArchStable: "amd64", karpv1.LabelInstanceGPUManufacturer: "amd", karpv1.LabelInstanceGPUCount: "1"}, ""},
	} {
		if got := imageFor(nc, tc.labels); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	byID := &awsv1.EC2NodeClass{Status: awsv1.EC2NodeClassStatus{AMIs: []awsv1.AMI{ami("ami-golden", "amd64", "")}}}
	if got := imageFor(byID, map[string]string{corev1.LabelArchStable: "amd64", karpv1.LabelInstanceGPUManufacturer: "nvidia", karpv1.LabelInstanceGPUCount: "1"}); got != "ami-golden" {
		t.Errorf("an image selected by id serves a GPU type of its architecture: got %q", got)
	}
}
