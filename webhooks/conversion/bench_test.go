package conversion

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	awsv1 "github.com/karpenter-policy/karpenter/api/aws/v1"
	awsv1beta1 "github.com/karpenter-policy/karpenter/api/aws/v1beta1"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	karpv1beta1 "github.com/karpenter-policy/karpenter/api/karpenter/v1beta1"
)

// Conversion latency per object: run with
// go test ./webhooks/conversion -run=^$ -bench=. -benchmem

func benchNodePoolV1beta1() *karpv1beta1.NodePool {
	return &karpv1beta1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: "general", Labels: map[string]string{"team": "a"}},
		Spec: karpv1beta1.NodePoolSpec{
			Template: karpv1beta1.NodeClaimTemplate{Spec: karpv1beta1.NodeClaimSpec{
				NodeClassRef: &karpv1beta1.NodeClassReference{APIVersion: "karpenter.k8s.aws/v1beta1", Kind: "EC2NodeClass", Name: "default"},
				Requirements: []karpv1beta1.NodeSelectorRequirementWithMinValues{
					{Key: "karpenter.sh/capacity-type", Operator: corev1.NodeSelectorOpIn, Values: []string{"spot", "on-demand"}},
					{Key: "karpenter.k8s.aws/instance-category", Operator: corev1.NodeSelectorOpIn, Values: []string{"c", "m", "r"}},
					{Key: "karpenter.k8s.aws/instance-generation", Operator: corev1.NodeSelectorOpGt, Values: []string{"4"}},
				},
				Kubelet: &karpv1beta1.KubeletConfiguration{MaxPods: ptr.To[int32](110)},
			}},
			Disruption: karpv1beta1.Disruption{ConsolidationPolicy: karpv1beta1.ConsolidationPolicyWhenUnderutilized,
				ExpireAfter: karpv1.MustParseNillableDuration("720h"), Budgets: []karpv1beta1.Budget{{Nodes: "10%"}}},
		},
	}
}

func BenchmarkNodePoolToV1(b *testing.B) {
	src, ctx := benchNodePoolV1beta1(), context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := converter.NodePoolToV1(ctx, src, &karpv1.NodePool{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNodePoolToV1beta1(b *testing.B) {
	hub, ctx := &karpv1.NodePool{}, context.Background()
	if err := converter.NodePoolToV1(ctx, benchNodePoolV1beta1(), hub); err != nil {
		b.Fatal(err)
	}
	hub.Spec.Disruption.Budgets[0].Reasons = []karpv1.DisruptionReason{karpv1.DisruptionReasonDrifted}
	hub.Spec.Template.Spec.TerminationGracePeriod = &metav1.Duration{Duration: 3600e9}
	b.ReportAllocs()
	for b.Loop() {
		if err := converter.NodePoolToV1beta1(ctx, hub, &karpv1beta1.NodePool{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEC2NodeClassToV1beta1(b *testing.B) {
	src := &awsv1.EC2NodeClass{Spec: awsv1.EC2NodeClassSpec{
		Role: "KarpenterNodeRole", AMISelectorTerms: []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
		SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "c"}}},
		SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "c"}}},
		Kubelet:                    awsv1.KubeletConfiguration{"maxPods": {Raw: []byte("110")}},
	}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := converter.EC2NodeClassToV1beta1(ctx, src, &awsv1beta1.EC2NodeClass{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUnstructuredNodePoolToV1 is what the webhook does per object: decode the JSON form,
// convert, encode, restore the text.
func BenchmarkUnstructuredNodePoolToV1(b *testing.B) {
	src := benchNodePoolV1beta1()
	src.APIVersion, src.Kind = karpv1beta1.SchemeGroupVersion.String(), "NodePool"
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(src)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := converter.Unstructured(ctx, obj, "v1"); err != nil {
			b.Fatal(err)
		}
	}
}
