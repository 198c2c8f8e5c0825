package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/scheduling"
)

// CapacityBudgetGatePath serves the mutating webhook that gates new pods of namespaces whose
// CapacityBudget can hold pods back. Its MutatingWebhookConfiguration is written by hand in
// config/webhook/capacity-budget-gate.yaml: it selects namespaces by the label the
// controller sets (policyv1.NamespaceGateLabel), which controller-gen's markers cannot say.
const CapacityBudgetGatePath = "/mutate-core-v1-pod-capacity-budget-gate"

// Mutating are the mutating webhooks by path. r reads CapacityBudgets (the manager's cache).
func Mutating(scheme *runtime.Scheme, r client.Reader) map[string]*admission.Webhook {
	return map[string]*admission.Webhook{
		CapacityBudgetGatePath: {Handler: &BudgetGate{Reader: r, Decoder: admission.NewDecoder(scheme)}},
	}
}

// BudgetGate adds the CapacityBudget scheduling gate (policyv1.CapacityBudgetGate) to a new
// pod that kube-scheduler would schedule, when a CapacityBudget of its namespace can hold pods
// back; the provisioner lifts the gate once it has placed the pod within the budget
// (docs/architecture.md, "CapacityBudget gate"). It changes nothing else, and nothing of pods
// bound already, of DaemonSets or of other schedulers.
type BudgetGate struct {
	Reader  client.Reader
	Decoder admission.Decoder
}

// Handle answers one AdmissionReview.
func (g *BudgetGate) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create || req.SubResource != "" || req.Kind.Group != "" || req.Kind.Kind != "Pod" {
		return admission.Allowed("only new pods are gated")
	}
	pod := &corev1.Pod{}
	if err := g.Decoder.Decode(req, pod); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the pod: %w", err))
	}
	if why := ungateable(pod); why != "" {
		return admission.Allowed(why)
	}
	holds, err := g.budgetHolds(ctx, req.Namespace)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("reading the CapacityBudgets of namespace %s: %w", req.Namespace, err))
	}
	if holds == "" {
		return admission.Allowed("no CapacityBudget of the namespace holds pods back")
	}
	gate, _ := json.Marshal(corev1.PodSchedulingGate{Name: policyv1.CapacityBudgetGate})
	var op jsonpatch.Operation
	if len(pod.Spec.SchedulingGates) == 0 {
		op = jsonpatch.NewOperation("add", "/spec/schedulingGates", []json.RawMessage{gate})
	} else {
		op = jsonpatch.NewOperation("add", "/spec/schedulingGates/-", json.RawMessage(gate))
	}
	return admission.Patched(fmt.Sprintf("gated by CapacityBudget %s/%s until the provisioner places it", req.Namespace, holds), op)
}

// ungateable says why a pod is left alone, or "" when it may be gated.
func ungateable(p *corev1.Pod) string {
	switch {
	case p.Spec.NodeName != "":
		return "the pod is bound already"
	case scheduling.IsOwnedByDaemonSet(p):
		return "DaemonSet pods run on every node whatever the budget"
	case p.Spec.SchedulerName != "" && p.Spec.SchedulerName != corev1.DefaultSchedulerName:
		return "the pod is for scheduler " + p.Spec.SchedulerName
	}
	for _, sg := range p.Spec.SchedulingGates {
		if sg.Name == policyv1.CapacityBudgetGate {
			return "the pod is gated already"
		}
	}
	return ""
}

// budgetHolds names a CapacityBudget of the namespace that can hold pods back, or "".
func (g *BudgetGate) budgetHolds(ctx context.Context, namespace string) (string, error) {
	var list policyv1.CapacityBudgetList
	if err := g.Reader.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return "", err
	}
	for i := range list.Items {
		if list.Items[i].HoldsPods() {
			return list.Items[i].Name, nil
		}
	}
	return "", nil
}
