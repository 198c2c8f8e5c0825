package snapshot

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autoscalingv1beta1 "github.com/karpenter-policy/karpenter/api/autoscaling/v1beta1"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/scheduling"
)

// A buffer's virtual pods are pending pods of the snapshot, after the real ones; on the room
// that exists they count as their namespace's pods for the attribution.
func TestBufferPodsArePendingAndHoldRoom(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{karpv1.NodePoolLabelKey: "default"}},
		Spec: corev1.NodeSpec{ProviderID: "fake://n"},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	cb := &autoscalingv1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "team", UID: "u"}}
	chunk := &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")}}}}}}
	virtual := scheduling.BufferPods(cb, chunk, 3)
	pending := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "real", Namespace: "app"}, Status: corev1.PodStatus{Phase: corev1.PodPending,
		Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}}}
	snap := Build(&Objects{Nodes: []*corev1.Node{n}, Pods: []*corev1.Pod{pending}, BufferPods: virtual}, Env{})
	if len(snap.Pods) != 4 || snap.Pods[0] != pending || !scheduling.IsVirtual(snap.Pods[3]) {
		t.Fatalf("pending: %d pods, want the real one then 3 virtual", len(snap.Pods))
	}
	nodes := snap.NodesWithBufferRoom()
	if len(nodes) != 1 || len(nodes[0].Pods) != 2 || len(snap.Nodes[0].Pods) != 0 {
		t.Fatalf("two 1.5 CPU chunks fit the 4 CPU node's room, on a copy: %d (snapshot's node: %d)", len(nodes[0].Pods), len(snap.Nodes[0].Pods))
	}
	if without := Build(&Objects{Nodes: []*corev1.Node{n}}, Env{}); without.NodesWithBufferRoom()[0] != without.Nodes[0] {
		t.Error("without buffers the nodes are the snapshot's own")
	}
}
