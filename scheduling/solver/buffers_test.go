package solver

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

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

// CapacityBuffers' virtual pods take new capacity as real pods would, with their template's
// constraints, and leave room to real pods wherever both compete.
func TestVirtualPodCases(t *testing.T) {
	buffer := func(name string, replicas int32, spec corev1.PodSpec) []*corev1.Pod {
		cb := &autoscalingv1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: "u-" + types.UID(name)}}
		return scheduling.BufferPods(cb, &corev1.PodTemplateSpec{Spec: spec}, replicas)
	}
	t.Run("a buffer of three keeps room for three", func(t *testing.T) {
		v := buffer("b", 3, pod("x", "1", "2Gi").Spec)
		r := solve(t, &Input{Pods: v, NodePools: pools(nodePool("default"))})
		expectPlaced(t, r)
		n := 0
		for _, c := range r.NodeClaims {
			for _, p := range c.Pods {
				if !scheduling.IsVirtual(p) {
					t.Fatalf("a real pod %s appeared", p.Name)
				}
				n++
			}
		}
		if n != 3 {
			t.Fatalf("%d virtual pods placed, want 3", n)
		}
	})
	t.Run("a buffer's template constraints hold", func(t *testing.T) {
		spec := pod("x", "500m", "512Mi", selector(corev1.LabelArchStable, "arm64")).Spec
		r := solve(t, &Input{Pods: buffer("arm", 2, spec), NodePools: pools(nodePool("default"))})
		expectPlaced(t, r)
		for _, c := range r.NodeClaims {
			if c.InstanceType.Labels[corev1.LabelArchStable] != "arm64" {
				t.Fatalf("a buffer for arm64 on %s", c.InstanceType.Name)
			}
		}
	})
	t.Run("real pods first on a NodePool at its limit", func(t *testing.T) {
		np := &NodePool{NodePool: nodePool("default", limited("cpu", "2")), InstanceTypes: testCatalog()}
		ps := append(buffer("b", 1, pod("x", "1500m", "1Gi").Spec), pod("real", "1500m", "1Gi"))
		r := solve(t, &Input{Pods: ps, NodePools: []*NodePool{np}})
		if len(r.NodeClaims) != 1 || scheduling.IsVirtual(r.NodeClaims[0].Pods[0]) {
			t.Fatalf("the one node the limit allows must hold the real pod: %d NodeClaims", len(r.NodeClaims))
		}
		if len(r.Unschedulable) != 1 || !scheduling.IsVirtual(r.Unschedulable[0].Pod) {
			t.Fatalf("the virtual pod is the one left: %+v", r.Unschedulable)
		}
	})
	t.Run("virtual pods are not counted as pending by effective zone", func(t *testing.T) {
		zonesOf, err := EffectiveZones(&Input{Pods: append(buffer("b", 2, pod("x", "1", "1Gi").Spec), pod("real", "1", "1Gi")), NodePools: pools(nodePool("default"))})
		if err != nil {
			t.Fatal(err)
		}
		total := 0
		for _, n := range zonesOf {
			total += n
		}
		if total != 1 {
			t.Fatalf("effective zones %v count %d pods, want only the real one", zonesOf, total)
		}
	})
}
