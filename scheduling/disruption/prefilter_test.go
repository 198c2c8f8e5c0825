package disruption

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// Single-node consolidation skips, without simulating, a candidate whose largest pod fits in
// no other node's room and whose pods no cheaper instance type holds; one it could delete or
// replace is simulated as before.
func TestHopelessCandidatesAreSkippedWithoutSimulating(t *testing.T) {
	// Two full Spot m5.large nodes (2 vCPU each): each pod of 1500m fits on no other node, and
	// without SpotToSpotConsolidation only on-demand may replace them, none of it cheaper.
	full := world{nodes: []*corev1.Node{node("a", "m5.large", "spot", "z-a"), node("b", "m5.large", "spot", "z-a")},
		pods: []*corev1.Pod{pod("pa", "a", "1500m", "1Gi"), pod("pb", "b", "1500m", "1Gi")}}
	c := full.cluster()
	for _, cand := range c.Candidates {
		hopeless, why := c.hopeless(cand)
		if !hopeless || !strings.Contains(why, "fit neither") {
			t.Errorf("%s: hopeless = %v (%q), want it skipped", cand.Name(), hopeless, why)
		}
	}
	if cmds := commands(t, &SingleNode{}, c); len(cmds) != 0 {
		t.Errorf("nothing to consolidate, got %v", commandNames(cmds))
	}
	// With room on a third node, the pod of a fits there: a is not hopeless, and goes.
	room := world{nodes: append(full.nodes, node("c", "m5.xlarge", "on-demand", "z-a")),
		pods: append(full.pods, pod("pc", "c", "500m", "1Gi"))}
	c = room.cluster()
	for _, cand := range c.Candidates {
		if hopeless, why := c.hopeless(cand); hopeless {
			t.Errorf("%s is skipped (%s), though a node has room for its pods", cand.Name(), why)
		}
	}
	if cmds := commands(t, &SingleNode{}, c); len(cmds) != 1 {
		t.Errorf("one node can go, got %v", commandNames(cmds))
	}
	// A node too big for its pods: a cheaper type holds them, so it is simulated (replaced).
	big := world{nodes: []*corev1.Node{node("a", "m5.4xlarge", "spot", "z-a"), node("b", "m5.large", "spot", "z-a")},
		pods: []*corev1.Pod{pod("pa", "a", "1500m", "1Gi"), pod("pb", "b", "1500m", "1Gi")}}
	c = big.cluster()
	for _, cand := range c.Candidates {
		if cand.Name() == "a" {
			if hopeless, why := c.hopeless(cand); hopeless {
				t.Errorf("a is skipped (%s), though a cheaper type holds its pod", why)
			}
		}
	}
}

// Multi-node consolidation's binary search skips, without simulating, a prefix whose pods
// neither fit the room other nodes have for them nor, the rest, one node cheaper than the
// prefix: full Spot nodes whose pods only on-demand could take.
func TestHopelessPrefixesAreSkippedWithoutSimulating(t *testing.T) {
	full := world{nodes: []*corev1.Node{node("a", "m5.large", "spot", "z-a"), node("b", "m5.large", "spot", "z-a"), node("c", "m5.large", "spot", "z-a")},
		pods: []*corev1.Pod{pod("pa", "a", "1500m", "1Gi"), pod("pb", "b", "1500m", "1Gi"), pod("pc", "c", "1500m", "1Gi")}}
	c := full.cluster()
	if !c.prefixHopeless(c.Candidates[:2]) {
		t.Error("two full Spot nodes cannot be merged into one cheaper node")
	}
	if cmds := commands(t, &MultiNode{}, c); len(cmds) != 0 {
		t.Errorf("nothing to consolidate, got %v", commandNames(cmds))
	}
	// Half-full nodes: two of them fit one node of the same size, cheaper than both.
	half := world{nodes: full.nodes, pods: []*corev1.Pod{pod("pa", "a", "500m", "1Gi"), pod("pb", "b", "500m", "1Gi"), pod("pc", "c", "500m", "1Gi")}}
	c = half.cluster()
	if c.prefixHopeless(c.Candidates[:2]) {
		t.Error("two half-full nodes' pods fit the others: the prefix is worth simulating")
	}
}
