package webhooks

import (
	"context"
	"encoding/json"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	awsv1 "github.com/karpenter-policy/karpenter/api/aws/v1"
	"github.com/karpenter-policy/karpenter/api/install"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/test"
	"github.com/karpenter-policy/karpenter/webhooks/validation"
)

// Admission latency per request, decoding included, as the webhook server handles it:
// go test ./webhooks -run=^$ -bench=. -benchmem

func request(b *testing.B, obj runtime.Object, kind string) admission.Request {
	raw, err := json.Marshal(obj)
	if err != nil {
		b.Fatal(err)
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: admissionv1.Create,
		Kind:      metav1.GroupVersionKind{Kind: kind},
		Object:    runtime.RawExtension{Raw: raw},
	}}
}

func benchmarkAdmission(b *testing.B, wh *admission.Webhook, req admission.Request) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if resp := wh.Handle(ctx, req); !resp.Allowed {
			b.Fatalf("denied: %v", resp.Result)
		}
	}
}

func BenchmarkAdmitNodePool(b *testing.B) {
	v := validation.New()
	wh := admission.WithValidator(install.NewScheme(), typed(karpv1.SchemeGroupVersion.WithKind("NodePool").GroupKind(),
		func(_ context.Context, o *karpv1.NodePool) field.ErrorList { return v.NodePool(o) }))
	np := test.NodePool()
	np.APIVersion, np.Kind = "karpenter.sh/v1", "NodePool"
	benchmarkAdmission(b, wh, request(b, np, "NodePool"))
}

func BenchmarkAdmitCapacityBudget(b *testing.B) {
	v := validation.New()
	wh := admission.WithValidator(install.NewScheme(), typed(policyv1.SchemeGroupVersion.WithKind("CapacityBudget").GroupKind(),
		func(_ context.Context, o *policyv1.CapacityBudget) field.ErrorList { return v.CapacityBudget(o) }))
	cb := test.CapacityBudget()
	cb.APIVersion, cb.Kind = "policy.karpenter.sh/v1", "CapacityBudget"
	benchmarkAdmission(b, wh, request(b, cb, "CapacityBudget"))
}

// An EC2NodeClass with a kubelet configuration, which is decoded strictly into the kubelet's
// own type on every admission.
func BenchmarkAdmitEC2NodeClass(b *testing.B) {
	v := validation.New()
	wh := admission.WithValidator(install.NewScheme(), typed(awsv1.SchemeGroupVersion.WithKind("EC2NodeClass").GroupKind(),
		func(_ context.Context, o *awsv1.EC2NodeClass) field.ErrorList { return v.EC2NodeClass(o) }))
	nc := test.EC2NodeClass(func(nc *awsv1.EC2NodeClass) {
		nc.Spec.Kubelet = awsv1.KubeletConfiguration{"maxPods": awsv1.JSONValue("110"), "kubeReserved": awsv1.JSONValue(`{"cpu":"200m","memory":"100Mi"}`),
			"evictionHard": awsv1.JSONValue(`{"memory.available":"5%"}`), "serializeImagePulls": awsv1.JSONValue("false")}
	})
	nc.APIVersion, nc.Kind = "karpenter.k8s.aws/v1", "EC2NodeClass"
	benchmarkAdmission(b, wh, request(b, nc, "EC2NodeClass"))
}

// A CapacityPolicy is compiled and its tests run on every admission.
func BenchmarkAdmitCapacityPolicy(b *testing.B) {
	v := validation.New()
	wh := admission.WithValidator(install.NewScheme(), typed(policyv1.SchemeGroupVersion.WithKind("CapacityPolicy").GroupKind(), v.CapacityPolicy))
	p := test.CapacityPolicy(func(p *policyv1.CapacityPolicy) {
		p.Spec.Modules = append(p.Spec.Modules, policyv1.PolicyModule{Name: "no-gpu_test.rego",
			Rego: "package karpenter.provisioning_test\n\nimport data.karpenter.provisioning\n\ntest_denies_gpu if {\n\tcount(provisioning.deny) == 1 with input as {\"families\": [\"g5\"]}\n}\n"})
	})
	p.APIVersion, p.Kind = "policy.karpenter.sh/v1", "CapacityPolicy"
	benchmarkAdmission(b, wh, request(b, p, "CapacityPolicy"))
}
