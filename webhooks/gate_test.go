package webhooks

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	awsv1 "github.com/karpenter-policy/karpenter/api/aws/v1"
	"github.com/karpenter-policy/karpenter/api/install"
	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/test"
)

// gateHook is the CapacityBudget gate over a cache holding a denying budget in team-a and a
// warning one in team-w.
func gateHook(t testing.TB) *BudgetGate {
	t.Helper()
	scheme := install.NewScheme()
	deny := test.CapacityBudget(func(b *policyv1.CapacityBudget) { b.Namespace = "team-a" })
	warn := test.CapacityBudget(func(b *policyv1.CapacityBudget) { b.Namespace, b.Spec.Enforcement = "team-w", policyv1.EnforcementWarn })
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(deny, warn).Build()
	return Mutating(scheme, c)[CapacityBudgetGatePath].Handler.(*BudgetGate)
}

func gateRequest(t *testing.T, ns string, pod *corev1.Pod) admission.Request {
	t.Helper()
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UID: "u", Operation: admissionv1.Create, Namespace: ns,
		Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Object: runtime.RawExtension{Raw: raw}}}
}

func TestBudgetGate(t *testing.T) {
	g := gateHook(t)
	pod := func(f ...func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "web-"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
		for _, fn := range f {
			fn(p)
		}
		return p
	}
	other := corev1.PodSchedulingGate{Name: "example.com/wait"}
	for _, tc := range []struct {
		name  string
		ns    string
		pod   *corev1.Pod
		gates []string // nil: no patch
	}{
		{"budgeted namespace", "team-a", pod(), []string{policyv1.CapacityBudgetGate}},
		{"gated by another controller too", "team-a", pod(func(p *corev1.Pod) { p.Spec.SchedulingGates = []corev1.PodSchedulingGate{other} }),
			[]string{other.Name, policyv1.CapacityBudgetGate}},
		{"no budget", "team-b", pod(), nil},
		{"a budget that only warns", "team-w", pod(), nil},
		{"bound", "team-a", pod(func(p *corev1.Pod) { p.Spec.NodeName = "n" }), nil},
		{"another scheduler", "team-a", pod(func(p *corev1.Pod) { p.Spec.SchedulerName = "volcano" }), nil},
		{"a DaemonSet's", "team-a", pod(func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds", UID: "1", Controller: new(true)}}
		}), nil},
		{"gated already", "team-a", pod(func(p *corev1.Pod) {
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: policyv1.CapacityBudgetGate}}
		}), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := gateRequest(t, tc.ns, tc.pod)
			resp := g.Handle(context.Background(), req)
			if !resp.Allowed {
				t.Fatalf("refused: %v", resp.Result)
			}
			if tc.gates == nil {
				if len(resp.Patches) != 0 {
					t.Fatalf("patched: %v", resp.Patches)
				}
				return
			}
			patched := applyPatch(t, req.Object.Raw, resp)
			var got []string
			for _, sg := range patched.Spec.SchedulingGates {
				got = append(got, sg.Name)
			}
			if len(got) != len(tc.gates) || got[len(got)-1] != tc.gates[len(tc.gates)-1] || got[0] != tc.gates[0] {
				t.Errorf("gates %v, want %v", got, tc.gates)
			}
			if patched.Spec.Containers[0].Image != "x" || patched.GenerateName != "web-" {
				t.Error("the gate changed more than the scheduling gates")
			}
		})
	}
}

func TestBudgetGateLeavesOtherOperationsAlone(t *testing.T) {
	g := gateHook(t)
	req := gateRequest(t, "team-a", &corev1.Pod{})
	req.Operation = admissionv1.Update
	if resp := g.Handle(context.Background(), req); !resp.Allowed || len(resp.Patches) != 0 {
		t.Errorf("an update: %+v", resp)
	}
	req = gateRequest(t, "team-a", &corev1.Pod{})
	req.Object.Raw = []byte(`{"spec":{"containers":"no"}}`)
	if resp := g.Handle(context.Background(), req); resp.Allowed || resp.Result == nil || resp.Result.Code != 400 {
		t.Errorf("a pod that does not decode: %+v", resp)
	}
}

// applyPatch applies a response's JSON patch to the pod as the API server would.
func applyPatch(t *testing.T, raw []byte, resp admission.Response) *corev1.Pod {
	t.Helper()
	ops, err := json.Marshal(resp.Patches)
	if err != nil {
		t.Fatal(err)
	}
	patch, err := jsonpatch.DecodePatch(ops)
	if err != nil {
		t.Fatal(err)
	}
	out, err := patch.Apply(raw)
	if err != nil {
		t.Fatalf("applying %s: %v", ops, err)
	}
	pod := &corev1.Pod{}
	if err := json.Unmarshal(out, pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

// Admission warns about EC2NodeClass fields accepted but not acted on, naming each, and still
// admits the class.
func TestEC2NodeClassFieldsNotActedOnAreWarned(t *testing.T) {
	v := warned(typed(awsv1.SchemeGroupVersion.WithKind("EC2NodeClass").GroupKind(), func(context.Context, *awsv1.EC2NodeClass) field.ErrorList { return nil }),
		(*awsv1.EC2NodeClass).FieldsNotActedOn)
	nc := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "pinned"}}
	nc.Spec.Context = ptr.To("reserved")
	warnings, err := v.ValidateCreate(context.Background(), nc)
	if err != nil || len(warnings) != 1 || !strings.HasPrefix(warnings[0], "EC2NodeClass pinned: spec.context: accepted but not acted on yet") {
		t.Fatalf("warnings %v, err %v", warnings, err)
	}
	nc.Spec.Context = nil
	if warnings, err := v.ValidateUpdate(context.Background(), nc, nc); err != nil || len(warnings) != 0 {
		t.Fatalf("a class without such fields: warnings %v, err %v", warnings, err)
	}
}
