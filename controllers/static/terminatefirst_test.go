package static

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/karpenter-policy/karpenter/api/install"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	fakecloud "github.com/karpenter-policy/karpenter/cloudprovider/fake"
	"github.com/karpenter-policy/karpenter/controllers/metrics"
	"github.com/karpenter-policy/karpenter/scheduling/methods"
)

var reconcileNow = time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)

// driftedPool is a Ready static pool of the given replicas (limits.nodes too when limit > 0),
// with a budget of one node, whose NodeClaims (by name, labelled with labels) are initialized,
// drifted and each on a Node of its own.
func driftedPool(replicas, limit int64, names []string, labels map[string]string, mut ...func(*karpv1.NodePool)) (*karpv1.NodePool, client.Client) {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "static"}, Spec: karpv1.NodePoolSpec{Replicas: ptr.To(replicas),
		Disruption: karpv1.Disruption{Budgets: []karpv1.Budget{{Nodes: "1"}}},
		Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"}}}},
		Status: karpv1.NodePoolStatus{Conditions: []metav1.Condition{{Type: karpv1.ConditionTypeReady, Status: metav1.ConditionTrue}}}}
	if limit > 0 {
		np.Spec.Limits = karpv1.Limits{corev1.ResourceName("nodes"): *resource.NewQuantity(limit, resource.DecimalSI)}
	}
	for _, m := range mut {
		m(np)
	}
	builder := fake.NewClientBuilder().WithScheme(install.NewScheme()).WithObjects(np)
	for _, name := range names {
		l := map[string]string{karpv1.NodePoolLabelKey: np.Name}
		for k, v := range labels {
			l[k] = v
		}
		nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l, CreationTimestamp: metav1.NewTime(reconcileNow.Add(-time.Hour))},
			Status: karpv1.NodeClaimStatus{NodeName: "node-" + name, ProviderID: "fake://" + name, Conditions: []metav1.Condition{
				{Type: karpv1.ConditionTypeInitialized, Status: metav1.ConditionTrue},
				{Type: karpv1.ConditionTypeDrifted, Status: metav1.ConditionTrue}}}}
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-" + name, Labels: map[string]string{karpv1.NodePoolLabelKey: np.Name}}}
		builder = builder.WithObjects(nc, node).WithStatusSubresource(nc)
	}
	return np, builder.Build()
}

// reconcileOnce reconciles the pool and returns the NodeClaims being deleted, those left, and
// the events recorded.
func reconcileOnce(t *testing.T, c *Controller, kube client.Client, np *karpv1.NodePool, recorder *events.FakeRecorder) (deleted, left []string, got []string) {
	t.Helper()
	res, err := c.Reconcile(context.Background(), np)
	if err != nil || res.RequeueAfter != Recheck {
		t.Fatalf("reconcile: %v, %v; want a recheck after %v", res, err, Recheck)
	}
	var claims karpv1.NodeClaimList
	if err := kube.List(context.Background(), &claims); err != nil {
		t.Fatal(err)
	}
	for _, nc := range claims.Items {
		left = append(left, nc.Name)
	}
	close(recorder.Events)
	for e := range recorder.Events {
		got = append(got, e)
		if strings.Contains(e, "DisruptionTerminating") {
			deleted = append(deleted, e)
		}
	}
	return deleted, left, got
}

// A drifted static pool at its limits.nodes launches nothing and deletes nothing, and says why
// on each drifted NodeClaim and Node its budget would let go, as upstream's DisruptionBlocked.
func TestDriftAtTheNodeLimitIsReportedBlocked(t *testing.T) {
	np, kube := driftedPool(2, 2, []string{"a", "b"}, nil)
	recorder := events.NewFakeRecorder(10)
	c := NewController(kube, fakecloud.New(), recorder, clocktesting.NewFakeClock(reconcileNow))
	deleted, left, got := reconcileOnce(t, c, kube, np, recorder)
	if len(deleted) > 0 || len(left) != 2 {
		t.Fatalf("NodeClaims %v, %d deleted: a static pool at its limit replaces first or not at all", left, len(deleted))
	}
	// The budget of 1 lets one node go: on its NodeClaim and its Node.
	if len(got) != 2 {
		t.Fatalf("events %q, want DisruptionBlocked on one NodeClaim and its Node", got)
	}
	for _, e := range got {
		if !strings.Contains(e, "DisruptionBlocked") || !strings.Contains(e, WhyAtLimit) {
			t.Errorf("event %q, want DisruptionBlocked saying %q", e, WhyAtLimit)
		}
	}
}

// With TerminateFirstDrift, the same pool deletes the node its budget allows first, counted
// as upstream's terminate-first decision; a pool that is not Ready, or cannot launch a node,
// does not (it would not refill).
func TestTerminateFirstAtTheNodeLimit(t *testing.T) {
	counted := func() float64 {
		return testutil.ToFloat64(metrics.DisruptionTerminateFirstDecisions.WithLabelValues("static", "drifted", methods.TerminateFirstStaticAtLimit))
	}
	before := counted()
	cloud := fakecloud.New()
	cloud.InstanceTypes = []*cloudprovider.InstanceType{instanceType("m5.large", "m5", 2, 0.096)}
	np, kube := driftedPool(2, 2, []string{"a", "b"}, nil)
	recorder := events.NewFakeRecorder(10)
	c := NewController(kube, cloud, recorder, clocktesting.NewFakeClock(reconcileNow)).WithTerminateFirstDrift(true)
	deleted, left, _ := reconcileOnce(t, c, kube, np, recorder)
	// The fake client removes a NodeClaim without finalizers at once.
	if len(deleted) != 1 || len(left) != 1 {
		t.Fatalf("%d deleted, %v left; want the one the budget allows deleted first", len(deleted), left)
	}
	if d := counted() - before; d != 1 {
		t.Errorf("terminate_first_decisions_total{static-at-limit} went up by %v, want 1", d)
	}

	notReady, kube := driftedPool(2, 2, []string{"a", "b"}, nil, func(np *karpv1.NodePool) { np.Status.Conditions = nil })
	recorder = events.NewFakeRecorder(10)
	c = NewController(kube, cloud, recorder, clocktesting.NewFakeClock(reconcileNow)).WithTerminateFirstDrift(true)
	if deleted, left, _ := reconcileOnce(t, c, kube, notReady, recorder); len(deleted) > 0 || len(left) != 2 {
		t.Errorf("a pool not Ready: %d deleted, %v left; want none deleted", len(deleted), left)
	}

	// A pool that cannot launch a node at all (no instance type) does not terminate first:
	// nothing would refill it.
	np, kube = driftedPool(2, 2, []string{"a", "b"}, nil)
	recorder = events.NewFakeRecorder(10)
	c = NewController(kube, fakecloud.New(), recorder, clocktesting.NewFakeClock(reconcileNow)).WithTerminateFirstDrift(true)
	if deleted, left, _ := reconcileOnce(t, c, kube, np, recorder); len(deleted) > 0 || len(left) != 2 {
		t.Errorf("a pool that cannot launch: %d deleted, %v left; want none deleted", len(deleted), left)
	}
}

// With TerminateFirstDrift, a pool that launches only into a full capacity reservation deletes
// first the drifted node whose slot it can launch into again, and blocks one whose slot it
// cannot.
func TestTerminateFirstFreesAReservationSlot(t *testing.T) {
	cloud := fakecloud.New()
	it := instanceType("m5.large", "m5", 2, 0.096)
	it.Offerings = append(it.Offerings, cloudprovider.Offering{Zone: "z-a", CapacityType: karpv1.CapacityTypeReserved, Price: 1e-8,
		ReservationID: "cr-1", ReservationCapacity: 0})
	cloud.InstanceTypes = []*cloudprovider.InstanceType{it}
	reservedOnly := func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn,
			Values: []string{karpv1.CapacityTypeReserved}}}
	}
	inReservation := map[string]string{karpv1.CapacityTypeLabelKey: karpv1.CapacityTypeReserved, karpv1.LabelCapacityReservationID: "cr-1"}

	np, kube := driftedPool(2, 0, []string{"a", "b"}, inReservation, reservedOnly)
	recorder := events.NewFakeRecorder(10)
	c := NewController(kube, cloud, recorder, clocktesting.NewFakeClock(reconcileNow)).WithTerminateFirstDrift(true)
	if deleted, left, _ := reconcileOnce(t, c, kube, np, recorder); len(deleted) != 1 || len(left) != 1 {
		t.Fatalf("%d deleted, %v left; want the one the budget allows deleted first", len(deleted), left)
	}

	// A node in another reservation frees no slot the pool can launch into: it is blocked.
	elsewhere := map[string]string{karpv1.CapacityTypeLabelKey: karpv1.CapacityTypeReserved, karpv1.LabelCapacityReservationID: "cr-other"}
	np, kube = driftedPool(2, 0, []string{"a", "b"}, elsewhere, reservedOnly)
	recorder = events.NewFakeRecorder(10)
	c = NewController(kube, cloud, recorder, clocktesting.NewFakeClock(reconcileNow)).WithTerminateFirstDrift(true)
	deleted, left, got := reconcileOnce(t, c, kube, np, recorder)
	if len(deleted) > 0 || len(left) != 2 || len(got) == 0 || !strings.Contains(got[0], "cannot stage a replacement") {
		t.Errorf("%d deleted, %v left, events %q; want none deleted and the node blocked", len(deleted), left, got)
	}
}
