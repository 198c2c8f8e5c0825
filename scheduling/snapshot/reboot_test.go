package snapshot

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

// A node that node repair reboots offers its room without the rebooting fence (its pods come
// back to it), and is marked Rebooting; a node merely tainted the same way, with no reboot in
// progress, keeps the taint.
func TestRebootingNodeOffersItsRoom(t *testing.T) {
	for _, tc := range []struct {
		name      string
		rebooting metav1.ConditionStatus
		wantTaint bool
	}{
		{name: "rebooting", rebooting: metav1.ConditionTrue},
		{name: "reboot over, fence left by hand", rebooting: metav1.ConditionFalse, wantTaint: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{karpv1.NodePoolLabelKey: "default"}},
				Spec: corev1.NodeSpec{ProviderID: "fake://n", Taints: []corev1.Taint{karpv1.RebootingNoScheduleTaint}},
				Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
					Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
			nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{karpv1.NodePoolLabelKey: "default"}},
				Status: karpv1.NodeClaimStatus{ProviderID: "fake://n", NodeName: "n", Conditions: []metav1.Condition{
					{Type: karpv1.ConditionTypeInitialized, Status: metav1.ConditionTrue},
					{Type: karpv1.ConditionTypeRebooting, Status: tc.rebooting}}}}
			snap := Build(&Objects{Nodes: []*corev1.Node{n}, NodeClaims: []*karpv1.NodeClaim{nc}}, Env{})
			if len(snap.StateNodes) != 1 || snap.StateNodes[0].Sched == nil {
				t.Fatalf("state nodes %+v", snap.StateNodes)
			}
			sn := snap.StateNodes[0]
			if sn.Rebooting != (tc.rebooting == metav1.ConditionTrue) {
				t.Errorf("Rebooting %v", sn.Rebooting)
			}
			if got := len(sn.Sched.Taints) > 0; got != tc.wantTaint {
				t.Errorf("solver's taints %v, want the fence %v", sn.Sched.Taints, tc.wantTaint)
			}
		})
	}
}
