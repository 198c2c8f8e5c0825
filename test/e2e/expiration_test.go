package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/test"
)

// A NodeClaim expires by the expireAfter it was launched with, as upstream's: removing the
// NodePool's expireAfter afterwards does not save it. Budgets of zero for every reason keep
// disruption (drift included: the change drifts the node) out of it, so only expiration can
// take the node; its pod runs again on a new node, which does not expire.
func TestExpirationFollowsTheNodeClaimsOwnExpireAfter(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	np := isolated(t, ctx, nil, func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.ExpireAfter = karpv1.MustParseNillableDuration("40s")
		np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "0"}}
	})
	create(t, ctx, deployment("expiring", 1, np.Name, "500m", nil))
	first := runningPods(t, ctx, "expiring", 1)[0].Spec.NodeName
	claims := claimsOf(t, ctx, first)
	if len(claims) != 1 || claims[0].Spec.ExpireAfter.String() != "40s" {
		t.Fatalf("the node's NodeClaim did not take the NodePool's expireAfter: %+v", claims)
	}
	claim := claims[0]
	patchNodePool(t, ctx, np, func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.ExpireAfter = karpv1.MustParseNillableDuration("Never")
	})
	var goneAt time.Time
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		nc := &karpv1.NodeClaim{}
		err := kube.Get(ctx, client.ObjectKeyFromObject(&claim), nc)
		if apierrors.IsNotFound(err) || err == nil && nc.DeletionTimestamp != nil {
			if goneAt.IsZero() {
				goneAt = time.Now()
				if err == nil {
					goneAt = nc.DeletionTimestamp.Time
				}
			}
			return true, nil
		}
		return false, nil
	}); err != nil {
		t.Fatalf("NodeClaim %s (expireAfter 40s at launch) was not deleted after the NodePool's expireAfter became Never\n%s", claim.Name, local.LogTail("karpenter", 20))
	}
	if age := goneAt.Sub(claim.CreationTimestamp.Time); age < 40*time.Second {
		t.Errorf("NodeClaim %s went %s after its creation, before its 40s were up", claim.Name, age.Round(time.Second))
	}
	// The pod runs again, on a NodeClaim launched with the NodePool's new expireAfter.
	var now []karpv1.NodeClaim
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := kube.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": "expiring"}); err != nil {
			return false, nil
		}
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && p.Spec.NodeName != first {
				now = claimsOf(t, ctx, p.Spec.NodeName)
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("the pod of the expired node never ran again\n%s", local.LogTail("karpenter", 20))
	}
	if len(now) != 1 || now[0].Spec.ExpireAfter.Duration != nil {
		t.Errorf("the replacement NodeClaim does not carry the NodePool's expireAfter Never: %+v", now)
	}
}

// A NodeClaim whose node class does not exist is deleted, with a NodeClassNotReady warning
// on it, as upstream's; it is not retried forever.
func TestNodeClaimWithoutItsNodeClassIsDeleted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nc := test.NodeClaim(func(nc *karpv1.NodeClaim) { nc.Spec.NodeClassRef.Name = "no-such-class" })
	create(t, ctx, nc)
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(kube.Get(ctx, client.ObjectKeyFromObject(nc), &karpv1.NodeClaim{})), nil
	}); err != nil {
		t.Fatalf("NodeClaim %s of a missing KWOKNodeClass is still there after a minute\n%s", nc.Name, local.LogTail("karpenter", 20))
	}
	var warned string
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var evs eventsv1.EventList
		if err := kube.List(ctx, &evs); err != nil {
			return false, nil
		}
		for _, e := range evs.Items {
			if e.Regarding.Kind == "NodeClaim" && e.Regarding.Name == nc.Name && e.Reason == "NodeClassNotReady" {
				warned = fmt.Sprintf("%s: %s", e.Type, e.Note)
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("no NodeClassNotReady event on NodeClaim %s", nc.Name)
	}
	t.Logf("NodeClaim %s deleted: %s", nc.Name, warned)
}
