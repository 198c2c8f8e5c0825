package eviction

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/karpenter-policy/karpenter/api/install"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/controllers/index"
	"github.com/karpenter-policy/karpenter/controllers/metrics"
	"github.com/karpenter-policy/karpenter/controllers/ratelimit"
)

type world struct {
	client client.Client
	clock  *clocktesting.FakeClock
	queue  *Queue
}

func newWorld(t *testing.T, funcs interceptor.Funcs, objs ...client.Object) *world {
	t.Helper()
	b := fake.NewClientBuilder().WithScheme(install.NewScheme()).WithObjects(objs...).WithInterceptorFuncs(funcs)
	for _, i := range index.Indexes {
		b = b.WithIndex(i.Object, i.Field, i.Extract)
	}
	c := b.Build()
	w := &world{client: c, clock: clocktesting.NewFakeClock(now)}
	w.queue = NewQueue(c, events.NewFakeRecorder(100), w.clock)
	return w
}

func tooManyRequests(blocked string, graces map[string]int64) interceptor.Funcs {
	return interceptor.Funcs{Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
		do := &client.DeleteOptions{}
		do.ApplyOptions(opts)
		if do.GracePeriodSeconds != nil {
			graces[obj.GetName()] = *do.GracePeriodSeconds
		}
		return c.Delete(ctx, obj, opts...)
	}, SubResourceCreate: func(ctx context.Context, c client.Client, sub string, obj client.Object, subObj client.Object, opts ...client.SubResourceCreateOption) error {
		if sub == "eviction" && obj.GetName() == blocked {
			return apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
		}
		return c.SubResource(sub).Create(ctx, obj, subObj, opts...)
	}}
}

// An evicted pod counts in karpenter_pods_drained_total under its NodeClaim's disruption
// reason, or as a forceful termination when no disruption command deleted the NodeClaim.
func TestDrainedPodsCountedByReason(t *testing.T) {
	ctx := context.Background()
	node := func(name string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: "kwok://" + name}}
	}
	claim := func(name string, reason string) *karpv1.NodeClaim {
		nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: karpv1.NodeClaimStatus{ProviderID: "kwok://" + name}}
		if reason != "" {
			nc.Status.Conditions = []metav1.Condition{{Type: karpv1.ConditionTypeDisruptionReason, Status: metav1.ConditionTrue, Reason: reason, LastTransitionTime: metav1.NewTime(now)}}
		}
		return nc
	}
	drifted := pod("on-drifted", func(p *corev1.Pod) { p.Spec.NodeName = "drifted" })
	deleted := pod("on-deleted", func(p *corev1.Pod) { p.Spec.NodeName = "deleted" })
	w := newWorld(t, interceptor.Funcs{}, node("drifted"), node("deleted"), claim("drifted", "Drifted"), claim("deleted", ""), drifted, deleted)
	before := map[string]float64{}
	for _, r := range []string{"Drifted", metrics.ForcefulTermination} {
		before[r] = testutil.ToFloat64(metrics.PodsDrained.WithLabelValues(r))
	}
	w.queue.Add(nil, drifted, deleted)
	for _, p := range []*corev1.Pod{drifted, deleted} {
		if _, err := w.queue.Reconcile(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range []string{"Drifted", metrics.ForcefulTermination} {
		if got := testutil.ToFloat64(metrics.PodsDrained.WithLabelValues(r)) - before[r]; got != 1 {
			t.Errorf("%v pods drained with reason %q, want 1", got, r)
		}
	}
}

func TestEvictionQueue(t *testing.T) {
	ctx := context.Background()
	deadline := now.Add(10 * time.Minute)
	blocked, free, dnd, late := pod("blocked"), pod("free"), pod("dnd", func(p *corev1.Pod) {
		p.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}
	}), pod("late", grace(3600))
	graces := map[string]int64{}
	w := newWorld(t, tooManyRequests("blocked", graces), blocked, free, dnd, late)
	q := w.queue
	q.Add(nil, blocked, free, dnd)
	q.Add(&deadline, late)
	q.Add(nil, free) // queued once
	if q.Len() != 4 {
		t.Fatalf("%d queued, want 4", q.Len())
	}
	for _, tc := range []struct {
		p     *corev1.Pod
		again bool
		gone  bool
	}{
		{blocked, true, false}, // a PDB holds it: backs off, stays queued
		{free, false, true},    // evicted
		{dnd, true, false},     // do-not-disrupt holds it until the deadline
		{late, false, true},    // deleted for the deadline, with the grace left (the fake client deletes at once)
	} {
		res, err := q.Reconcile(ctx, tc.p)
		if err != nil {
			t.Fatalf("%s: %v", tc.p.Name, err)
		}
		if again := !res.IsZero(); again != tc.again {
			t.Errorf("%s: try again = %v, want %v", tc.p.Name, again, tc.again)
		}
		err = w.client.Get(ctx, client.ObjectKeyFromObject(tc.p), &corev1.Pod{})
		if gone := apierrors.IsNotFound(err); gone != tc.gone {
			t.Errorf("%s: gone = %v, want %v", tc.p.Name, gone, tc.gone)
		}
	}
	if q.Len() != 2 {
		t.Errorf("the blocked and the do-not-disrupt pods stay queued, %d queued", q.Len())
	}
	if graces["late"] != 600 {
		t.Errorf("a pod whose grace (3600 s) outlasts the deadline 600 s away is deleted with 600 s, got %v", graces)
	}
	// A pod of the same name but another UID is not the one queued.
	other := blocked.DeepCopy()
	other.UID = "someone-else"
	if res, _ := q.Reconcile(ctx, other); !res.IsZero() || q.Len() != 1 {
		t.Errorf("a replaced pod leaves the queue without eviction: %v, %d queued", res, q.Len())
	}
	// Once the deadline is near, the do-not-disrupt pod is deleted with the grace left.
	w.clock.SetTime(deadline.Add(-20 * time.Second))
	q.Add(&deadline, dnd)
	if _, err := q.Reconcile(ctx, dnd); err != nil {
		t.Fatal(err)
	}
	if q.Len() != 0 || graces["dnd"] != 20 {
		t.Errorf("30 s before the deadline the do-not-disrupt pod (grace 30 s) is deleted with what is left (20 s): %d queued, %v", q.Len(), graces)
	}
}

func TestEvictionBacksOffPerPod(t *testing.T) {
	l := ratelimit.Limiter[reconcile.Request](Backoff)
	a := reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "default", Name: "a"}}
	b := reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "default", Name: "b"}}
	var got []time.Duration
	for range 10 {
		got = append(got, l.When(a))
	}
	want := []time.Duration{100, 200, 400, 800, 1600, 3200, 6400, 10000, 10000, 10000}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("retry %d after %v, want %v (all: %v)", i, got[i], want[i]*time.Millisecond, got)
		}
	}
	if d := l.When(b); d != 100*time.Millisecond {
		t.Errorf("another pod starts at 100ms, got %v", d)
	}
	l.Forget(a)
	if d := l.When(a); d != 100*time.Millisecond {
		t.Errorf("a pod evicted and queued again starts over, got %v", d)
	}
}
