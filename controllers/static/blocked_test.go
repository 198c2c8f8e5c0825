package static

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/karpenter-policy/karpenter/api/install"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	fakecloud "github.com/karpenter-policy/karpenter/cloudprovider/fake"
)

// A drifted static pool at its limits.nodes launches nothing and deletes nothing, and says why
// on each drifted NodeClaim and Node its budget would let go, as upstream's DisruptionBlocked.
func TestDriftAtTheNodeLimitIsReportedBlocked(t *testing.T) {
	now := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "static"}, Spec: karpv1.NodePoolSpec{Replicas: ptr.To[int64](2),
		Limits:     karpv1.Limits{corev1.ResourceName("nodes"): resource.MustParse("2")},
		Disruption: karpv1.Disruption{Budgets: []karpv1.Budget{{Nodes: "1"}}},
		Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"}}}}}
	builder := fake.NewClientBuilder().WithScheme(install.NewScheme()).WithObjects(np)
	for _, name := range []string{"a", "b"} {
		nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.NodePoolLabelKey: np.Name},
			CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))},
			Status: karpv1.NodeClaimStatus{NodeName: "node-" + name, ProviderID: "fake://" + name, Conditions: []metav1.Condition{
				{Type: karpv1.ConditionTypeInitialized, Status: metav1.ConditionTrue},
				{Type: karpv1.ConditionTypeDrifted, Status: metav1.ConditionTrue}}}}
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-" + name, Labels: map[string]string{karpv1.NodePoolLabelKey: np.Name}}}
		builder = builder.WithObjects(nc, node).WithStatusSubresource(nc)
	}
	kube := builder.Build()
	recorder := events.NewFakeRecorder(10)
	c := NewController(kube, fakecloud.New(), recorder, clocktesting.NewFakeClock(now))
	res, err := c.Reconcile(context.Background(), np)
	if err != nil || res.RequeueAfter != Recheck {
		t.Fatalf("reconcile: %v, %v; want a recheck after %v", res, err, Recheck)
	}
	var claims karpv1.NodeClaimList
	if err := kube.List(context.Background(), &claims); err != nil || len(claims.Items) != 2 {
		t.Fatalf("%d NodeClaims (%v), want the 2 drifted ones and no replacement", len(claims.Items), err)
	}
	for _, nc := range claims.Items {
		if nc.DeletionTimestamp != nil {
			t.Errorf("%s is being deleted: a static pool at its limit replaces first or not at all", nc.Name)
		}
	}
	close(recorder.Events)
	var got []string
	for e := range recorder.Events {
		got = append(got, e)
	}
	// The budget of 1 lets one node go: the oldest (by name here), on its NodeClaim and Node.
	if len(got) != 2 {
		t.Fatalf("events %q, want DisruptionBlocked on one NodeClaim and its Node", got)
	}
	for _, e := range got {
		if !strings.Contains(e, "DisruptionBlocked") || !strings.Contains(e, WhyAtLimit) {
			t.Errorf("event %q, want DisruptionBlocked saying %q", e, WhyAtLimit)
		}
	}
}
