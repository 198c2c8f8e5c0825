package e2e

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	kwokv1alpha1 "github.com/karpenter-policy/karpenter/api/kwok/v1alpha1"
)

// rebootWatch samples a NodePool every half second: the NodeClaims it ever had, and every
// boot ID its nodes showed.
type rebootWatch struct {
	claims, boots sets.Set[string]
	maxClaims     int
}

func (w *rebootWatch) sample(ctx context.Context, pool string) {
	var claims karpv1.NodeClaimList
	if kube.List(ctx, &claims, client.MatchingLabels{karpv1.NodePoolLabelKey: pool}) == nil {
		live := 0
		for _, nc := range claims.Items {
			w.claims.Insert(nc.Name)
			if nc.DeletionTimestamp == nil {
				live++
			}
		}
		w.maxClaims = max(w.maxClaims, live)
	}
	var nodes corev1.NodeList
	if kube.List(ctx, &nodes, client.MatchingLabels{karpv1.NodePoolLabelKey: pool}) == nil {
		for _, n := range nodes.Items {
			if id := n.Status.NodeInfo.BootID; id != "" {
				w.boots.Insert(n.Name + "/" + id)
			}
		}
	}
}

func rebootingCondition(ctx context.Context, name string) *metav1.Condition {
	nc := &karpv1.NodeClaim{}
	if kube.Get(ctx, client.ObjectKey{Name: name}, nc) != nil {
		return nil
	}
	return meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeRebooting)
}

// Node repair reboots in place where its policy says Reboot (a KWOKNodeClass repairPolicies
// entry; kwok simulates the reboot with a new boot ID): the same NodeClaim and Node come back
// with a new boot, without the fence, initialized again, the pod running, and no other
// NodeClaim launched meanwhile. A fault that a reboot does not clear is rebooted again, and
// after two reboots the node is replaced.
func TestNodeRepairReboot(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	np := isolated(t, ctx, func(nc *kwokv1alpha1.KWOKNodeClass) {
		nc.Spec.RepairPolicies = []kwokv1alpha1.RepairPolicy{{ConditionType: "ExampleUnhealthy", ConditionStatus: "True",
			Toleration: metav1.Duration{Duration: 5 * time.Second}, Action: "Reboot", RebootDrain: &metav1.Duration{Duration: 20 * time.Second}}}
	}, func(np *karpv1.NodePool) {
		np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("Never")
	})
	create(t, ctx, deployment("reboot", 1, np.Name, "500m", nil))
	pod := runningPods(t, ctx, "reboot", 1)[0]
	node := nodeOf(t, ctx, pod)
	claim := claimsOf(t, ctx, node.Name)[0].Name
	w := &rebootWatch{claims: sets.New[string](), boots: sets.New[string]()}
	w.sample(ctx, np.Name)
	poll := func(what string, limit time.Duration, done func(ctx context.Context) bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, limit, true, func(ctx context.Context) (bool, error) {
			w.sample(ctx, np.Name)
			return done(ctx), nil
		}); err != nil {
			t.Fatalf("%s: %v\n%s", what, err, local.LogTail("karpenter", 40))
		}
	}

	// A fault the reboot clears: the reboot is committed, the fault cleared, the node back.
	setCondition(t, ctx, node.Name, true)
	poll("no reboot committed", time.Minute, func(ctx context.Context) bool {
		c := rebootingCondition(ctx, claim)
		return c != nil && c.Status == metav1.ConditionTrue
	})
	setCondition(t, ctx, node.Name, false)
	poll("the reboot did not succeed", 2*time.Minute, func(ctx context.Context) bool {
		c := rebootingCondition(ctx, claim)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == karpv1.RebootReasonSucceeded
	})
	poll("the node did not come back initialized and unfenced", time.Minute, func(ctx context.Context) bool {
		n := &corev1.Node{}
		if kube.Get(ctx, client.ObjectKey{Name: node.Name}, n) != nil {
			return false
		}
		return n.Status.NodeInfo.BootID != node.Status.NodeInfo.BootID && n.Labels[karpv1.NodeInitializedLabelKey] == "true" && !hasTaintKey(n, karpv1.RebootingTaintKey)
	})
	if p := runningPods(t, ctx, "reboot", 1)[0]; p.Spec.NodeName != node.Name {
		t.Errorf("the pod runs on %s, not on the rebooted node %s", p.Spec.NodeName, node.Name)
	}
	if w.maxClaims != 1 || w.claims.Len() != 1 {
		t.Fatalf("a reboot launched capacity: NodeClaims %v (at most %d at once)", sets.List(w.claims), w.maxClaims)
	}
	if got := w.boots.Len(); got != 2 {
		t.Fatalf("boots seen %v, want the first and one reboot", sets.List(w.boots))
	}

	// A fault that stays: one more reboot (two within the day), then a replacement.
	setCondition(t, ctx, node.Name, true)
	poll("the node was not replaced", 4*time.Minute, func(ctx context.Context) bool {
		return !poolNodes(t, ctx, np.Name).Has(node.Name)
	})
	runningPods(t, ctx, "reboot", 1)
	var bootsOfNode int
	for _, b := range sets.List(w.boots) {
		if len(b) > len(node.Name) && b[:len(node.Name)+1] == node.Name+"/" {
			bootsOfNode++
		}
	}
	if bootsOfNode != 3 {
		t.Fatalf("boots of %s %v: want the first and two reboots before the replacement", node.Name, sets.List(w.boots))
	}
}

func hasTaintKey(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}
