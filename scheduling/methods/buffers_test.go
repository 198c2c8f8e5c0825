package methods

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autoscalingv1beta1 "github.com/karpenter-policy/karpenter/api/autoscaling/v1beta1"
	"github.com/karpenter-policy/karpenter/scheduling"
)

// An empty node that holds a CapacityBuffer's room is not empty to emptiness (deleting it
// would have the provisioner launch it again); the other empty nodes go. Drift still deletes
// it: the provisioner launches the room again from the current spec.
func TestEmptinessKeepsABuffersRoom(t *testing.T) {
	cb := &autoscalingv1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "headroom", Namespace: "default", UID: "u"}}
	// One chunk of 1500m: it fits on one m5.large only.
	virtual := scheduling.BufferPods(cb, &corev1.PodTemplateSpec{Spec: pod("x", "", "1500m", "1Gi").Spec}, 1)
	w := world{nodes: []*corev1.Node{node("a", "m5.large", "on-demand", "z-a"), node("b", "m5.large", "on-demand", "z-a")}, buffers: virtual}
	c := w.cluster()
	got := strings.Join(commandNames(commands(t, Emptiness{}, c)), " | ")
	if got != "delete:a" && got != "delete:b" {
		t.Fatalf("emptiness: got %q, want one of the two nodes deleted", got)
	}
	kept := "a"
	if got == "delete:a" {
		kept = "b"
	}
	found := false
	for _, u := range c.Unconsolidatable {
		if u.Node == kept && strings.Contains(u.Reason, "CapacityBuffer default/headroom") {
			found = true
		}
	}
	if !found {
		t.Errorf("no note says why %s stays: %v", kept, c.Unconsolidatable)
	}
	// Without the buffer both go.
	w.buffers = nil
	if got := strings.Join(commandNames(commands(t, Emptiness{}, w.cluster())), " | "); got != "delete:a,b" {
		t.Errorf("without a buffer: got %q, want delete:a,b", got)
	}
}
