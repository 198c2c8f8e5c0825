package cel_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autoscalingv1beta1 "github.com/karpenter-policy/karpenter/api/autoscaling/v1beta1"
	awsv1 "github.com/karpenter-policy/karpenter/api/aws/v1"
	awsv1beta1 "github.com/karpenter-policy/karpenter/api/aws/v1beta1"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	karpv1beta1 "github.com/karpenter-policy/karpenter/api/karpenter/v1beta1"
	kwokv1alpha1 "github.com/karpenter-policy/karpenter/api/kwok/v1alpha1"
	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/test"
)

// celCase is one object the API server must accept, or reject naming field with message.
// With update set, the object is created first and the update is what must be rejected.
type celCase struct {
	name    string
	obj     func() client.Object
	update  func(client.Object)
	field   string // the field the rejection must name; empty means the object is valid
	message string // a substring of the rejection message for that field
}

func req(key string, op corev1.NodeSelectorOperator, values ...string) karpv1.NodeSelectorRequirementWithMinValues {
	return karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: values}
}

func nodePool(f func(*karpv1.NodePool)) func() client.Object {
	return func() client.Object { return test.NodePool(f) }
}
func nodeClaim(f func(*karpv1.NodeClaim)) func() client.Object {
	return func() client.Object { return test.NodeClaim(f) }
}
func nodePoolV1beta1(f func(*karpv1beta1.NodePool)) func() client.Object {
	return func() client.Object { return test.NodePoolV1beta1(f) }
}
func ec2NodeClass(f func(*awsv1.EC2NodeClass)) func() client.Object {
	return func() client.Object { return test.EC2NodeClass(f) }
}
func ec2NodeClassV1beta1(f func(*awsv1beta1.EC2NodeClass)) func() client.Object {
	return func() client.Object { return test.EC2NodeClassV1beta1(f) }
}
func kwokNodeClass(f func(*kwokv1alpha1.KWOKNodeClass)) func() client.Object {
	return func() client.Object { return test.KWOKNodeClass(f) }
}
func budget(f func(*policyv1.CapacityBudget)) func() client.Object {
	return func() client.Object { return test.CapacityBudget(f) }
}
func capacityBuffer(f func(*autoscalingv1beta1.CapacityBufferSpec)) func() client.Object {
	return func() client.Object {
		cb := &autoscalingv1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{GenerateName: "buffer-", Namespace: "default"},
			Spec: autoscalingv1beta1.CapacityBufferSpec{PodTemplateRef: &autoscalingv1beta1.LocalObjectRef{Name: "chunk"}, Replicas: ptr.To[int32](3)}}
		f(&cb.Spec)
		return cb
	}
}
func policy(f func(*policyv1.CapacityPolicy)) func() client.Object {
	return func() client.Object { return test.CapacityPolicy(f) }
}

var cases = []celCase{
	// NodePool v1
	{name: "nodepool/valid", obj: nodePool(nil)},
	{name: "nodepool/valid without consolidateAfter (defaults to 0s)", obj: nodePool(func(np *karpv1.NodePool) {
		np.Spec.Disruption = karpv1.Disruption{Budgets: []karpv1.Budget{{Nodes: "5"}}}
	})},
	{name: "nodepool/valid Balanced consolidation", obj: nodePool(func(np *karpv1.NodePool) {
		np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyBalanced
	})},
	{name: "nodepool/valid with every optional field", obj: nodePool(func(np *karpv1.NodePool) {
		np.Spec.Weight = ptr.To[int32](50)
		np.Spec.Template.Labels = map[string]string{"team": "a", "node.kubernetes.io/role": "web", "topology.kubernetes.io/zone": "z1"}
		np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements,
			req(karpv1.LabelInstanceCPU, karpv1.NodeSelectorOpGte, "4"),
			karpv1.NodeSelectorRequirementWithMinValues{Key: karpv1.LabelInstanceFamily, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5", "c5", "r5"}, MinValues: ptr.To(2)})
		np.Spec.Template.Spec.ExpireAfter = karpv1.MustParseNillableDuration("Never")
		np.Spec.Template.Spec.TerminationGracePeriod = &metav1.Duration{Duration: 3600e9}
		np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "0", Schedule: ptr.To("0 9 * * mon-fri"), Duration: &metav1.Duration{Duration: 8 * 3600e9}, Reasons: []karpv1.DisruptionReason{"Drifted", "Underutilized"}}, {Nodes: "20%"}}
		np.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("1000"), "nodes": resource.MustParse("50")}
	})},
	{name: "nodepool/weight below 1", field: "spec.weight", message: "greater than or equal to 1",
		obj: nodePool(func(np *karpv1.NodePool) { np.Spec.Weight = ptr.To[int32](0) })},
	{name: "nodepool/weight above 100", field: "spec.weight", message: "less than or equal to 100",
		obj: nodePool(func(np *karpv1.NodePool) { np.Spec.Weight = ptr.To[int32](101) })},
	{name: "nodepool/In without values", field: "spec.template.spec.requirements", message: "must have a value defined",
		obj: nodePool(func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{req("team", corev1.NodeSelectorOpIn)}
		})},
	{name: "nodepool/Gt not an integer", field: "spec.template.spec.requirements", message: "single positive integer",
		obj: nodePool(func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{req(karpv1.LabelInstanceCPU, corev1.NodeSelectorOpGt, "four")}
		})},
	{name: "nodepool/Lt with two values", field: "spec.template.spec.requirements", message: "single positive integer",
		obj: nodePool(func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{req(karpv1.LabelInstanceCPU, corev1.NodeSelectorOpLt, "4", "8")}
		})},
	{name: "nodepool/minValues above the number of values", field: "spec.template.spec.requirements", message: "at least that many values",
		obj: nodePool(func(np *karpv1.NodePool) {
			r := req(karpv1.LabelInstanceFamily, corev1.NodeSelectorOpIn, "m5", "c5")
			r.MinValues = ptr.To(3)
			np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{r}
		})},
	{name: "nodepool/minValues zero", field: "spec.template.spec.requirements[0].minValues", message: "greater than or equal to 1",
		obj: nodePool(func(np *karpv1.NodePool) {
			r := req(karpv1.LabelInstanceFamily, corev1.NodeSelectorOpIn, "m5")
			r.MinValues = ptr.To(0)
			np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{r}
		})},
	{name: "nodepool/minValues with NotIn", field: "spec.template.spec.requirements[0]", message: "minValues is only valid",
		obj: nodePool(func(np *karpv1.NodePool) {
			r := req(karpv1.LabelInstanceFamily, corev1.NodeSelectorOpNotIn, "m5", "c5")
			r.MinValues = ptr.To(1)
			np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{r}
		})},
	{name: "nodepool/unknown operator", field: "spec.template.spec.requirements[0].operator", message: "Unsupported value",
		obj: nodePool(func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{req("team", "Matches", "a")}
		})},
	{name: "nodepool/requirement on kubernetes.io/hostname", field: "spec.template.spec.requirements[0].key", message: `label "kubernetes.io/hostname" is restricted`,
		obj: nodePool(func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{req(karpv1.LabelHostname, corev1.NodeSelectorOpIn, "a")}
		})},
	{name: "nodepool/requirement in the karpenter.sh domain", field: "spec.template.spec.requirements[0].key", message: `label domain "karpenter.sh" is restricted`,
		obj: nodePool(func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{req("karpenter.sh/team", corev1.NodeSelectorOpExists)}
		})},
	{name: "nodepool/requirement in the karpenter.k8s.aws domain", field: "spec.template.spec.requirements[0].key", message: `label domain "karpenter.k8s.aws" is restricted`,
		obj: nodePool(func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{req("karpenter.k8s.aws/team", corev1.NodeSelectorOpExists)}
		})},
	{name: "nodepool/valid requirement in the k8s.io domain", obj: nodePool(func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{req("example.k8s.io/team", corev1.NodeSelectorOpExists)}
	})},
	{name: "nodepool/requirement key not a label key", field: "spec.template.spec.requirements[0].key", message: "should match",
		obj: nodePool(func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{req("team a", corev1.NodeSelectorOpExists)}
		})},
	{name: "nodepool/template label in karpenter.k8s.aws", field: "spec.template.metadata.labels", message: `label domain "karpenter.k8s.aws" is restricted`,
		obj: nodePool(func(np *karpv1.NodePool) { np.Spec.Template.Labels = map[string]string{"karpenter.k8s.aws/team": "a"} })},
	{name: "nodepool/valid template labels in kubernetes.io and a well-known AWS label", obj: nodePool(func(np *karpv1.NodePool) {
		np.Spec.Template.Labels = map[string]string{"kubernetes.io/team": "a", karpv1.LabelInstanceLocalNVME: "100"}
	})},
	{name: "nodepool/template label karpenter.sh/nodepool", field: "spec.template.metadata.labels", message: `label "karpenter.sh/nodepool" is restricted`,
		obj: nodePool(func(np *karpv1.NodePool) {
			np.Spec.Template.Labels = map[string]string{karpv1.NodePoolLabelKey: "other"}
		})},
	{name: "nodepool/budget nodes above 100%", field: "spec.disruption.budgets[0].nodes", message: "should match",
		obj: nodePool(func(np *karpv1.NodePool) { np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "110%"}} })},
	{name: "nodepool/budget schedule without duration", field: "spec.disruption.budgets", message: "'schedule' must be set with 'duration'",
		obj: nodePool(func(np *karpv1.NodePool) {
			np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "1", Schedule: ptr.To("@daily")}}
		})},
	{name: "nodepool/budget reason unknown", field: "spec.disruption.budgets[0].reasons[0]", message: "Unsupported value",
		obj: nodePool(func(np *karpv1.NodePool) {
			np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "1", Reasons: []karpv1.DisruptionReason{"Expired"}}}
		})},
	{name: "nodepool/v1beta1 consolidation policy on v1", field: "spec.disruption.consolidationPolicy", message: "Unsupported value",
		obj: nodePool(func(np *karpv1.NodePool) { np.Spec.Disruption.ConsolidationPolicy = "WhenUnderutilized" })},
	{name: "nodepool/consolidateAfter not a duration", field: "spec.disruption.consolidateAfter", message: "should match",
		obj: nodePool(func(np *karpv1.NodePool) {
			np.Spec.Disruption.ConsolidateAfter = karpv1.NillableDuration{Raw: []byte(`"5 minutes"`)}
		})},
	{name: "nodepool/expireAfter in days", field: "spec.template.spec.expireAfter", message: "should match",
		obj: nodePool(func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.ExpireAfter = karpv1.NillableDuration{Raw: []byte(`"30d"`)}
		})},
	{name: "nodepool/nodeClassRef name empty", field: "spec.template.spec.nodeClassRef.name", message: "name may not be empty",
		obj: nodePool(func(np *karpv1.NodePool) { np.Spec.Template.Spec.NodeClassRef.Name = "" })},
	{name: "nodepool/nodeClassRef group with a slash", field: "spec.template.spec.nodeClassRef.group", message: "should match",
		obj: nodePool(func(np *karpv1.NodePool) { np.Spec.Template.Spec.NodeClassRef.Group = "karpenter.kwok.sh/v1alpha1" })},
	{name: "nodepool/taint effect unknown", field: "spec.template.spec.taints", message: "taint effect must be one of",
		obj: nodePool(func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: "NoRun"}}
		})},
	{name: "nodepool/nodeClassRef group is immutable", field: "spec.template.spec.nodeClassRef", message: "nodeClassRef.group is immutable",
		obj: nodePool(nil), update: func(o client.Object) {
			o.(*karpv1.NodePool).Spec.Template.Spec.NodeClassRef.Group = "karpenter.k8s.aws"
		}},
	{name: "nodepool/nodeClassRef kind is immutable", field: "spec.template.spec.nodeClassRef", message: "nodeClassRef.kind is immutable",
		obj: nodePool(nil), update: func(o client.Object) { o.(*karpv1.NodePool).Spec.Template.Spec.NodeClassRef.Kind = "EC2NodeClass" }},
	{name: "nodepool/valid static", obj: nodePool(func(np *karpv1.NodePool) {
		np.Spec.Replicas = ptr.To[int64](3)
		np.Spec.Limits = karpv1.Limits{"nodes": resource.MustParse("5")}
	})},
	{name: "nodepool/static replicas may scale", obj: nodePool(func(np *karpv1.NodePool) { np.Spec.Replicas = ptr.To[int64](3) }),
		update: func(o client.Object) { o.(*karpv1.NodePool).Spec.Replicas = ptr.To[int64](0) }},
	{name: "nodepool/static replicas negative", field: "spec.replicas", message: "greater than or equal to 0",
		obj: nodePool(func(np *karpv1.NodePool) { np.Spec.Replicas = ptr.To[int64](-1) })},
	{name: "nodepool/static with a cpu limit", field: "spec", message: "only 'limits.nodes' is supported on static NodePools",
		obj: nodePool(func(np *karpv1.NodePool) {
			np.Spec.Replicas = ptr.To[int64](3)
			np.Spec.Limits = karpv1.Limits{"cpu": resource.MustParse("10")}
		})},
	{name: "nodepool/static with a weight", field: "spec", message: "'weight' is not supported on static NodePools",
		obj: nodePool(func(np *karpv1.NodePool) { np.Spec.Replicas, np.Spec.Weight = ptr.To[int64](3), ptr.To[int32](10) })},
	{name: "nodepool/dynamic to static", field: "spec", message: "Cannot transition NodePool between static",
		obj: nodePool(nil), update: func(o client.Object) { o.(*karpv1.NodePool).Spec.Replicas = ptr.To[int64](2) }},
	{name: "nodepool/static to dynamic", field: "spec", message: "Cannot transition NodePool between static",
		obj: nodePool(func(np *karpv1.NodePool) { np.Spec.Replicas = ptr.To[int64](3) }), update: func(o client.Object) { o.(*karpv1.NodePool).Spec.Replicas = nil }},
	{name: "nodepool/nodeClassRef name may change", obj: nodePool(nil), update: func(o client.Object) {
		o.(*karpv1.NodePool).Spec.Template.Spec.NodeClassRef.Name = "other"
	}},

	// NodeClaim v1
	{name: "nodeclaim/valid", obj: nodeClaim(nil)},
	{name: "nodeclaim/spec is immutable", field: "spec", message: "spec is immutable",
		obj: nodeClaim(nil), update: func(o client.Object) {
			o.(*karpv1.NodeClaim).Spec.Taints = []corev1.Taint{{Key: "a", Effect: corev1.TaintEffectNoSchedule}}
		}},
	{name: "nodeclaim/In without values", field: "spec.requirements", message: "must have a value defined",
		obj: nodeClaim(func(nc *karpv1.NodeClaim) {
			nc.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{req(karpv1.LabelInstanceType, corev1.NodeSelectorOpIn)}
		})},
	{name: "nodeclaim/nodeClassRef kind empty", field: "spec.nodeClassRef.kind", message: "kind may not be empty",
		obj: nodeClaim(func(nc *karpv1.NodeClaim) { nc.Spec.NodeClassRef.Kind = "" })},
	{name: "nodeclaim/terminationGracePeriod Never", field: "spec.terminationGracePeriod", message: "should match",
		obj: func() client.Object {
			// metav1.Duration cannot hold "Never"; write the raw object as a client would.
			return unstructuredFrom(test.NodeClaim(), func(u map[string]any) {
				u["spec"].(map[string]any)["terminationGracePeriod"] = "Never"
			})
		}},

	// NodePool v1beta1: rejected at the request version, before any conversion.
	{name: "nodepool-v1beta1/v1 consolidation policy on v1beta1", field: "spec.disruption.consolidationPolicy", message: "Unsupported value",
		obj: nodePoolV1beta1(func(np *karpv1beta1.NodePool) { np.Spec.Disruption.ConsolidationPolicy = "WhenEmptyOrUnderutilized" })},
	{name: "nodepool-v1beta1/consolidateAfter with WhenUnderutilized", field: "spec.disruption", message: "consolidateAfter cannot be combined",
		obj: nodePoolV1beta1(func(np *karpv1beta1.NodePool) {
			np.Spec.Disruption.ConsolidateAfter = ptr.To(karpv1.MustParseNillableDuration("30s"))
		})},
	{name: "nodepool-v1beta1/WhenEmpty without consolidateAfter", field: "spec.disruption", message: "consolidateAfter must be specified",
		obj: nodePoolV1beta1(func(np *karpv1beta1.NodePool) {
			np.Spec.Disruption.ConsolidationPolicy = karpv1beta1.ConsolidationPolicyWhenEmpty
		})},
	{name: "nodepool-v1beta1/kubelet image GC thresholds reversed", field: "spec.template.spec.kubelet", message: "imageGCHighThresholdPercent must be greater",
		obj: nodePoolV1beta1(func(np *karpv1beta1.NodePool) {
			np.Spec.Template.Spec.Kubelet = &karpv1beta1.KubeletConfiguration{ImageGCHighThresholdPercent: ptr.To[int32](50), ImageGCLowThresholdPercent: ptr.To[int32](80)}
		})},
	{name: "nodepool-v1beta1/kubelet systemReserved unknown key", field: "spec.template.spec.kubelet.systemReserved", message: "valid keys for systemReserved",
		obj: nodePoolV1beta1(func(np *karpv1beta1.NodePool) {
			np.Spec.Template.Spec.Kubelet = &karpv1beta1.KubeletConfiguration{SystemReserved: map[string]string{"gpu": "1"}}
		})},
	{name: "nodepool-v1beta1/kubelet evictionSoft without grace period", field: "spec.template.spec.kubelet", message: "evictionSoft OwnerKey does not have a matching evictionSoftGracePeriod",
		obj: nodePoolV1beta1(func(np *karpv1beta1.NodePool) {
			np.Spec.Template.Spec.Kubelet = &karpv1beta1.KubeletConfiguration{EvictionSoft: map[string]string{"memory.available": "5%"}}
		})},

	// EC2NodeClass v1
	{name: "ec2nodeclass/valid", obj: ec2NodeClass(nil)},
	{name: "ec2nodeclass/valid with amiFamily and tags", obj: ec2NodeClass(func(nc *awsv1.EC2NodeClass) {
		nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Tags: map[string]string{"team": "a"}}}
		nc.Spec.AMIFamily = ptr.To("AL2023")
		nc.Spec.Kubelet = awsv1.KubeletConfiguration{"maxPods": {Raw: []byte("110")}}
	})},
	{name: "ec2nodeclass/role and instanceProfile", field: "spec", message: "must specify exactly one of ['role', 'instanceProfile']",
		obj: ec2NodeClass(func(nc *awsv1.EC2NodeClass) { nc.Spec.InstanceProfile = ptr.To("profile") })},
	{name: "ec2nodeclass/alias without version", field: "spec.amiSelectorTerms[0].alias", message: "improperly formatted",
		obj: ec2NodeClass(func(nc *awsv1.EC2NodeClass) { nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: "al2023"}} })},
	{name: "ec2nodeclass/alias of an unknown family", field: "spec.amiSelectorTerms[0].alias", message: "family is not supported",
		obj: ec2NodeClass(func(nc *awsv1.EC2NodeClass) {
			nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: "ubuntu@latest"}}
		})},
	{name: "ec2nodeclass/alias with another term", field: "spec.amiSelectorTerms", message: "'alias' is mutually exclusive",
		obj: ec2NodeClass(func(nc *awsv1.EC2NodeClass) {
			nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}, {ID: "ami-0123456789"}}
		})},
	{name: "ec2nodeclass/amiFamily missing without alias", field: "spec", message: "must specify amiFamily",
		obj: ec2NodeClass(func(nc *awsv1.EC2NodeClass) {
			nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Tags: map[string]string{"team": "a"}}}
		})},
	{name: "ec2nodeclass/amiFamily disagrees with alias", field: "spec", message: "amiFamily must be 'AL2023' or 'Custom'",
		obj: ec2NodeClass(func(nc *awsv1.EC2NodeClass) { nc.Spec.AMIFamily = ptr.To("Bottlerocket") })},
	{name: "ec2nodeclass/restricted tag", field: "spec.tags", message: "kubernetes.io/cluster/",
		obj: ec2NodeClass(func(nc *awsv1.EC2NodeClass) { nc.Spec.Tags = map[string]string{"kubernetes.io/cluster/prod": "owned"} })},
	{name: "ec2nodeclass/subnet id malformed", field: "spec.subnetSelectorTerms[0].id", message: "should match",
		obj: ec2NodeClass(func(nc *awsv1.EC2NodeClass) { nc.Spec.SubnetSelectorTerms = []awsv1.SubnetSelectorTerm{{ID: "sn-123"}} })},
	{name: "ec2nodeclass/empty subnet selector term", field: "spec.subnetSelectorTerms", message: "expected at least one, got none, ['tags', 'id']",
		obj: ec2NodeClass(func(nc *awsv1.EC2NodeClass) { nc.Spec.SubnetSelectorTerms = []awsv1.SubnetSelectorTerm{{}} })},
	{name: "ec2nodeclass/two root volumes", field: "spec.blockDeviceMappings", message: "only one blockDeviceMappings with rootVolume",
		obj: ec2NodeClass(func(nc *awsv1.EC2NodeClass) {
			v := resource.MustParse("20Gi")
			nc.Spec.BlockDeviceMappings = []*awsv1.BlockDeviceMapping{
				{DeviceName: ptr.To("/dev/xvda"), RootVolume: true, EBS: &awsv1.BlockDevice{VolumeSize: &v}},
				{DeviceName: ptr.To("/dev/xvdb"), RootVolume: true, EBS: &awsv1.BlockDevice{VolumeSize: &v}},
			}
		})},
	{name: "ec2nodeclass/metadata hop limit above 64", field: "spec.metadataOptions.httpPutResponseHopLimit", message: "less than or equal to 64",
		obj: ec2NodeClass(func(nc *awsv1.EC2NodeClass) {
			nc.Spec.MetadataOptions = &awsv1.MetadataOptions{HTTPPutResponseHopLimit: ptr.To[int64](65)}
		})},
	{name: "ec2nodeclass/role may change", obj: ec2NodeClass(nil), update: func(o client.Object) { o.(*awsv1.EC2NodeClass).Spec.Role = "OtherRole" }},
	{name: "ec2nodeclass/role may become an instanceProfile", obj: ec2NodeClass(nil), update: func(o client.Object) {
		o.(*awsv1.EC2NodeClass).Spec.Role, o.(*awsv1.EC2NodeClass).Spec.InstanceProfile = "", ptr.To("KarpenterNodeProfile")
	}},
	{name: "ec2nodeclass/valid with upstream's newer fields", obj: ec2NodeClass(func(nc *awsv1.EC2NodeClass) {
		nc.Spec.CapacityReservationSelectorTerms = []awsv1.CapacityReservationSelectorTerm{{ID: "cr-0123abcd"}, {Tags: map[string]string{"team": "a"}, OwnerID: "012345678901"}}
		nc.Spec.PlacementGroupSelector = &awsv1.PlacementGroupSelector{Name: ptr.To("spread")}
		nc.Spec.IPPrefixCount = ptr.To[int32](2)
		nc.Spec.NetworkInterfaces = []*awsv1.NetworkInterface{{NetworkCardIndex: 0, DeviceIndex: 0, InterfaceType: "interface"}, {NetworkCardIndex: 1, DeviceIndex: 0, InterfaceType: "efa-only"}}
		nc.Spec.ConnectionTracking = &awsv1.ConnectionTracking{TCPEstablishedTimeout: ptr.To[int32](3600)}
		nc.Spec.CPUOptions = &awsv1.CPUOptions{NestedVirtualization: ptr.To("enabled")}
		nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: "windows2025@latest"}}
	})},
	{name: "ec2nodeclass/capacity reservation id with other fields", field: "spec.capacityReservationSelectorTerms", message: "'id' is mutually exclusive",
		obj: ec2NodeClass(func(nc *awsv1.EC2NodeClass) {
			nc.Spec.CapacityReservationSelectorTerms = []awsv1.CapacityReservationSelectorTerm{{ID: "cr-0123abcd", OwnerID: "012345678901"}}
		})},
	{name: "ec2nodeclass/placement group by name and id", field: "spec.placementGroupSelector", message: "'name' and 'id' are mutually exclusive",
		obj: ec2NodeClass(func(nc *awsv1.EC2NodeClass) {
			nc.Spec.PlacementGroupSelector = &awsv1.PlacementGroupSelector{Name: ptr.To("spread"), ID: ptr.To("pg-0123")}
		})},
	{name: "ec2nodeclass/network interfaces without a primary", field: "spec.networkInterfaces", message: "must include a primary interface",
		obj: ec2NodeClass(func(nc *awsv1.EC2NodeClass) {
			nc.Spec.NetworkInterfaces = []*awsv1.NetworkInterface{{NetworkCardIndex: 1, DeviceIndex: 0, InterfaceType: "interface"}}
		})},
	{name: "ec2nodeclass/connection tracking empty", field: "spec.connectionTracking", message: "at least one of tcpEstablishedTimeout",
		obj: ec2NodeClass(func(nc *awsv1.EC2NodeClass) { nc.Spec.ConnectionTracking = &awsv1.ConnectionTracking{} })},
	{name: "ec2nodeclass/volume initialization rate without a snapshot", field: "spec.blockDeviceMappings[0].ebs", message: "snapshotID must be set when volumeInitializationRate is set",
		obj: ec2NodeClass(func(nc *awsv1.EC2NodeClass) {
			nc.Spec.BlockDeviceMappings = []*awsv1.BlockDeviceMapping{{DeviceName: ptr.To("/dev/xvda"), EBS: &awsv1.BlockDevice{VolumeSize: ptr.To(resource.MustParse("20Gi")), VolumeInitializationRate: ptr.To[int32](200)}}}
		})},
	{name: "ec2nodeclass/windows2025 pinned", field: "spec.amiSelectorTerms[0].alias", message: "windows families may only specify version 'latest'",
		obj: ec2NodeClass(func(nc *awsv1.EC2NodeClass) {
			nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: "windows2025@v1"}}
		})},

	// EC2NodeClass v1beta1
	{name: "ec2nodeclass-v1beta1/amiFamily missing", field: "spec.amiFamily", message: "Required value",
		obj: ec2NodeClassV1beta1(func(nc *awsv1beta1.EC2NodeClass) { nc.Spec.AMIFamily = nil })},
	{name: "ec2nodeclass-v1beta1/amiFamily unknown", field: "spec.amiFamily", message: "Unsupported value",
		obj: ec2NodeClassV1beta1(func(nc *awsv1beta1.EC2NodeClass) { nc.Spec.AMIFamily = ptr.To("Fedora") })},

	// KWOKNodeClass
	{name: "kwoknodeclass/valid", obj: kwokNodeClass(func(nc *kwokv1alpha1.KWOKNodeClass) {
		nc.Spec.LaunchDelay = &metav1.Duration{Duration: 2e9}
		nc.Spec.InsufficientCapacity = &kwokv1alpha1.InsufficientCapacityInjection{Percent: 20, Offerings: []kwokv1alpha1.OfferingSelector{{CapacityType: "spot"}}}
		nc.Spec.Interruption = &kwokv1alpha1.InterruptionInjection{SpotPercentPerHour: 5}
	})},
	{name: "kwoknodeclass/insufficient capacity above 100%", field: "spec.insufficientCapacity.percent", message: "less than or equal to 100",
		obj: kwokNodeClass(func(nc *kwokv1alpha1.KWOKNodeClass) {
			nc.Spec.InsufficientCapacity = &kwokv1alpha1.InsufficientCapacityInjection{Percent: 150}
		})},
	{name: "kwoknodeclass/empty offering selector", field: "spec.insufficientCapacity.offerings[0]", message: "at least one of instanceType, zone or capacityType",
		obj: kwokNodeClass(func(nc *kwokv1alpha1.KWOKNodeClass) {
			nc.Spec.InsufficientCapacity = &kwokv1alpha1.InsufficientCapacityInjection{Percent: 10, Offerings: []kwokv1alpha1.OfferingSelector{{}}}
		})},
	{name: "kwoknodeclass/unknown capacity type", field: "spec.insufficientCapacity.offerings[0].capacityType", message: "Unsupported value",
		obj: kwokNodeClass(func(nc *kwokv1alpha1.KWOKNodeClass) {
			nc.Spec.InsufficientCapacity = &kwokv1alpha1.InsufficientCapacityInjection{Percent: 10, Offerings: []kwokv1alpha1.OfferingSelector{{CapacityType: "reserved"}}}
		})},

	// CapacityBudget
	{name: "capacitybudget/valid", obj: budget(func(b *policyv1.CapacityBudget) {
		b.Spec.Limits.MonthlyCost = ptr.To[policyv1.Money]("8000")
		q := resource.MustParse("4")
		b.Spec.Spot.OnDemandBaseCPU = &q
		b.Spec.Schedules = []policyv1.BudgetSchedule{{Schedule: "0 18 * * mon-fri", Duration: metav1.Duration{Duration: 14 * 3600e9}, Limits: &policyv1.BudgetLimits{HourlyCost: ptr.To[policyv1.Money]("5.00")}}}
	})},
	{name: "capacitybudget/spot minPercent above maxPercent", field: "spec.spot", message: "minPercent must be less than or equal to maxPercent",
		obj: budget(func(b *policyv1.CapacityBudget) {
			b.Spec.Spot = &policyv1.SpotShare{MinPercent: ptr.To[int32](80), MaxPercent: ptr.To[int32](50)}
		})},
	{name: "capacitybudget/spot maxPercent above 100", field: "spec.spot.maxPercent", message: "less than or equal to 100",
		obj: budget(func(b *policyv1.CapacityBudget) { b.Spec.Spot = &policyv1.SpotShare{MaxPercent: ptr.To[int32](120)} })},
	{name: "capacitybudget/negative hourly cost", field: "spec.limits.hourlyCost", message: "should match",
		obj: budget(func(b *policyv1.CapacityBudget) { b.Spec.Limits.HourlyCost = ptr.To[policyv1.Money]("-1") })},
	{name: "capacitybudget/zero hourly cost", field: "spec.limits.hourlyCost", message: "hourlyCost must be greater than zero",
		obj: budget(func(b *policyv1.CapacityBudget) { b.Spec.Limits.HourlyCost = ptr.To[policyv1.Money]("0.00") })},
	{name: "capacitybudget/empty limits", field: "spec.limits", message: "at least one of hourlyCost or monthlyCost",
		obj: budget(func(b *policyv1.CapacityBudget) { b.Spec.Limits = &policyv1.BudgetLimits{} })},
	{name: "capacitybudget/family glob in upper case", field: "spec.instanceFamilies.allow[0]", message: "should match",
		obj: budget(func(b *policyv1.CapacityBudget) { b.Spec.InstanceFamilies.Allow = []string{"M*"} })},
	{name: "capacitybudget/unknown enforcement", field: "spec.enforcement", message: "Unsupported value",
		obj: budget(func(b *policyv1.CapacityBudget) { b.Spec.Enforcement = "Block" })},
	{name: "capacitybudget/schedule duration in days", field: "spec.schedules[0].duration", message: "should match",
		obj: func() client.Object {
			return unstructuredFrom(test.CapacityBudget(), func(u map[string]any) {
				u["spec"].(map[string]any)["schedules"] = []any{map[string]any{"schedule": "@daily", "duration": "1d"}}
			})
		}},

	// CapacityBuffer (upstream's rules)
	{name: "capacitybuffer/valid", obj: capacityBuffer(func(*autoscalingv1beta1.CapacityBufferSpec) {})},
	{name: "capacitybuffer/podTemplateRef without replicas or limits", field: "spec", message: "If podTemplateRef is set, replicas or limits must also be set",
		obj: capacityBuffer(func(s *autoscalingv1beta1.CapacityBufferSpec) { s.Replicas = nil })},
	{name: "capacitybuffer/both references", field: "spec", message: "You must define either PodTemplateRef or ScalableRef, but not both",
		obj: capacityBuffer(func(s *autoscalingv1beta1.CapacityBufferSpec) {
			s.ScalableRef = &autoscalingv1beta1.ScalableRef{Kind: "Deployment", Name: "web"}
		})},
	{name: "capacitybuffer/negative replicas", field: "spec.replicas", message: "should be greater than or equal to 0",
		obj: capacityBuffer(func(s *autoscalingv1beta1.CapacityBufferSpec) { s.Replicas = ptr.To[int32](-1) })},

	// CapacityPolicy
	{name: "capacitypolicy/valid", obj: policy(func(p *policyv1.CapacityPolicy) {
		p.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "dev"}}
		p.Spec.Parameters = &runtime.RawExtension{Raw: []byte(`{"deniedFamilies":["p*","g*"]}`)}
	})},
	{name: "capacitypolicy/no modules", field: "spec.modules", message: "should have at least 1 items",
		obj: policy(func(p *policyv1.CapacityPolicy) { p.Spec.Modules = []policyv1.PolicyModule{} })},
	{name: "capacitypolicy/module name without .rego", field: "spec.modules[0].name", message: "should match",
		obj: policy(func(p *policyv1.CapacityPolicy) { p.Spec.Modules[0].Name = "no-gpu" })},
	{name: "capacitypolicy/duplicate module names", field: "spec.modules[1]", message: "Duplicate value",
		obj: policy(func(p *policyv1.CapacityPolicy) { p.Spec.Modules = append(p.Spec.Modules, p.Spec.Modules[0]) })},
	{name: "capacitypolicy/unknown failure policy", field: "spec.failurePolicy", message: "Unsupported value",
		obj: policy(func(p *policyv1.CapacityPolicy) { p.Spec.FailurePolicy = "Retry" })},
	{name: "capacitypolicy/parameters not an object", field: "spec.parameters", message: "must be of type object",
		obj: policy(func(p *policyv1.CapacityPolicy) { p.Spec.Parameters = &runtime.RawExtension{Raw: []byte(`["p*"]`)} })},
}

func TestCEL(t *testing.T) {
	ctx := context.Background()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := tc.obj()
			err := testEnv.Client.Create(ctx, obj)
			if tc.update != nil {
				if err != nil {
					t.Fatalf("creating the object to update: %v", err)
				}
				t.Cleanup(func() { _ = testEnv.Client.Delete(ctx, obj) })
				tc.update(obj)
				err = testEnv.Client.Update(ctx, obj)
			} else if err == nil {
				t.Cleanup(func() { _ = testEnv.Client.Delete(ctx, obj) })
			}
			if tc.field == "" {
				if err != nil {
					t.Fatalf("expected the object to be accepted, got: %v", err)
				}
				return
			}
			test.ExpectInvalid(t, err, tc.field, tc.message)
		})
	}
}

// TestCaseCount keeps the table honest: the foundation issue asks for at least 40 cases.
func TestCaseCount(t *testing.T) {
	invalid := 0
	for _, tc := range cases {
		if tc.field != "" {
			invalid++
		}
	}
	if len(cases) < 40 || invalid < 30 {
		t.Fatalf("the CEL table has %d cases (%d invalid); keep at least 40", len(cases), invalid)
	}
	t.Logf("%d cases, %d invalid", len(cases), invalid)
}
