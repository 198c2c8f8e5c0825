package planner

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autoscalingv1beta1 "github.com/karpenter-policy/karpenter/api/autoscaling/v1beta1"
	"github.com/karpenter-policy/karpenter/scheduling"
	"github.com/karpenter-policy/karpenter/scheduling/solver"
)

// A CapacityBuffer's room is its namespace's: its virtual pods are charged to the buffer's
// namespace against its CapacityBudget, and held back past it, as real pods would be.
func TestBufferRoomCountsAgainstItsNamespacesBudget(t *testing.T) {
	cb := &autoscalingv1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "headroom", Namespace: "team-a", UID: "u"}}
	chunk := &corev1.PodTemplateSpec{Spec: pods("x", "x", 1, "1", "2Gi")[0].Spec}
	virtual := scheduling.BufferPods(cb, chunk, 40)
	out := solve(t, planner(t, budget("team-a", "0.20")), &solver.Input{Pods: virtual, NodePools: []*solver.NodePool{pool()}})
	spent := attributed(out.Result)
	if spent["team-a"] == 0 || spent["team-a"] > 0.205 {
		t.Errorf("the buffer's room is charged %.4f/hour to team-a, want some and at most its 0.20", spent["team-a"])
	}
	blocked := out.Namespaces["team-a"].Blocked
	if len(blocked) == 0 || len(blocked) == 40 {
		t.Fatalf("some, not all, of the buffer's chunks are held back: %d", len(blocked))
	}
	if !scheduling.IsVirtual(blocked[0].Pod) {
		t.Error("the held pods are the buffer's")
	}
}
