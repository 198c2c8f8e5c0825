package webhooks

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	autoscalingv1beta1 "github.com/karpenter-policy/karpenter/api/autoscaling/v1beta1"
	"github.com/karpenter-policy/karpenter/api/install"
	"github.com/karpenter-policy/karpenter/webhooks/validation"
)

// gateOff plays the policy review with the CapacityBuffer gate off.
type gateOff struct{}

func (gateOff) Review(_ context.Context, _ string, obj, _ client.Object) ([]string, []string) {
	return []string{obj.GetName() + ": off"}, nil
}

// The CapacityBuffer webhook refuses nothing (the CRD says what is valid) and warns about
// each field accepted and not acted on, and about the gate through the review.
func TestCapacityBufferWebhookWarns(t *testing.T) {
	wh := Validating(install.NewScheme(), validation.New(), gateOff{})["/validate-autoscaling-x-k8s-io-v1beta1-capacitybuffer"]
	if wh == nil {
		t.Fatal("no CapacityBuffer webhook at the path the manifests name")
	}
	admit := func(cb *autoscalingv1beta1.CapacityBuffer) admission.Response {
		raw, err := json.Marshal(cb)
		if err != nil {
			t.Fatal(err)
		}
		return wh.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Operation: admissionv1.Create, Name: cb.Name, Namespace: cb.Namespace,
			Kind:   metav1.GroupVersionKind{Group: "autoscaling.x-k8s.io", Version: "v1beta1", Kind: "CapacityBuffer"},
			Object: runtime.RawExtension{Raw: raw}}})
	}
	cb := &autoscalingv1beta1.CapacityBuffer{TypeMeta: metav1.TypeMeta{APIVersion: "autoscaling.x-k8s.io/v1beta1", Kind: "CapacityBuffer"},
		ObjectMeta: metav1.ObjectMeta{Name: "headroom", Namespace: "default"},
		Spec: autoscalingv1beta1.CapacityBufferSpec{
			ProvisioningStrategy: ptr.To("buffer.x-k8s.io/passive"),
			ScalableRef:          &autoscalingv1beta1.ScalableRef{APIGroup: "apps", Kind: "DaemonSet", Name: "x"},
			Percentage:           ptr.To[int32](10)}}
	resp := admit(cb)
	got := strings.Join(resp.Warnings, "\n")
	if !resp.Allowed || len(resp.Warnings) != 3 || !strings.Contains(got, "spec.provisioningStrategy") ||
		!strings.Contains(got, "spec.scalableRef.kind") || !strings.Contains(got, "headroom: off") {
		t.Fatalf("allowed %t, warnings:\n%s", resp.Allowed, got)
	}
	cb.Spec = autoscalingv1beta1.CapacityBufferSpec{PodTemplateRef: &autoscalingv1beta1.LocalObjectRef{Name: "chunk"}, Replicas: ptr.To[int32](3), Percentage: ptr.To[int32](10)}
	resp = admit(cb)
	if got := strings.Join(resp.Warnings, "\n"); !resp.Allowed || len(resp.Warnings) != 2 || !strings.Contains(got, "spec.percentage") {
		t.Fatalf("allowed %t, warnings:\n%s", resp.Allowed, got)
	}
}
