package scheduling

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
)

func TestIsProvisionableWithSchedulingGates(t *testing.T) {
	budget := corev1.PodSchedulingGate{Name: policyv1.CapacityBudgetGate}
	other := corev1.PodSchedulingGate{Name: "example.com/wait"}
	gated := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonSchedulingGated}
	for _, tc := range []struct {
		name  string
		gates []corev1.PodSchedulingGate
		conds []corev1.PodCondition
		want  bool
	}{
		{"the CapacityBudget gate alone", []corev1.PodSchedulingGate{budget}, []corev1.PodCondition{gated}, true},
		{"the CapacityBudget gate, not yet seen by kube-scheduler", []corev1.PodSchedulingGate{budget}, nil, true},
		{"another controller's gate", []corev1.PodSchedulingGate{other}, []corev1.PodCondition{gated}, false},
		{"both gates", []corev1.PodSchedulingGate{other, budget}, []corev1.PodCondition{gated}, false},
		// Lifted a moment ago: pending still, and its nomination must hold.
		{"gate lifted, kube-scheduler has not looked again", nil, []corev1.PodCondition{gated}, true},
	} {
		p := &corev1.Pod{Spec: corev1.PodSpec{SchedulingGates: tc.gates}, Status: corev1.PodStatus{Conditions: tc.conds}}
		if got := IsProvisionable(p); got != tc.want {
			t.Errorf("%s: provisionable %t, want %t", tc.name, got, tc.want)
		}
	}
}
