package solver

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autoscalingv1beta1 "github.com/karpenter-policy/karpenter/api/autoscaling/v1beta1"
	"github.com/karpenter-policy/karpenter/scheduling"
)

// Room that exists goes to pods that exist: a buffer's virtual pods, larger or not, take what
// is left, and a new NodeClaim carries them.
func TestRealPodsBeforeVirtualOnes(t *testing.T) {
	cb := &autoscalingv1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "default", UID: "u"}}
	tmpl := &corev1.PodTemplateSpec{Spec: pod("x", "2", "2Gi").Spec}
	virtual := scheduling.BufferPods(cb, tmpl, 1)
	realPod := pod("real", "1500m", "1Gi")
	room := node("room", "z-a", "2", "4Gi")
	r := solve(t, &Input{Pods: append(virtual, realPod), NodePools: pools(nodePool("default")), Nodes: []*scheduling.Node{room}})
	expectPlaced(t, r)
	if got := r.Existing["room"]; len(got) != 1 || got[0] != realPod {
		t.Fatalf("the real pod takes the existing room: %v", r.Existing)
	}
	if len(r.NodeClaims) != 1 || len(r.NodeClaims[0].Pods) != 1 || !scheduling.IsVirtual(r.NodeClaims[0].Pods[0]) {
		t.Fatalf("the virtual pod gets a new NodeClaim: %d", len(r.NodeClaims))
	}
}
