package webhooks_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/karpenter-policy/karpenter/api/aws/v1"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	karpv1beta1 "github.com/karpenter-policy/karpenter/api/karpenter/v1beta1"
	kwokv1alpha1 "github.com/karpenter-policy/karpenter/api/kwok/v1alpha1"
	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/test"
)

// Each object passes the CRD's schema and CEL rules, so only a validating webhook can refuse
// it; the refusal must name the field.
func TestWebhookRejections(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name           string
		obj            client.Object
		field, message string
	}{
		{"nodepool/cron schedule out of range", test.NodePool(func(np *karpv1.NodePool) {
			np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "1", Schedule: ptr.To("0 25 * * *"), Duration: ptr.To(metav1Duration("1h"))}}
		}), "spec.disruption.budgets[0].schedule", "not a cron schedule"},
		{"nodepool/only unknown capacity types", test.NodePool(func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"xspot"}}}
		}), "spec.template.spec.requirements[0].values", "Unsupported value"},
		{"nodepool/requirement value not a label value", test.NodePool(func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements,
				karpv1.NodeSelectorRequirementWithMinValues{Key: "team", Operator: corev1.NodeSelectorOpIn, Values: []string{"team a"}})
		}), "spec.template.spec.requirements[1].values[0]", "should match"},
		{"nodepool/Exists with values", test.NodePool(func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements,
				karpv1.NodeSelectorRequirementWithMinValues{Key: "team", Operator: corev1.NodeSelectorOpExists, Values: []string{"a"}})
		}), "spec.template.spec.requirements[1]", "take no values"},
		{"nodepool/duplicate taint", test.NodePool(func(np *karpv1.NodePool) {
			taint := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
			np.Spec.Template.Spec.Taints = []corev1.Taint{taint, taint}
		}), "spec.template.spec.taints[1]", "Duplicate value"},
		{"nodepool/taint key malformed", test.NodePool(func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "bad key", Effect: corev1.TaintEffectNoSchedule}}
		}), "spec.template.spec.taints[0].key", "name part must consist"},
		{"nodepool-v1beta1/only unknown capacity types, validated at v1", test.NodePoolV1beta1(func(np *karpv1beta1.NodePool) {
			np.Spec.Template.Spec.Requirements = []karpv1beta1.NodeSelectorRequirementWithMinValues{{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"xspot"}}}
		}), "spec.template.spec.requirements[0].values", "Unsupported value"},
		// NodeClaims have no webhook: their CRD's schema and CEL rules refuse what they can.
		{"nodeclaim/requirement value not a label value (CRD)", test.NodeClaim(func(nc *karpv1.NodeClaim) {
			nc.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: "team", Operator: corev1.NodeSelectorOpIn, Values: []string{"team a"}}}
		}), "spec.requirements[0].values[0]", "should match"},
		{"nodeclaim/taint value not a label value (CRD)", test.NodeClaim(func(nc *karpv1.NodeClaim) {
			nc.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "a b", Effect: corev1.TaintEffectNoSchedule}}
		}), "spec.taints[0].value", "should match"},
		{"nodeclaim/Exists with values (CRD)", test.NodeClaim(func(nc *karpv1.NodeClaim) {
			nc.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: "team", Operator: corev1.NodeSelectorOpExists, Values: []string{"a"}}}
		}), "spec.requirements[0]", "take no values"},
		{"ec2nodeclass/kubelet field the kubelet does not have", test.EC2NodeClass(func(nc *awsv1.EC2NodeClass) {
			nc.Spec.Kubelet = awsv1.KubeletConfiguration{"maxPodz": {Raw: []byte("110")}}
		}), "spec.kubelet", `unknown field "maxPodz"`},
		{"ec2nodeclass/duplicate device", test.EC2NodeClass(func(nc *awsv1.EC2NodeClass) {
			nc.Spec.BlockDeviceMappings = []*awsv1.BlockDeviceMapping{{DeviceName: ptr.To("/dev/xvda")}, {DeviceName: ptr.To("/dev/xvda")}}
		}), "spec.blockDeviceMappings[1].deviceName", "Duplicate value"},
		{"kwoknodeclass/relative catalog path", test.KWOKNodeClass(func(nc *kwokv1alpha1.KWOKNodeClass) {
			nc.Spec.Catalog = "catalogs/mine.json"
		}), "spec.catalog", "absolute path"},
		{"capacitybudget/schedule not cron", test.CapacityBudget(func(b *policyv1.CapacityBudget) {
			b.Spec.Schedules = []policyv1.BudgetSchedule{{Schedule: "61 * * * *", Duration: metav1Duration("1h"), Limits: &policyv1.BudgetLimits{HourlyCost: ptr.To[policyv1.Money]("5")}}}
		}), "spec.schedules[0].schedule", "not a cron schedule"},
		{"capacitybudget/schedule overrides nothing", test.CapacityBudget(func(b *policyv1.CapacityBudget) {
			b.Spec.Schedules = []policyv1.BudgetSchedule{{Schedule: "@daily", Duration: metav1Duration("1h")}}
		}), "spec.schedules[0]", "overrides limits, spot or both"},
		{"capacitybudget/glob that matches everything", test.CapacityBudget(func(b *policyv1.CapacityBudget) {
			b.Spec.InstanceFamilies.Deny = []string{"**"}
		}), "spec.instanceFamilies.deny[0]", "matches every family"},
		{"clustercapacitybudget/selector that does not parse", &policyv1.ClusterCapacityBudget{ObjectMeta: metav1.ObjectMeta{Name: test.Name("ccb")},
			Spec: policyv1.ClusterCapacityBudgetSpec{
				NamespaceSelector:  metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpIn}}},
				CapacityBudgetSpec: policyv1.CapacityBudgetSpec{Limits: &policyv1.BudgetLimits{HourlyCost: ptr.To[policyv1.Money]("5")}}}},
			"spec.namespaceSelector", "values: Invalid value"},
		{"clustercapacitybudget/schedule not cron", &policyv1.ClusterCapacityBudget{ObjectMeta: metav1.ObjectMeta{Name: test.Name("ccb")},
			Spec: policyv1.ClusterCapacityBudgetSpec{CapacityBudgetSpec: policyv1.CapacityBudgetSpec{
				Schedules: []policyv1.BudgetSchedule{{Schedule: "61 * * * *", Duration: metav1Duration("1h"), Limits: &policyv1.BudgetLimits{HourlyCost: ptr.To[policyv1.Money]("5")}}}}}},
			"spec.schedules[0].schedule", "not a cron schedule"},
		{"capacitypolicy/syntax error", test.CapacityPolicy(func(p *policyv1.CapacityPolicy) {
			p.Spec.Modules[0].Rego = "package karpenter.provisioning\n\ndeny contains msg if {\n\tmsg := \n}\n"
		}), "spec.modules[0].rego", "no-gpu.rego:5:1"},
		{"capacitypolicy/unknown decision point", test.CapacityPolicy(func(p *policyv1.CapacityPolicy) {
			p.Spec.Modules[0].Rego = "package karpenter.scheduling\n\ndeny contains \"x\" if { false }\n"
		}), "spec.modules[0].rego", "not a decision point"},
		{"capacitypolicy/failing test", test.CapacityPolicy(func(p *policyv1.CapacityPolicy) {
			p.Spec.Modules = append(p.Spec.Modules, policyv1.PolicyModule{Name: "no-gpu_test.rego",
				Rego: "package karpenter.provisioning_test\n\nimport data.karpenter.provisioning\n\ntest_allows_gpu if {\n\tcount(provisioning.deny) == 0 with input as {\"families\": [\"g5\"]}\n}\n"})
		}), "spec.modules[1].rego", "test data.karpenter.provisioning_test.test_allows_gpu failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := testEnv.Client.Create(ctx, tc.obj)
			if err == nil {
				_ = testEnv.Client.Delete(ctx, tc.obj)
			}
			test.ExpectInvalid(t, err, tc.field, tc.message)
		})
	}
}

// Valid objects, including a policy whose tests pass, are admitted, and updates are checked too.
func TestWebhookAdmitsValidObjects(t *testing.T) {
	ctx := context.Background()
	passing := test.CapacityPolicy(func(p *policyv1.CapacityPolicy) {
		p.Spec.Modules = append(p.Spec.Modules, policyv1.PolicyModule{Name: "no-gpu_test.rego",
			Rego: "package karpenter.provisioning_test\n\nimport data.karpenter.provisioning\n\ntest_denies_gpu if {\n\tcount(provisioning.deny) == 1 with input as {\"families\": [\"g5\"]}\n}\n"})
	})
	np := test.NodePool()
	for _, obj := range []client.Object{test.NodePool(), test.NodeClaim(), test.EC2NodeClass(), test.KWOKNodeClass(), test.CapacityBudget(), passing, np} {
		if err := testEnv.Client.Create(ctx, obj); err != nil {
			t.Fatalf("%T %s: %v", obj, obj.GetName(), err)
		}
		t.Cleanup(func() { _ = testEnv.Client.Delete(ctx, obj) })
	}
	np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "1", Schedule: ptr.To("0 0 31 2 mon-fri extra"), Duration: ptr.To(metav1Duration("1h"))}}
	test.ExpectInvalid(t, testEnv.Client.Update(ctx, np), "spec.disruption.budgets[0].schedule", "not a cron schedule")
}
