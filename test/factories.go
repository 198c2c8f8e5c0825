// Package test holds object factories shared by the test suites: each returns a valid object
// with defaults that the caller overrides with mutators, e.g.
//
//	test.NodePool(func(np *karpv1.NodePool) { np.Spec.Weight = ptr.To[int32](10) })
//
// Names are unique per call, so tests sharing an API server do not collide.
package test

import (
	"fmt"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	awsv1 "github.com/karpenter-policy/karpenter/api/aws/v1"
	awsv1beta1 "github.com/karpenter-policy/karpenter/api/aws/v1beta1"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	karpv1beta1 "github.com/karpenter-policy/karpenter/api/karpenter/v1beta1"
	kwokv1alpha1 "github.com/karpenter-policy/karpenter/api/kwok/v1alpha1"
	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
)

var seq atomic.Int64

// Name returns a unique object name with the given prefix.
func Name(prefix string) string { return fmt.Sprintf("%s-%d", prefix, seq.Add(1)) }

func apply[T any](obj *T, overrides []func(*T)) *T {
	for _, o := range overrides {
		if o != nil {
			o(obj)
		}
	}
	return obj
}

// NodePool returns a valid v1 NodePool for a KWOKNodeClass named "default".
func NodePool(overrides ...func(*karpv1.NodePool)) *karpv1.NodePool {
	return apply(&karpv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: Name("nodepool")},
		Spec: karpv1.NodePoolSpec{
			Template: karpv1.NodeClaimTemplate{
				Spec: karpv1.NodeClaimTemplateSpec{
					Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
						{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.CapacityTypeOnDemand}},
					},
					NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"},
				},
			},
			Disruption: karpv1.Disruption{ConsolidateAfter: karpv1.MustParseNillableDuration("30s")},
		},
	}, overrides)
}

// NodeClaim returns a valid v1 NodeClaim.
func NodeClaim(overrides ...func(*karpv1.NodeClaim)) *karpv1.NodeClaim {
	return apply(&karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: Name("nodeclaim")},
		Spec: karpv1.NodeClaimSpec{
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
				{Key: karpv1.LabelInstanceType, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large", "m5.xlarge"}},
			},
			Resources:    karpv1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}},
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"},
		},
	}, overrides)
}

// NodePoolV1beta1 returns a valid v1beta1 NodePool.
func NodePoolV1beta1(overrides ...func(*karpv1beta1.NodePool)) *karpv1beta1.NodePool {
	return apply(&karpv1beta1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: Name("nodepool-v1beta1")},
		Spec: karpv1beta1.NodePoolSpec{
			Template: karpv1beta1.NodeClaimTemplate{
				Spec: karpv1beta1.NodeClaimSpec{
					Requirements: []karpv1beta1.NodeSelectorRequirementWithMinValues{
						{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.CapacityTypeSpot}},
					},
					NodeClassRef: &karpv1beta1.NodeClassReference{APIVersion: "karpenter.k8s.aws/v1beta1", Kind: "EC2NodeClass", Name: "default"},
				},
			},
			Disruption: karpv1beta1.Disruption{
				ConsolidationPolicy: karpv1beta1.ConsolidationPolicyWhenUnderutilized,
				ExpireAfter:         karpv1.MustParseNillableDuration("720h"),
			},
		},
	}, overrides)
}

// EC2NodeClass returns a valid v1 EC2NodeClass using the al2023@latest alias.
func EC2NodeClass(overrides ...func(*awsv1.EC2NodeClass)) *awsv1.EC2NodeClass {
	return apply(&awsv1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: Name("ec2nodeclass")},
		Spec: awsv1.EC2NodeClassSpec{
			Role:                       "KarpenterNodeRole-test",
			AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
			SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "test"}}},
			SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "test"}}},
		},
	}, overrides)
}

// EC2NodeClassV1beta1 returns a valid v1beta1 EC2NodeClass.
func EC2NodeClassV1beta1(overrides ...func(*awsv1beta1.EC2NodeClass)) *awsv1beta1.EC2NodeClass {
	return apply(&awsv1beta1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: Name("ec2nodeclass-v1beta1")},
		Spec: awsv1beta1.EC2NodeClassSpec{
			AMIFamily:                  ptr.To("AL2023"),
			Role:                       "KarpenterNodeRole-test",
			SubnetSelectorTerms:        []awsv1beta1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "test"}}},
			SecurityGroupSelectorTerms: []awsv1beta1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "test"}}},
		},
	}, overrides)
}

// KWOKNodeClass returns a valid KWOKNodeClass with the embedded catalog.
func KWOKNodeClass(overrides ...func(*kwokv1alpha1.KWOKNodeClass)) *kwokv1alpha1.KWOKNodeClass {
	return apply(&kwokv1alpha1.KWOKNodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: Name("kwoknodeclass")},
		Spec:       kwokv1alpha1.KWOKNodeClassSpec{Catalog: "embedded"},
	}, overrides)
}

// CapacityBudget returns a valid CapacityBudget in namespace "default".
func CapacityBudget(overrides ...func(*policyv1.CapacityBudget)) *policyv1.CapacityBudget {
	return apply(&policyv1.CapacityBudget{
		ObjectMeta: metav1.ObjectMeta{Name: Name("budget"), Namespace: "default"},
		Spec: policyv1.CapacityBudgetSpec{
			Limits: &policyv1.BudgetLimits{HourlyCost: ptr.To[policyv1.Money]("13.00")},
			Spot:   &policyv1.SpotShare{MinPercent: ptr.To[int32](60), MaxPercent: ptr.To[int32](100)},
			InstanceFamilies: &policyv1.InstanceFamilies{
				Allow: []string{"c*", "m*", "r*"},
				Deny:  []string{"*metal*"},
			},
			Enforcement: policyv1.EnforcementDeny,
		},
	}, overrides)
}

// CapacityPolicy returns a valid CapacityPolicy with one provisioning module.
func CapacityPolicy(overrides ...func(*policyv1.CapacityPolicy)) *policyv1.CapacityPolicy {
	return apply(&policyv1.CapacityPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: Name("policy")},
		Spec: policyv1.CapacityPolicySpec{
			Enforcement:   policyv1.EnforcementDeny,
			FailurePolicy: policyv1.FailurePolicyIgnore,
			Modules: []policyv1.PolicyModule{{
				Name: "no-gpu.rego",
				Rego: "package karpenter.provisioning\n\ndeny contains msg if {\n\tsome f in input.families\n\tstartswith(f, \"g\")\n\tmsg := sprintf(\"family %s is not allowed\", [f])\n}\n",
			}},
		},
	}, overrides)
}

// NoGPUInDevRego is a karpenter.provisioning module refusing the instance families that
// data.parameters.deniedFamilies matches, naming the family and the namespace.
const NoGPUInDevRego = `package karpenter.provisioning

deny_instance_types contains {"name": it.name, "msg": msg} if {
	some it in input.instanceTypes
	some pattern in data.parameters.deniedFamilies
	glob.match(pattern, null, it.family)
	msg := sprintf("instance family %s is denied in %s", [it.family, input.namespace.name])
}
`

// NoGPUInDev returns the CapacityPolicy "no-gpu-in-dev": NoGPUInDevRego refusing the p* and
// g* families to namespaces labelled tier=dev.
func NoGPUInDev(overrides ...func(*policyv1.CapacityPolicy)) *policyv1.CapacityPolicy {
	return apply(&policyv1.CapacityPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "no-gpu-in-dev", Generation: 1},
		Spec: policyv1.CapacityPolicySpec{
			Enforcement:       policyv1.EnforcementDeny,
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "dev"}},
			Parameters:        &runtime.RawExtension{Raw: []byte(`{"deniedFamilies": ["p*", "g*"]}`)},
			Modules:           []policyv1.PolicyModule{{Name: "no-gpu.rego", Rego: NoGPUInDevRego}},
		},
	}, overrides)
}
