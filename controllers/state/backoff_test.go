package state

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

func daemonPod(name, node, cpu string) *corev1.Pod {
	p := pendingPod(name)
	p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "agent", UID: "agent", Controller: ptr.To(true)}}
	p.Spec.NodeName, p.Status = node, corev1.PodStatus{Phase: corev1.PodRunning}
	p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse(cpu)
	return p
}

// A pod displaced from its node by the node's DaemonSet pod (which kube-scheduler places
// first) is a misfit: a node launched the same way would not hold it either. A pod displaced
// by a pod of the same priority that kube-scheduler bound off-plan is not.
func TestMisfitsAreDisplacedPodsTheNodeCannotHold(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
	a, aClaim := node("a", clk.Now().Add(-10*time.Second)) // 2 cpu
	b, bClaim := node("b", clk.Now().Add(-10*time.Second))
	onA, onB := pendingPod("on-a"), pendingPod("on-b")
	onA.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("1500m")
	c := newCluster(clk, a, aClaim, b, bClaim, onA, onB, daemonPod("agent-a", "a", "1"), daemonPod("agent-b", "b", "500m"))
	c.Nominations().Nominate(onA, "a")
	c.Nominations().Nominate(onB, "b")
	snap, err := c.Snapshot(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Misfits) != 1 || snap.Misfits[0].Pod.Name != "on-a" || snap.Misfits[0].Node != "a" {
		t.Fatalf("want on-a a misfit on a (1 cpu DaemonSet pod + 1.5 cpu > 2 cpu), got %+v", snap.Misfits)
	}
	// on-b fits beside b's agent: its nomination holds.
	for _, p := range snap.Pods {
		if p.Name == "on-b" {
			t.Error("on-b fits on b and keeps its place")
		}
	}
	// A higher-priority pod counts like a DaemonSet pod.
	hi := pendingPod("hi")
	hi.Spec.NodeName, hi.Status, hi.Spec.Priority = "b", corev1.PodStatus{Phase: corev1.PodRunning}, ptr.To[int32](1000)
	hi.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("1")
	c.Update(hi)
	if snap, err = c.Snapshot(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if len(snap.Misfits) != 2 {
		t.Fatalf("on-b no longer fits beside b's agent and a higher-priority pod: misfits %+v", snap.Misfits)
	}
}

// The backoff doubles with each node a workload misfits on, is no news for the same node
// again, caps at MaxMisfitBackoff, and starts over after MisfitReset.
func TestMisfitBackoff(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
	c := NewCluster(nil, clk)
	p := pendingPod("web-1")
	p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web", UID: "web", Controller: ptr.To(true)}}
	if _, ok := c.BackedOff(p); ok {
		t.Fatal("no backoff before any misfit")
	}
	until, news := c.Misfit(p, "n1")
	if !news || until.Sub(clk.Now()) != MisfitBackoff {
		t.Fatalf("first misfit: news %v, backoff %s", news, until.Sub(clk.Now()))
	}
	if _, news := c.Misfit(p, "n1"); news {
		t.Error("the same node again is no news")
	}
	// A replacement pod of the same ReplicaSet backs off too.
	twin := pendingPod("web-2")
	twin.OwnerReferences = p.OwnerReferences
	if _, ok := c.BackedOff(twin); !ok {
		t.Error("the workload backs off, not only the pod")
	}
	if _, ok := c.BackedOff(pendingPod("other")); ok {
		t.Error("another workload does not back off")
	}
	clk.Step(MisfitBackoff)
	if _, ok := c.BackedOff(p); ok {
		t.Fatal("the backoff is over")
	}
	want := []time.Duration{2 * MisfitBackoff, 4 * MisfitBackoff, 8 * MisfitBackoff, 16 * MisfitBackoff, MaxMisfitBackoff, MaxMisfitBackoff}
	for i, w := range want {
		until, news := c.Misfit(p, "n"+string(rune('2'+i)))
		if !news || until.Sub(clk.Now()) != w {
			t.Fatalf("misfit %d: news %v, backoff %s, want %s", i+2, news, until.Sub(clk.Now()), w)
		}
		clk.Step(time.Minute)
	}
	clk.Step(MisfitReset)
	if until, _ := c.Misfit(p, "again"); until.Sub(clk.Now()) != MisfitBackoff {
		t.Fatalf("after %s without a misfit the backoff starts over, got %s", MisfitReset, until.Sub(clk.Now()))
	}
}

// Only kube-scheduler's preemption is recorded, by workload, and only for a while.
func TestPreemptionsAreRecorded(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
	c := NewCluster(nil, clk)
	p := pendingPod("web-1")
	p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web", UID: "web", Controller: ptr.To(true)}}
	p.Spec.NodeName, p.Status = "n1", corev1.PodStatus{Phase: corev1.PodRunning}
	c.Update(p)
	if _, ok := c.PreemptedFrom(p); ok {
		t.Fatal("a running pod was not preempted")
	}
	evicted := p.DeepCopy()
	evicted.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "EvictionByEvictionAPI"}}
	c.Update(evicted)
	if _, ok := c.PreemptedFrom(p); ok {
		t.Fatal("an eviction is no preemption")
	}
	preempted := p.DeepCopy()
	preempted.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: corev1.PodReasonPreemptionByScheduler}}
	c.Update(preempted)
	twin := pendingPod("web-2")
	twin.OwnerReferences = p.OwnerReferences
	if node, ok := c.PreemptedFrom(twin); !ok || node != "n1" {
		t.Fatalf("the replacement's workload was preempted from n1: %q %v", node, ok)
	}
	clk.Step(MaxMisfitBackoff + time.Second)
	if _, ok := c.PreemptedFrom(twin); ok {
		t.Fatal("a preemption is forgotten after MaxMisfitBackoff")
	}
}
