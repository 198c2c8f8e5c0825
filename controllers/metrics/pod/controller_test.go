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
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/karpenter-policy/karpenter/api/install"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/controllers/metrics"
	"github.com/karpenter-policy/karpenter/controllers/metrics/metricstest"
)

// A pod is followed from pending to bound to ready: its waiting gauges while it waits, its
// bound and startup durations once, its state series labelled with its node, and nothing
// left of it once it is deleted.
func TestPodFromPendingToReadyToGone(t *testing.T) {
	created := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(created.Add(20 * time.Second))
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{
		karpv1.NodePoolLabelKey: "general", corev1.LabelTopologyZone: "z-a", corev1.LabelInstanceTypeStable: "m5.large"}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "shop", UID: "u1", CreationTimestamp: metav1.NewTime(created),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web"}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending}}
	kube := fake.NewClientBuilder().WithScheme(install.NewScheme()).WithObjects(node, pod).Build()
	c := NewController(kube, clk)
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "shop", Name: "web-1"}}
	reconcileOnce := func() reconcile.Result {
		t.Helper()
		res, err := c.Reconcile(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	name := map[string]string{"name": "web-1", "namespace": "shop"}

	if res := reconcileOnce(); res.RequeueAfter != Refresh {
		t.Errorf("a waiting pod is refreshed after %v, want %v", res.RequeueAfter, Refresh)
	}
	if got := testutil.ToFloat64(metrics.PodsUnboundTime.WithLabelValues("web-1", "shop", "false")); got != 20 {
		t.Errorf("unbound time %v, want 20", got)
	}
	if got := testutil.ToFloat64(metrics.PodsUnstartedTime.WithLabelValues("web-1", "shop")); got != 20 {
		t.Errorf("unstarted time %v, want 20", got)
	}
	if n := metricstest.Series(t, metrics.PodsState, map[string]string{"name": "web-1", "scheduled": "false", "owner": "/apis/apps/v1/namespaces/shop/replicasets/web"}); n != 1 {
		t.Errorf("%d pending state series, want 1", n)
	}

	// Bound at +5 s, ready at +12 s.
	bound, _ := metricstest.Observations(t, metrics.PodsBoundDuration, map[string]string{"dynamic_resources": "false"})
	started, _ := metricstest.Observations(t, metrics.PodsStartupDuration, nil)
	pod.Spec.NodeName = "n1"
	if err := kube.Update(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(created.Add(5 * time.Second))},
		{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(created.Add(12 * time.Second))}}}
	if err := kube.Status().Update(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if res := reconcileOnce(); res.RequeueAfter != 0 {
		t.Errorf("a running, ready pod is refreshed after %v", res.RequeueAfter)
	}
	if n := metricstest.Series(t, metrics.PodsUnboundTime, name) + metricstest.Series(t, metrics.PodsUnstartedTime, name); n != 0 {
		t.Errorf("%d waiting gauges remain for a bound, ready pod", n)
	}
	if got, _ := metricstest.Observations(t, metrics.PodsBoundDuration, map[string]string{"dynamic_resources": "false"}); got-bound != 1 {
		t.Errorf("%d bound durations observed, want 1", got-bound)
	}
	if got, _ := metricstest.Observations(t, metrics.PodsStartupDuration, nil); got-started != 1 {
		t.Errorf("%d startup durations observed, want 1", got-started)
	}
	if n := metricstest.Series(t, metrics.PodsState, map[string]string{"name": "web-1", "node": "n1", "nodepool": "general", "zone": "z-a",
		"instance_type": "m5.large", "managed": "true", "phase": "Running", "ready": "true"}); n != 1 {
		t.Errorf("%d running state series with its node's labels, want 1", n)
	}
	if n := metricstest.Series(t, metrics.PodsState, name); n != 1 {
		t.Errorf("%d state series for the pod, want 1 (the pending one replaced)", n)
	}
	// Observed once: another reconcile of the same ready pod does not count it again.
	before, _ := metricstest.Observations(t, metrics.PodsStartupDuration, nil)
	reconcileOnce()
	if after, _ := metricstest.Observations(t, metrics.PodsStartupDuration, nil); after != before {
		t.Errorf("startup observed again: %d -> %d", before, after)
	}

	if err := kube.Delete(context.Background(), pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	reconcileOnce()
	if n := metricstest.Series(t, metrics.PodsState, name); n != 0 {
		t.Errorf("%d state series remain for a deleted pod", n)
	}
}
