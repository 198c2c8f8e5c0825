package methods

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

// Apply, the cluster after a command (karpenterctl simulate --disrupt plays passes on it):
// candidates gone, pods where the command moved them, replacements nodes with their type's
// labels and allocatable, pool sizes kept, candidates of later passes.

func TestApplyAReplacement(t *testing.T) {
	w := world{nodes: nodesOf(1, "m5.2xlarge", "on-demand"), pods: []*corev1.Pod{pod("w", "a", "1", "2Gi")}}
	c := w.cluster()
	cmds := commands(t, &SingleNode{}, c)
	if len(cmds) != 1 || len(cmds[0].Replacements) != 1 {
		t.Fatalf("commands %v, want one replacement", commandNames(cmds))
	}
	r := cmds[0].Replacements[0]
	next := c.Apply(cmds[0])
	if len(next.Nodes) != 1 || next.Nodes[0].Name != r.Hostname {
		t.Fatalf("nodes after: %d, want only the replacement %s", len(next.Nodes), r.Hostname)
	}
	n := next.Nodes[0]
	for key, want := range map[string]string{
		corev1.LabelInstanceTypeStable: r.InstanceType.Name, karpv1.CapacityTypeLabelKey: r.Offering.CapacityType,
		corev1.LabelTopologyZone: r.Offering.Zone, karpv1.NodePoolLabelKey: "default", corev1.LabelHostname: r.Hostname,
	} {
		if n.Labels[key] != want {
			t.Errorf("label %s=%q, want %q", key, n.Labels[key], want)
		}
	}
	if n.PricePerHour != r.Offering.Price {
		t.Errorf("price %v, want the offering's %v", n.PricePerHour, r.Offering.Price)
	}
	if len(n.Pods) != 1 || n.Pods[0].Spec.NodeName != r.Hostname {
		t.Fatalf("the replacement carries %d pods (node name %q)", len(n.Pods), n.Pods[0].Spec.NodeName)
	}
	if next.PoolSizes["default"] != c.PoolSizes["default"] {
		t.Errorf("pool size %d after replacing one node with one, was %d", next.PoolSizes["default"], c.PoolSizes["default"])
	}
	if len(next.Candidates) != 1 || next.Candidates[0].Name() != r.Hostname || next.Candidates[0].InstanceType != r.InstanceType {
		t.Fatalf("candidates after: %+v", next.Candidates)
	}
}

func TestApplyADelete(t *testing.T) {
	w := world{pools: pool(onDemandOnly), nodes: nodesOf(3, "m5.xlarge", "on-demand"),
		pods: []*corev1.Pod{pod("w1", "a", "1", "2Gi"), pod("w2", "b", "1", "2Gi"), pod("w3", "c", "1", "2Gi", podAnnotated(karpv1.DoNotDisruptAnnotationKey, "true"))}}
	c := w.cluster()
	cmds := commands(t, &MultiNode{}, c)
	if len(cmds) != 1 || cmds[0].Decision != DecisionDelete {
		t.Fatalf("commands %v, want a delete", commandNames(cmds))
	}
	next := c.Apply(cmds[0])
	if got, want := next.PoolSizes["default"], c.PoolSizes["default"]-len(cmds[0].Candidates); got != want {
		t.Errorf("pool size %d, want %d", got, want)
	}
	gone := map[string]bool{}
	for _, cand := range cmds[0].Candidates {
		gone[cand.Name()] = true
	}
	for _, n := range next.Nodes {
		if gone[n.Name] {
			t.Errorf("%s still a node", n.Name)
		}
	}
	// The moved pods are copies on their new node; the originals keep theirs.
	for _, mv := range cmds[0].Moves {
		if mv.Pod.Spec.NodeName == mv.To {
			t.Errorf("pod %s changed in place", mv.Pod.Name)
		}
	}
	// What was unconsolidatable on the gone nodes is no longer reported.
	for _, u := range next.Unconsolidatable {
		if gone[u.Node] {
			t.Errorf("a note on %s, which is gone", u.Node)
		}
	}
}

// A pass on the cluster after a command sees it: the replacement is a candidate too, and the
// budgets count the pool as it is then.
func TestPassAfterApply(t *testing.T) {
	w := world{pools: pool(onDemandOnly, withBudgets(budget("1"))), nodes: nodesOf(3, "m5.2xlarge", "on-demand"),
		pods: []*corev1.Pod{pod("w1", "a", "1", "2Gi"), pod("w2", "b", "1", "2Gi"), pod("w3", "c", "1", "2Gi")}}
	c := w.cluster()
	var done []string
	for range 6 {
		cmds, _, err := Pass(context.Background(), c, Methods())
		if err != nil {
			t.Fatal(err)
		}
		if len(cmds) == 0 {
			break
		}
		if len(cmds) != 1 || len(cmds[0].Candidates) > 1 {
			t.Fatalf("a budget of one: %v", commandNames(cmds))
		}
		done = append(done, commandNames(cmds)...)
		c = c.Apply(cmds[0])
	}
	if len(done) < 2 {
		t.Fatalf("commands %v: three over-sized nodes need at least two steps at one a pass", done)
	}
	var price float64
	for _, n := range c.Nodes {
		price += n.PricePerHour
	}
	// Three 1-cpu pods fit one 4-cpu node at $0.20, or c5.large ones at $0.10 each.
	if price > 0.31 {
		t.Fatalf("$%.2f an hour after %v", price, done)
	}
}

// Drift reasons as the NodeClaim's Drifted condition gives them, and the template's.
func TestDriftReasons(t *testing.T) {
	withDrift := func(reason string) func(*karpv1.NodeClaim) {
		return func(nc *karpv1.NodeClaim) {
			nc.Status.Conditions = append(nc.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeDrifted, Status: metav1.ConditionTrue,
				Reason: reason, LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))})
		}
	}
	for _, reason := range []string{"NodeClassDrift", "AMIDrift", "SubnetDrift", "InstanceTypeNotFound"} {
		t.Run(reason, func(t *testing.T) {
			c := world{nodes: nodesOf(1, "m5.large", "on-demand"), claims: claimsFor("a", withDrift(reason))}.cluster()
			if len(c.Candidates) != 1 || c.Candidates[0].DriftReason != reason || !c.Candidates[0].DriftedSince.Equal(now.Add(-time.Hour).Truncate(time.Second)) {
				t.Fatalf("candidate %+v", c.Candidates[0])
			}
		})
	}
	t.Run("a condition that is False is no drift", func(t *testing.T) {
		c := world{nodes: nodesOf(1, "m5.large", "on-demand"), claims: claimsFor("a", func(nc *karpv1.NodeClaim) {
			nc.Status.Conditions = append(nc.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeDrifted, Status: metav1.ConditionFalse})
		})}.cluster()
		if !c.Candidates[0].DriftedSince.IsZero() {
			t.Fatalf("drifted since %s", c.Candidates[0].DriftedSince)
		}
	})
	t.Run("a node of a type the catalog no longer has is no candidate for consolidation", func(t *testing.T) {
		c := world{nodes: []*corev1.Node{node("a", "x9.large", "on-demand", "z-a")}, pods: []*corev1.Pod{pod("w", "a", "1", "1Gi")}}.cluster()
		for _, cand := range c.Candidates {
			if cand.InstanceType != nil {
				t.Fatalf("candidate %s with a type the catalog does not have", cand.Name())
			}
		}
		if cmds := commands(t, &SingleNode{}, c); len(cmds) != 0 {
			t.Fatalf("commands %v on a node that cannot be priced", commandNames(cmds))
		}
	})
}
