package scheduling

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

func readyNode(status corev1.ConditionStatus, at time.Time) *corev1.Node {
	n := &corev1.Node{}
	n.Name = "n"
	n.Labels = map[string]string{"a": "b"}
	n.Spec.ProviderID = "kwok://n"
	n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status,
		LastHeartbeatTime: metav1.NewTime(at), LastTransitionTime: metav1.NewTime(at)}}
	return n
}

func TestNodeReady(t *testing.T) {
	at := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	if ready, since := NodeReady(readyNode(corev1.ConditionTrue, at)); !ready || !since.Equal(at) {
		t.Errorf("a Ready node: %v since %v", ready, since)
	}
	for _, s := range []corev1.ConditionStatus{corev1.ConditionFalse, corev1.ConditionUnknown} {
		if ready, _ := NodeReady(readyNode(s, at)); ready {
			t.Errorf("Ready %s counts as ready", s)
		}
	}
	if ready, _ := NodeReady(&corev1.Node{}); ready {
		t.Error("a node without a Ready condition counts as ready")
	}
}

// A heartbeat (timestamps, addresses, node info) is no change; each thing a decision reads is.
func TestNodeChangedIgnoresHeartbeats(t *testing.T) {
	at := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	old := readyNode(corev1.ConditionTrue, at)
	beat := readyNode(corev1.ConditionTrue, at.Add(5*time.Minute))
	beat.Status.NodeInfo.KubeletVersion = "v1.37.2"
	beat.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}}
	if NodeChanged(old, beat) {
		t.Error("a heartbeat counts as a change")
	}
	now := metav1.NewTime(at)
	for name, mutate := range map[string]func(*corev1.Node){
		"not ready":   func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionUnknown },
		"cordoned":    func(n *corev1.Node) { n.Spec.Unschedulable = true },
		"provider ID": func(n *corev1.Node) { n.Spec.ProviderID = "kwok://m" },
		"deleting":    func(n *corev1.Node) { n.DeletionTimestamp = &now },
		"labelled":    func(n *corev1.Node) { n.Labels["c"] = "d" },
		"annotated":   func(n *corev1.Node) { n.Annotations = map[string]string{"e": "f"} },
		"tainted":     func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}} },
		"allocatable": func(n *corev1.Node) { n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("4") },
		"finalizers":  func(n *corev1.Node) { n.Finalizers = []string{"x"} },
	} {
		changed := readyNode(corev1.ConditionTrue, at)
		mutate(changed)
		if !NodeChanged(old, changed) {
			t.Errorf("%s does not count as a change", name)
		}
	}
}

func TestDoNotDisrupt(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	pod := func(v string, created, started time.Duration) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(now.Add(-created))}}
		if v != "" {
			p.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: v}
		}
		if started > 0 {
			p.Status.StartTime = &metav1.Time{Time: now.Add(-started)}
		}
		return p
	}
	for _, tc := range []struct {
		name  string
		pod   *corev1.Pod
		holds bool
		until time.Time
	}{
		{"no annotation", pod("", time.Hour, time.Hour), false, time.Time{}},
		{"true holds for as long as it is set", pod("true", time.Hour, time.Hour), true, time.Time{}},
		{"a duration counts from the start", pod("1h", 3*time.Hour, 30*time.Minute), true, now.Add(30 * time.Minute)},
		{"a duration run out", pod("1h", 3*time.Hour, 2*time.Hour), false, now.Add(-time.Hour)},
		{"not started: from creation", pod("1h", 30*time.Minute, 0), true, now.Add(30 * time.Minute)},
		{"not a duration", pod("forever", time.Hour, time.Hour), false, time.Time{}},
	} {
		holds, until := DoNotDisrupt(tc.pod, now)
		if holds != tc.holds || !until.Equal(tc.until) {
			t.Errorf("%s: %v until %s, want %v until %s", tc.name, holds, until, tc.holds, tc.until)
		}
	}
}
