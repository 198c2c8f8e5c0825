package termination

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/karpenter-policy/karpenter/api/install"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	cloudfake "github.com/karpenter-policy/karpenter/cloudprovider/fake"
	"github.com/karpenter-policy/karpenter/controllers/index"
	"github.com/karpenter-policy/karpenter/controllers/metrics"
	"github.com/karpenter-policy/karpenter/controllers/metrics/metricstest"
)

const providerID = "fake://node"

func deletingNode(ready bool) *corev1.Node {
	status := corev1.ConditionTrue
	if !ready {
		status = corev1.ConditionUnknown
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node", UID: "node-uid", Finalizers: []string{karpv1.TerminationFinalizer},
		DeletionTimestamp: &metav1.Time{Time: now.Add(-time.Minute)}, Labels: map[string]string{karpv1.NodePoolLabelKey: "default"}},
		Spec:   corev1.NodeSpec{ProviderID: providerID},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}}}
}

func claim(mut ...func(*karpv1.NodeClaim)) *karpv1.NodeClaim {
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "claim", Finalizers: []string{karpv1.TerminationFinalizer},
		DeletionTimestamp: &metav1.Time{Time: now.Add(-time.Minute)}},
		Status: karpv1.NodeClaimStatus{ProviderID: providerID, NodeName: "node"}}
	for _, m := range mut {
		m(nc)
	}
	return nc
}

type world struct {
	client client.Client
	cloud  *cloudfake.Provider
	clock  *clocktesting.FakeClock
	ctl    *Controller
}

func newWorld(t *testing.T, funcs interceptor.Funcs, objs ...client.Object) *world {
	t.Helper()
	b := fake.NewClientBuilder().WithScheme(install.NewScheme()).WithObjects(objs...).WithStatusSubresource(&karpv1.NodeClaim{}).WithInterceptorFuncs(funcs)
	for _, i := range index.Indexes {
		b = b.WithIndex(i.Object, i.Field, i.Extract)
	}
	w := &world{client: b.Build(), cloud: cloudfake.New(), clock: clocktesting.NewFakeClock(now)}
	w.ctl = NewController(w.client, w.cloud, events.NewFakeRecorder(100), w.clock)
	return w
}

func (w *world) reconcile(t *testing.T) reconcile.Result {
	t.Helper()
	node := &corev1.Node{}
	if err := w.client.Get(context.Background(), client.ObjectKey{Name: "node"}, node); err != nil {
		t.Fatalf("getting the node: %v", err)
	}
	res, err := w.ctl.Reconcile(context.Background(), node)
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	return res
}

func (w *world) nodeGone(t *testing.T) bool {
	t.Helper()
	err := w.client.Get(context.Background(), client.ObjectKey{Name: "node"}, &corev1.Node{})
	return apierrors.IsNotFound(err)
}

func stuck(p *corev1.Pod) {
	p.Finalizers = []string{"example.com/hold"}
	p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](3600)
	p.DeletionTimestamp = &metav1.Time{Time: now.Add(time.Hour)}
}

func TestNotReadyNodeWhoseInstanceIsGoneIsFinalizedAtOnce(t *testing.T) {
	w := newWorld(t, interceptor.Funcs{}, deletingNode(false), claim(), pod("held", stuck), pod("running"))
	w.reconcile(t)
	if !w.nodeGone(t) {
		t.Fatal("a NotReady node whose instance is gone must be finalized without draining")
	}
	if w.ctl.queue.Len() != 0 {
		t.Errorf("nothing is evicted from a node that is gone, %d queued", w.ctl.queue.Len())
	}
}

func TestReadyNodeWhoseInstanceIsGoneStillDrains(t *testing.T) {
	// Its kubelet still runs: the provider's answer alone does not let it go.
	w := newWorld(t, interceptor.Funcs{}, deletingNode(true), claim(), pod("running"))
	if res := w.reconcile(t); res.IsZero() || w.nodeGone(t) {
		t.Fatal("a Ready node drains before it goes")
	}
	if w.ctl.queue.Len() != 1 {
		t.Errorf("its pod is queued for eviction, %d queued", w.ctl.queue.Len())
	}
}

func TestNotReadyNodeWhoseInstanceRunsDrains(t *testing.T) {
	w := newWorld(t, interceptor.Funcs{}, deletingNode(false), claim(), pod("running"))
	w.cloud.Add(providerID)
	if res := w.reconcile(t); res.IsZero() || w.nodeGone(t) {
		t.Fatal("a NotReady node whose instance still runs drains first")
	}
}

func TestDrainThenTerminateTheInstanceThenRelease(t *testing.T) {
	w := newWorld(t, interceptor.Funcs{}, deletingNode(true), claim(), pod("a"))
	w.cloud.Add(providerID)
	w.cloud.DeleteCalls = 2
	ctx := context.Background()
	w.reconcile(t)
	nc := &karpv1.NodeClaim{}
	_ = w.client.Get(ctx, client.ObjectKey{Name: "claim"}, nc)
	if c := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeDrained); c == nil || c.Status != metav1.ConditionUnknown || c.Reason != "Draining" {
		t.Fatalf("while pods remain, Drained is Unknown/Draining: %+v", c)
	}
	node := &corev1.Node{}
	_ = w.client.Get(ctx, client.ObjectKey{Name: "node"}, node)
	if !hasTaint(node, karpv1.DisruptedNoScheduleTaint) {
		t.Error("the draining node is tainted karpenter.sh/disrupted:NoSchedule")
	}
	// The pod goes.
	if err := w.client.Delete(ctx, pod("a")); err != nil {
		t.Fatal(err)
	}
	if res := w.reconcile(t); res.IsZero() {
		t.Fatal("the instance is terminating: come back until it is gone")
	}
	_ = w.client.Get(ctx, client.ObjectKey{Name: "claim"}, nc)
	if !meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeDrained) || !meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeInstanceTerminating) {
		t.Fatalf("Drained and InstanceTerminating are True: %+v", nc.Status.Conditions)
	}
	if w.nodeGone(t) {
		t.Fatal("the node stays until the instance is gone")
	}
	terminations, _ := metricstest.Observations(t, metrics.NodesTerminationDuration, nil)
	instances, _ := metricstest.Observations(t, metrics.NodeClaimsInstanceTerminationDuration, nil)
	for i := 0; i < 3 && !w.nodeGone(t); i++ {
		w.reconcile(t)
	}
	if !w.nodeGone(t) || w.cloud.Has(providerID) {
		t.Fatalf("once the instance is gone, the node is let go (gone %v, instance %v)", w.nodeGone(t), w.cloud.Has(providerID))
	}
	// Upstream's termination durations: the node's, and its instance's from the first call
	// that left it running.
	if got, _ := metricstest.Observations(t, metrics.NodesTerminationDuration, nil); got-terminations != 1 {
		t.Errorf("%d node terminations observed, want 1", got-terminations)
	}
	if got, _ := metricstest.Observations(t, metrics.NodeClaimsInstanceTerminationDuration, nil); got-instances != 1 {
		t.Errorf("%d instance terminations observed, want 1", got-instances)
	}
}

func TestTolerantDaemonSetAndMirrorPodsDoNotHoldTheNode(t *testing.T) {
	tolerant := pod("agent", daemon, func(p *corev1.Pod) { p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}} })
	mirror := pod("static", func(p *corev1.Pod) { p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"} })
	w := newWorld(t, interceptor.Funcs{}, deletingNode(true), claim(), tolerant, mirror)
	w.reconcile(t)
	if !w.nodeGone(t) {
		t.Fatal("a node holding only pods the drain does not wait for is let go")
	}
	if w.ctl.queue.Len() != 0 {
		t.Errorf("they are not evicted either, %d queued", w.ctl.queue.Len())
	}
}

func TestDeletingTheNodeDeletesItsNodeClaim(t *testing.T) {
	w := newWorld(t, interceptor.Funcs{}, deletingNode(true), claim(func(nc *karpv1.NodeClaim) { nc.DeletionTimestamp = nil }), pod("a"))
	w.reconcile(t)
	nc := &karpv1.NodeClaim{}
	if err := w.client.Get(context.Background(), client.ObjectKey{Name: "claim"}, nc); err != nil || nc.DeletionTimestamp == nil {
		t.Fatalf("the NodeClaim of a deleted node is deleted too: %v %v", err, nc.DeletionTimestamp)
	}
}
