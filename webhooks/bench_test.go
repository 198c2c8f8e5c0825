package webhooks

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	awsv1 "github.com/karpenter-policy/karpenter/api/aws/v1"
	"github.com/karpenter-policy/karpenter/api/install"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/policies"
	"github.com/karpenter-policy/karpenter/test"
	admissionreview "github.com/karpenter-policy/karpenter/webhooks/admission"
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

func BenchmarkAdmitCapacityException(b *testing.B) {
	v := validation.New()
	kind := policyv1.SchemeGroupVersion.WithKind("CapacityException")
	wh := admission.WithValidator(install.NewScheme(), typed(kind.GroupKind(),
		func(_ context.Context, o *policyv1.CapacityException) field.ErrorList {
			return v.CapacityException(o, nil)
		}))
	extra := policyv1.Money("2.00")
	ex := &policyv1.CapacityException{ObjectMeta: metav1.ObjectMeta{Name: "launch"}, Spec: policyv1.CapacityExceptionSpec{
		Namespaces: []string{"shop"}, Exempt: []policyv1.ExemptPolicy{{Kind: policyv1.ExemptCapacityBudget, Name: "default"}},
		ExtraHourlyCost: &extra, ExpiresAt: metav1.NewTime(time.Now().Add(24 * time.Hour)), Reason: "launch week"}}
	ex.APIVersion, ex.Kind = kind.GroupVersion().String(), kind.Kind
	benchmarkAdmission(b, wh, request(b, ex, "CapacityException"))
}

// staticFacts answer a review with fixed namespaces and no usage.
type staticFacts struct{}

func (staticFacts) Namespace(_ context.Context, name string) (policies.Namespace, bool) {
	return policies.Namespace{Name: name, Labels: map[string]string{"tier": "prod"}}, true
}
func (staticFacts) Namespaces(context.Context) ([]policies.Namespace, bool) {
	return []policies.Namespace{{Name: "shop", Labels: map[string]string{"tier": "prod"}}}, true
}
func (staticFacts) Usage(context.Context, string) (policies.Usage, bool) {
	return policies.Usage{}, true
}
func (staticFacts) InstanceTypes(context.Context, *karpv1.NodePool) []*cloudprovider.InstanceType {
	return nil
}

// A NodePool through validation and the policy review: one CapacityPolicy's
// karpenter.admission rules (a deny on cpu limits, which the NodePool passes).
func BenchmarkAdmitNodePoolReviewed(b *testing.B) {
	engine, err := policies.NewEngine()
	if err != nil {
		b.Fatal(err)
	}
	p := test.CapacityPolicy(func(p *policyv1.CapacityPolicy) {
		p.Name, p.Spec.NamespaceSelector = "max-cpu", nil
		p.Spec.Modules = []policyv1.PolicyModule{{Name: "max-cpu.rego", Rego: "package karpenter.admission\n\ndeny contains \"over 500\" if {\n\tinput.kind == \"NodePool\"\n\tunits.parse(input.object.spec.limits.cpu) > 500\n}\n"}}
	})
	if probs := engine.SetPolicies([]policyv1.CapacityPolicy{*p}); len(probs) > 0 {
		b.Fatal(probs)
	}
	v := validation.New()
	rev := NewClusterReview(admissionreview.New(engine, staticFacts{}, time.Now))
	wh := admission.WithValidator(install.NewScheme(), reviewed(typed(karpv1.SchemeGroupVersion.WithKind("NodePool").GroupKind(),
		func(_ context.Context, o *karpv1.NodePool) field.ErrorList { return v.NodePool(o) }), rev))
	np := test.NodePool()
	np.APIVersion, np.Kind = "karpenter.sh/v1", "NodePool"
	benchmarkAdmission(b, wh, request(b, np, "NodePool"))
}
