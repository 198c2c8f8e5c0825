package chaos

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	kwokv1alpha1 "github.com/karpenter-policy/karpenter/api/kwok/v1alpha1"
)

// takeoverBound is the longest a standby may take to lead after the leader dies. client-go
// counts the Lease's duration from when the standby last saw it change, and the standby
// looks every retry period (2 s) stretched by a jitter of up to 120%, so up to 4.4 s: the
// last renewal seen up to 4.4 s late, the Lease's 15 s, the next try up to 4.4 s later.
const takeoverBound = leaseDuration + 2*retryWithJitter

// retryWithJitter is controller-runtime's leader election retry period with client-go's
// jitter at its most.
const retryWithJitter = 4400 * time.Millisecond

// SIGKILL of the leader in the middle of a scale-up: the standby takes over within the
// lease duration and finishes the scale-up from what the dead leader left (the NodeClaims
// in flight); no NodeClaim is launched twice for the same pods, and nothing leaks.
func TestLeaderFailoverDuringScaleUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// A launch delay keeps NodeClaims in flight when the leader dies. Consolidation waits,
	// so a NodeClaim launched twice is still there to be counted.
	np, _ := pool(t, ctx, func(c *kwokv1alpha1.KWOKNodeClass) { c.Spec.LaunchDelay = metav1Duration(5 * time.Second) },
		func(np *karpv1.NodePool) {
			np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("Never")
		})
	first := leader(t, ctx, time.Minute)
	create(t, ctx, deployment("default", "failover-up", 16, np.Name, "1"))
	var inFlight int
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		cs, err := claims(ctx, np.Name)
		inFlight = 0
		for _, nc := range cs {
			if !meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeLaunched) {
				inFlight++
			}
		}
		return err == nil && inFlight > 0, nil
	}); err != nil {
		t.Fatal("the leader created no NodeClaim")
	}
	killed, takeover := killLeader(t, ctx)
	if killed != first {
		t.Fatalf("the Lease moved from %s to %s before the kill", first, killed)
	}
	t.Logf("killed %s with %d NodeClaims in flight; the standby led %s later", killed, inFlight, takeover.Round(100*time.Millisecond))
	if takeover > takeoverBound {
		t.Errorf("the standby took %s to lead; the Lease runs out after %s, and the standby looks every %s at most", takeover.Round(100*time.Millisecond), leaseDuration, retryWithJitter)
	}
	waitRunning(t, ctx, "default", "failover-up", 16, 3*time.Minute)
	extra, err := unused(ctx, np.Name, "default", "failover-up")
	if err != nil {
		t.Fatal(err)
	}
	if len(extra) > 0 {
		t.Errorf("NodeClaims that run none of the pods (launched twice): %s", strings.Join(extra, ", "))
	}
	expectNoLeaks(t, ctx, np.Name)
}

// SIGKILL of the leader while a consolidation waits for its replacement: the new leader
// adopts the command from the objects (its replacement exists) or rolls it back; no node
// stays tainted karpenter.sh/disrupted, and the pool settles to what the pods need.
func TestLeaderFailoverDuringReplace(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	np, _ := pool(t, ctx, func(c *kwokv1alpha1.KWOKNodeClass) { c.Spec.LaunchDelay = metav1Duration(20 * time.Second) },
		func(np *karpv1.NodePool) {
			np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("0s")
		})
	anchor := deployment("default", "failover-anchor", 1, np.Name, "3")
	create(t, ctx, anchor)
	waitRunning(t, ctx, "default", "failover-anchor", 1, 2*time.Minute)
	cs, err := claims(ctx, np.Name)
	if err != nil || len(cs) != 1 {
		t.Fatalf("want the anchor's one NodeClaim, got %d (%v)", len(cs), err)
	}
	big := cs[0].Status.NodeName
	// The tenant joins the anchor's node; the anchor goes; consolidation replaces the node
	// sized for 3 CPUs by a cheaper one, and the replacement takes 20 s to launch.
	create(t, ctx, deployment("default", "failover-tenant", 1, np.Name, "100m"))
	waitRunning(t, ctx, "default", "failover-tenant", 1, 2*time.Minute)
	if err := kube.Delete(ctx, anchor); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		n := &corev1.Node{}
		if kube.Get(ctx, client.ObjectKey{Name: big}, n) != nil || !disrupted(n) {
			return false, nil
		}
		cs, err := claims(ctx, np.Name)
		for _, nc := range cs {
			if err == nil && nc.Status.NodeName != big && !meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeLaunched) {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("consolidation never started replacing %s: %v", big, err)
	}
	killed, takeover := killLeader(t, ctx)
	t.Logf("killed %s while %s waited for its replacement; the standby led %s later", killed, big, takeover.Round(100*time.Millisecond))
	if takeover > takeoverBound {
		t.Errorf("the standby took %s to lead; the Lease runs out after %s, and the standby looks every %s at most", takeover.Round(100*time.Millisecond), leaseDuration, retryWithJitter)
	}
	var state string
	if err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		cs, err := claims(ctx, np.Name)
		var nodes corev1.NodeList
		if err != nil || kube.List(ctx, &nodes, client.MatchingLabels{karpv1.NodePoolLabelKey: np.Name}) != nil {
			return false, nil
		}
		anyTainted := false
		for i := range nodes.Items {
			anyTainted = anyTainted || disrupted(&nodes.Items[i])
		}
		n, _ := running(ctx, "default", "failover-tenant")
		state = fmt.Sprintf("%d NodeClaims, %d nodes, tainted %v, %d tenant running", len(cs), len(nodes.Items), anyTainted, n)
		return len(cs) == 1 && len(nodes.Items) == 1 && !anyTainted && n == 1, nil
	}); err != nil {
		t.Fatalf("the pool never settled after the failover: %s: %v", state, err)
	}
	now := leader(t, ctx, time.Minute)
	log := local.LogTail(now, 2000)
	if !strings.Contains(log, "adopting a disruption command in flight") && !strings.Contains(log, "rolling back a disruption command") {
		t.Errorf("the new leader %s did not say it adopted or rolled back the command", now)
	}
	t.Logf("settled: %s", state)
	expectNoLeaks(t, ctx, np.Name)
}

func disrupted(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == karpv1.DisruptedTaintKey {
			return true
		}
	}
	return false
}

// expectNoLeaks checks, once the pool settles, that every NodeClaim of np has its Node and
// every Node of np its NodeClaim.
func expectNoLeaks(t *testing.T, ctx context.Context, np string) {
	t.Helper()
	var report string
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := leaks(ctx, np)
		report = l
		return err == nil && l == "", nil
	}); err != nil {
		t.Errorf("leaks after settling: %s", report)
	}
}

// leaks describes NodeClaims of np without a Node and Nodes of np without a NodeClaim;
// NodeClaims that are launching or going count as neither.
func leaks(ctx context.Context, np string) (string, error) {
	cs, err := claims(ctx, np)
	if err != nil {
		return "", err
	}
	var nodes corev1.NodeList
	if err := kube.List(ctx, &nodes, client.MatchingLabels{karpv1.NodePoolLabelKey: np}); err != nil {
		return "", err
	}
	byProvider := map[string]bool{}
	for _, n := range nodes.Items {
		byProvider[n.Spec.ProviderID] = true
	}
	owned := map[string]bool{}
	var out []string
	for _, nc := range cs {
		owned[nc.Status.ProviderID] = true
		if nc.DeletionTimestamp != nil || !meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeLaunched) {
			continue
		}
		if !byProvider[nc.Status.ProviderID] && time.Since(nc.CreationTimestamp.Time) > time.Minute {
			out = append(out, "NodeClaim "+nc.Name+" has no Node")
		}
	}
	for _, n := range nodes.Items {
		if !owned[n.Spec.ProviderID] && n.DeletionTimestamp == nil {
			out = append(out, "Node "+n.Name+" has no NodeClaim")
		}
	}
	return strings.Join(out, "; "), nil
}
