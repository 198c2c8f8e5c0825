package admission

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	autoscalingv1beta1 "github.com/karpenter-policy/karpenter/api/autoscaling/v1beta1"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	karpv1alpha1 "github.com/karpenter-policy/karpenter/api/karpenter/v1alpha1"
)

// A budget for Unhealthy is warned about while node repair is off, and not once it is on.
func TestUnhealthyBudgetWarning(t *testing.T) {
	np := &karpv1.NodePool{}
	np.Name = "general"
	np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "1", Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonUnhealthy}}}
	off := (&Reviewer{}).unhealthyBudgets(np)
	if len(off) != 1 || !strings.Contains(off[0].Message, "node repair is off") {
		t.Fatalf("warnings %v", off)
	}
	if on := (&Reviewer{}).WithNodeRepair(true).unhealthyBudgets(np); len(on) != 0 {
		t.Fatalf("with repair on: %v", on)
	}
	np.Spec.Disruption.Budgets[0].Reasons = []karpv1.DisruptionReason{karpv1.DisruptionReasonDrifted}
	if w := (&Reviewer{}).unhealthyBudgets(np); len(w) != 0 {
		t.Fatalf("a Drifted budget: %v", w)
	}
}

// spec.replicas is warned about while static NodePools are off, and not once they are on.
func TestStaticReplicasWarning(t *testing.T) {
	np := &karpv1.NodePool{}
	np.Name = "fixed"
	np.Spec.Replicas = ptr.To[int64](3)
	off := (&Reviewer{}).WithStaticCapacity(false).staticReplicas(np)
	if len(off) != 1 || !strings.Contains(off[0].Message, "StaticCapacity=false") {
		t.Fatalf("warnings %v", off)
	}
	if on := (&Reviewer{}).WithStaticCapacity(true).staticReplicas(np); len(on) != 0 {
		t.Fatalf("with static NodePools on: %v", on)
	}
	np.Spec.Replicas = nil
	if w := (&Reviewer{}).WithStaticCapacity(false).staticReplicas(np); len(w) != 0 {
		t.Fatalf("a dynamic NodePool: %v", w)
	}
}

// A NodeOverlay is warned about while the NodeOverlay gate is off, and not once it is on.
func TestNodeOverlayGateWarning(t *testing.T) {
	o := &karpv1alpha1.NodeOverlay{ObjectMeta: metav1.ObjectMeta{Name: "savings"}}
	off := (&Reviewer{}).WithNodeOverlay(false).Review(context.Background(), "CREATE", o, nil)
	if len(off.Warnings) != 1 || !strings.Contains(off.Warnings[0].Text(), "NodeOverlay savings: NodeOverlays are off") || len(off.Denials) != 0 {
		t.Errorf("gate off: %+v", off)
	}
	if on := (&Reviewer{}).WithNodeOverlay(true).Review(context.Background(), "CREATE", o, nil); len(on.Warnings) != 0 {
		t.Errorf("gate on: warnings %v", on.Warnings)
	}
}

func TestCapacityBufferGateWarning(t *testing.T) {
	cb := &autoscalingv1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "headroom"}}
	off := (&Reviewer{}).WithCapacityBuffer(false).Review(context.Background(), "CREATE", cb, nil)
	if len(off.Warnings) != 1 || !strings.Contains(off.Warnings[0].Text(), "CapacityBuffer headroom: CapacityBuffers are off") || len(off.Denials) != 0 {
		t.Errorf("gate off: %+v", off)
	}
	if on := (&Reviewer{}).WithCapacityBuffer(true).Review(context.Background(), "CREATE", cb, nil); len(on.Warnings) != 0 {
		t.Errorf("gate on: warnings %v", on.Warnings)
	}
}
