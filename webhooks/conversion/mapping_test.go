package conversion

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	awsv1 "github.com/karpenter-policy/karpenter/api/aws/v1"
	awsv1beta1 "github.com/karpenter-policy/karpenter/api/aws/v1beta1"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	karpv1beta1 "github.com/karpenter-policy/karpenter/api/karpenter/v1beta1"
)

// These tests pin the mapping itself, as upstream Karpenter v1.0 defined it; the round-trip
// tests only prove that nothing is lost.

func TestNodePoolV1beta1ToV1Mapping(t *testing.T) {
	src := &karpv1beta1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: "legacy"},
		Spec: karpv1beta1.NodePoolSpec{
			Template: karpv1beta1.NodeClaimTemplate{Spec: karpv1beta1.NodeClaimSpec{
				NodeClassRef: &karpv1beta1.NodeClassReference{APIVersion: "karpenter.k8s.aws/v1beta1", Kind: "EC2NodeClass", Name: "default"},
				Requirements: []karpv1beta1.NodeSelectorRequirementWithMinValues{{Key: "karpenter.sh/capacity-type", Operator: corev1.NodeSelectorOpIn, Values: []string{"spot"}}},
				Kubelet:      &karpv1beta1.KubeletConfiguration{MaxPods: ptr.To[int32](110)},
			}},
			Disruption: karpv1beta1.Disruption{
				ConsolidationPolicy: karpv1beta1.ConsolidationPolicyWhenUnderutilized,
				ExpireAfter:         karpv1.MustParseNillableDuration("168h"),
				Budgets:             []karpv1beta1.Budget{{Nodes: "10%"}},
			},
		},
	}
	dst := &karpv1.NodePool{}
	if err := converter.NodePoolToV1(context.Background(), src, dst); err != nil {
		t.Fatal(err)
	}
	if dst.Spec.Disruption.ConsolidationPolicy != karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized {
		t.Errorf("consolidationPolicy = %s, want WhenEmptyOrUnderutilized", dst.Spec.Disruption.ConsolidationPolicy)
	}
	if got := dst.Spec.Disruption.ConsolidateAfter.String(); got != "0s" {
		t.Errorf("omitted consolidateAfter must become 0s, got %s", got)
	}
	if got := dst.Spec.Template.Spec.ExpireAfter.String(); got != "168h" {
		t.Errorf("disruption.expireAfter must move to template.spec.expireAfter, got %q", got)
	}
	if ref := dst.Spec.Template.Spec.NodeClassRef; ref.Group != "karpenter.k8s.aws" || ref.Kind != "EC2NodeClass" || ref.Name != "default" {
		t.Errorf("nodeClassRef = %+v", ref)
	}
	if got := dst.Annotations[AnnotationV1beta1Kubelet]; got != `{"maxPods":110}` {
		t.Errorf("kubelet annotation = %q, want the kubelet as JSON", got)
	}
	if _, ok := dst.Annotations[AnnotationV1beta1NodeClassRef]; ok {
		t.Error("a nodeClassRef that maps back exactly needs no annotation")
	}
	if dst.APIVersion != "karpenter.sh/v1" {
		t.Errorf("apiVersion = %s", dst.APIVersion)
	}
}

func TestNodeClassRefDefaultsToTheProviderNodeClass(t *testing.T) {
	src := &karpv1beta1.NodeClaim{Spec: karpv1beta1.NodeClaimSpec{NodeClassRef: &karpv1beta1.NodeClassReference{Name: "default"}}}
	dst := &karpv1.NodeClaim{}
	c := &Converter{DefaultNodeClass: EC2NodeClass}
	if err := c.NodeClaimToV1(context.Background(), src, dst); err != nil {
		t.Fatal(err)
	}
	if ref := dst.Spec.NodeClassRef; ref.Group != "karpenter.k8s.aws" || ref.Kind != "EC2NodeClass" {
		t.Errorf("a nodeClassRef without apiVersion and kind must take the provider's node class, got %+v", ref)
	}
	if got := dst.Annotations[AnnotationV1beta1NodeClassRef]; got != `{"name":"default"}` {
		t.Errorf("the omitted form must be kept, got %q", got)
	}
	if got := dst.Spec.ExpireAfter.String(); got != "720h" {
		t.Errorf("a v1beta1 NodeClaim has no expireAfter; v1 must get its default 720h, got %q", got)
	}
}

func TestNodePoolV1ToV1beta1Mapping(t *testing.T) {
	src := &karpv1.NodePool{Spec: karpv1.NodePoolSpec{
		Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
			NodeClassRef:           &karpv1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"},
			TerminationGracePeriod: &metav1.Duration{Duration: 3600e9},
			ExpireAfter:            karpv1.MustParseNillableDuration("Never"),
		}},
		Disruption: karpv1.Disruption{
			ConsolidationPolicy: karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized,
			ConsolidateAfter:    karpv1.MustParseNillableDuration("30s"),
			Budgets:             []karpv1.Budget{{Nodes: "0", Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonDrifted}}},
		},
	}}
	dst := &karpv1beta1.NodePool{}
	if err := converter.NodePoolToV1beta1(context.Background(), src, dst); err != nil {
		t.Fatal(err)
	}
	d := dst.Spec.Disruption
	if d.ConsolidationPolicy != karpv1beta1.ConsolidationPolicyWhenUnderutilized || d.ConsolidateAfter != nil {
		t.Errorf("v1beta1 cannot combine WhenUnderutilized with a consolidateAfter: got %s, %v", d.ConsolidationPolicy, d.ConsolidateAfter)
	}
	if d.ExpireAfter.String() != "Never" {
		t.Errorf("expireAfter = %q, want Never", d.ExpireAfter.String())
	}
	if got := dst.Spec.Template.Spec.NodeClassRef.APIVersion; got != "karpenter.kwok.sh/v1alpha1" {
		t.Errorf("apiVersion = %q", got)
	}
	if got := dst.Annotations[AnnotationV1TerminationGracePeriod]; got != `"1h0m0s"` {
		t.Errorf("terminationGracePeriod annotation = %q", got)
	}
	if got := dst.Annotations[AnnotationV1Disruption]; got == "" {
		t.Error("budget reasons and consolidateAfter must ride in an annotation")
	}
}

func TestEC2NodeClassAMIMapping(t *testing.T) {
	for name, tc := range map[string]struct {
		family      string
		terms       []awsv1beta1.AMISelectorTerm
		wantFamily  *string
		wantAlias   string
		wantStashed bool
	}{
		"family becomes an alias": {family: "AL2023", wantAlias: "al2023@latest"},
		"custom keeps its terms":  {family: "Custom", terms: []awsv1beta1.AMISelectorTerm{{ID: "ami-123"}}, wantFamily: ptr.To("Custom")},
		"ubuntu is served as AL2": {family: "Ubuntu", terms: []awsv1beta1.AMISelectorTerm{{Tags: map[string]string{"a": "b"}}}, wantFamily: ptr.To("AL2"), wantStashed: true},
	} {
		t.Run(name, func(t *testing.T) {
			src := &awsv1beta1.EC2NodeClass{Spec: awsv1beta1.EC2NodeClassSpec{AMIFamily: &tc.family, AMISelectorTerms: tc.terms}}
			dst := &awsv1.EC2NodeClass{}
			if err := converter.EC2NodeClassToV1(context.Background(), src, dst); err != nil {
				t.Fatal(err)
			}
			if !equalJSON(dst.Spec.AMIFamily, tc.wantFamily) {
				t.Errorf("amiFamily = %v, want %v", ptr.Deref(dst.Spec.AMIFamily, "<nil>"), ptr.Deref(tc.wantFamily, "<nil>"))
			}
			if tc.wantAlias != "" && (len(dst.Spec.AMISelectorTerms) != 1 || dst.Spec.AMISelectorTerms[0].Alias != tc.wantAlias) {
				t.Errorf("amiSelectorTerms = %+v, want alias %s", dst.Spec.AMISelectorTerms, tc.wantAlias)
			}
			if _, stashed := dst.Annotations[AnnotationV1beta1AMISelection]; stashed != tc.wantStashed {
				t.Errorf("stashed = %v, want %v", stashed, tc.wantStashed)
			}
		})
	}
}

// v1beta1 has no Balanced: it reads WhenUnderutilized, and Balanced comes back on the way to v1.
func TestNodePoolBalancedSurvivesV1beta1(t *testing.T) {
	src := &karpv1.NodePool{Spec: karpv1.NodePoolSpec{Disruption: karpv1.Disruption{
		ConsolidationPolicy: karpv1.ConsolidationPolicyBalanced, ConsolidateAfter: karpv1.MustParseNillableDuration("5m")}}}
	mid := &karpv1beta1.NodePool{}
	if err := converter.NodePoolToV1beta1(context.Background(), src, mid); err != nil {
		t.Fatal(err)
	}
	if got := mid.Spec.Disruption.ConsolidationPolicy; got != karpv1beta1.ConsolidationPolicyWhenUnderutilized {
		t.Errorf("v1beta1 consolidationPolicy = %s, want WhenUnderutilized", got)
	}
	back := &karpv1.NodePool{}
	if err := converter.NodePoolToV1(context.Background(), mid, back); err != nil {
		t.Fatal(err)
	}
	if got := back.Spec.Disruption; got.ConsolidationPolicy != karpv1.ConsolidationPolicyBalanced || got.ConsolidateAfter.String() != "5m" {
		t.Errorf("back in v1: %s after %s, want Balanced after 5m", got.ConsolidationPolicy, got.ConsolidateAfter.String())
	}
}

// An omitted v1 consolidateAfter is the CRD's 0s: v1beta1 must not read it as Never, and it
// comes back omitted.
func TestNodePoolOmittedConsolidateAfter(t *testing.T) {
	for _, policy := range []karpv1.ConsolidationPolicy{"", karpv1.ConsolidationPolicyWhenEmpty, karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized} {
		src := &karpv1.NodePool{Spec: karpv1.NodePoolSpec{Disruption: karpv1.Disruption{ConsolidationPolicy: policy, Budgets: []karpv1.Budget{{Nodes: "5"}}}}}
		mid := &karpv1beta1.NodePool{}
		if err := converter.NodePoolToV1beta1(context.Background(), src, mid); err != nil {
			t.Fatal(err)
		}
		if after := mid.Spec.Disruption.ConsolidateAfter; after != nil && after.String() != "0s" {
			t.Errorf("%q: v1beta1 consolidateAfter = %s, want omitted or 0s", policy, after.String())
		}
		back := &karpv1.NodePool{}
		if err := converter.NodePoolToV1(context.Background(), mid, back); err != nil {
			t.Fatal(err)
		}
		if after := back.Spec.Disruption.ConsolidateAfter; !omitted(after) {
			t.Errorf("%q: back in v1 consolidateAfter = %s, want omitted", policy, after.String())
		}
	}
}
