package pod

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/karpenter-policy/karpenter/api/install"
	"github.com/karpenter-policy/karpenter/controllers/metrics"
	"github.com/karpenter-policy/karpenter/controllers/metrics/metricstest"
	"github.com/karpenter-policy/karpenter/controllers/state"
)

// With the provisioner's decisions, a pod's waits are also counted from its first placement:
// undecided from when the provisioner saw it until a batch decided, then unbound and
// unstarted from the placement, and its bound and startup durations from there once; the
// decision is forgotten once the pod started.
func TestProvisioningLatency(t *testing.T) {
	created := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(created.Add(2 * time.Second))
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "api-1", Namespace: "shop", UID: "p1", CreationTimestamp: metav1.NewTime(created)},
		Status: corev1.PodStatus{Phase: corev1.PodPending}}
	kube := fake.NewClientBuilder().WithScheme(install.NewScheme()).WithObjects(pod).Build()
	cluster := state.NewCluster(nil, clk)
	c := NewController(kube, clk).WithDecisions(cluster.Decisions())
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "shop", Name: "api-1"}}
	reconcileOnce := func() {
		t.Helper()
		if _, err := c.Reconcile(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	name := map[string]string{"name": "api-1", "namespace": "shop"}

	// Seen at +2 s; no batch yet at +5 s.
	cluster.Decisions().AckPods(pod)
	clk.Step(3 * time.Second)
	reconcileOnce()
	if got := testutil.ToFloat64(metrics.PodsSchedulingUndecidedTime.WithLabelValues("api-1", "shop")); got != 3 {
		t.Errorf("undecided time %v, want 3", got)
	}
	if n := metricstest.Series(t, metrics.PodsProvisioningUnboundTime, name) + metricstest.Series(t, metrics.PodsProvisioningUnstartedTime, name); n != 0 {
		t.Errorf("%d provisioning gauges before any placement", n)
	}

	// A batch at +5 s finds it no place, one at +8 s places it.
	if waited := cluster.Decisions().MarkDecisions(nil, []*corev1.Pod{pod}); len(waited) != 1 || waited[0] != 3*time.Second {
		t.Errorf("first decision waited %v, want [3s]", waited)
	}
	clk.Step(3 * time.Second)
	if waited := cluster.Decisions().MarkDecisions([]*corev1.Pod{pod}, nil); len(waited) != 0 {
		t.Errorf("a second decision is not a first one: %v", waited)
	}
	clk.Step(4 * time.Second)
	reconcileOnce()
	if n := metricstest.Series(t, metrics.PodsSchedulingUndecidedTime, name); n != 0 {
		t.Error("the undecided time stays after a batch decided")
	}
	if got := testutil.ToFloat64(metrics.PodsProvisioningUnboundTime.WithLabelValues("api-1", "shop", "false")); got != 4 {
		t.Errorf("provisioning unbound time %v, want 4 (since the placement at +8 s)", got)
	}
	if got := testutil.ToFloat64(metrics.PodsProvisioningUnstartedTime.WithLabelValues("api-1", "shop")); got != 4 {
		t.Errorf("provisioning unstarted time %v, want 4", got)
	}

	// Bound at +15 s, ready at +20 s.
	bound, boundSum := metricstest.Observations(t, metrics.PodsProvisioningBoundDuration, nil)
	started, startedSum := metricstest.Observations(t, metrics.PodsProvisioningStartupDuration, nil)
	pod.Spec.NodeName = "n1"
	if err := kube.Update(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(created.Add(15 * time.Second))},
		{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(created.Add(20 * time.Second))}}}
	if err := kube.Status().Update(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	reconcileOnce()
	if got, sum := metricstest.Observations(t, metrics.PodsProvisioningBoundDuration, nil); got-bound != 1 || sum-boundSum != 7 {
		t.Errorf("%d provisioning bound durations observed, of %vs; want 1 of 7s", got-bound, sum-boundSum)
	}
	if got, sum := metricstest.Observations(t, metrics.PodsProvisioningStartupDuration, nil); got-started != 1 || sum-startedSum != 12 {
		t.Errorf("%d provisioning startup durations observed, of %vs; want 1 of 12s", got-started, sum-startedSum)
	}
	if n := metricstest.Series(t, metrics.PodsProvisioningUnboundTime, name) + metricstest.Series(t, metrics.PodsProvisioningUnstartedTime, name); n != 0 {
		t.Errorf("%d provisioning gauges remain for a bound, ready pod", n)
	}
	if _, ok := cluster.Decisions().Decision(pod.UID); ok {
		t.Error("the decision of a pod that started is still remembered")
	}
}

// A pod's first decision is observed once, with how long it waited since it was seen; a
// batch that finds it no place takes its place away; a deleted pod is forgotten.
func TestDecisionsAreRecordedOnce(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC))
	cluster := state.NewCluster(nil, clk)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: "a"}}
	bound := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns", UID: "b"}, Spec: corev1.PodSpec{NodeName: "n1"}}
	cluster.Decisions().AckPods(pod, bound)
	clk.Step(2 * time.Second)
	if waited := cluster.Decisions().MarkDecisions([]*corev1.Pod{pod, bound}, nil); len(waited) != 1 || waited[0] != 2*time.Second {
		t.Fatalf("waited %v, want [2s] (the bound pod is left alone)", waited)
	}
	d, _ := cluster.Decisions().Decision(pod.UID)
	if !d.Schedulable.Equal(clk.Now()) || !d.Decided.Equal(clk.Now()) {
		t.Errorf("decision %+v", d)
	}
	clk.Step(time.Second)
	cluster.Decisions().MarkDecisions([]*corev1.Pod{pod}, nil)
	if again, _ := cluster.Decisions().Decision(pod.UID); !again.Schedulable.Equal(d.Schedulable) {
		t.Errorf("placed again: schedulable moved from %v to %v", d.Schedulable, again.Schedulable)
	}
	cluster.Decisions().MarkDecisions(nil, []*corev1.Pod{pod})
	if lost, _ := cluster.Decisions().Decision(pod.UID); !lost.Schedulable.IsZero() || !lost.Decided.Equal(d.Decided) {
		t.Errorf("found no place: %+v, want no schedulable time and the first decision kept", lost)
	}
	cluster.Delete(pod)
	if _, ok := cluster.Decisions().Decision(pod.UID); ok {
		t.Error("a deleted pod's decision is still remembered")
	}
}
