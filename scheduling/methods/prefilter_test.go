package methods

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
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

// A cheaper type in a NodePool that could host none of the candidate's pods (a taint they do
// not tolerate, a nodepool they do not select) does not make the candidate worth simulating;
// one that could host them does.
func TestCheaperTypesOfPoolsThePodsCannotUseDoNotCount(t *testing.T) {
	onDemand := func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
			{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.CapacityTypeOnDemand}},
			{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large"}}}
	}
	tainted := func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "team", Value: "batch", Effect: corev1.TaintEffectNoSchedule}}
	}
	tolerates := func(p *corev1.Pod) {
		p.Spec.Tolerations = []corev1.Toleration{{Key: "team", Operator: corev1.TolerationOpEqual, Value: "batch", Effect: corev1.TaintEffectNoSchedule}}
	}
	selects := func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{karpv1.NodePoolLabelKey: "default"} }
	for _, tc := range []struct {
		name     string
		cheap    *karpv1.NodePool
		podMut   func(*corev1.Pod)
		hopeless bool
	}{
		{"a tainted pool the pods do not tolerate", nodePool("cheap", tainted), func(*corev1.Pod) {}, true},
		{"a tainted pool the pods tolerate", nodePool("cheap", tainted), tolerates, false},
		{"a pool the pods do not select", nodePool("cheap"), selects, true},
		{"a pool the pods may use", nodePool("cheap"), func(*corev1.Pod) {}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Full on-demand m5.large nodes of pool default; pool cheap has Spot m5.large.
			w := world{pools: []*karpv1.NodePool{nodePool("default", onDemand), tc.cheap},
				nodes: []*corev1.Node{node("a", "m5.large", "on-demand", "z-a"), node("b", "m5.large", "on-demand", "z-a")},
				pods:  []*corev1.Pod{pod("pa", "a", "1500m", "1Gi", tc.podMut), pod("pb", "b", "1500m", "1Gi", tc.podMut)}}
			c := w.cluster()
			for _, cand := range c.Candidates {
				if hopeless, why := c.hopeless(cand); hopeless != tc.hopeless {
					t.Errorf("%s: hopeless = %v (%s), want %v", cand.Name(), hopeless, why, tc.hopeless)
				}
			}
			// What the simulation decides agrees: only a pool the pods can use replaces them.
			cmds := commands(t, &SingleNode{}, c)
			if tc.hopeless && len(cmds) != 0 || !tc.hopeless && len(cmds) == 0 {
				t.Errorf("commands %v, want some = %v", commandNames(cmds), !tc.hopeless)
			}
		})
	}
}

func TestInstanceTypeNotFound(t *testing.T) {
	its := []*cloudprovider.InstanceType{{Name: "m5.large"}, {Name: "c6g.xlarge"}}
	for _, tc := range []struct {
		labels map[string]string
		gone   bool
	}{
		{map[string]string{karpv1.LabelInstanceType: "m5.large"}, false},
		{map[string]string{karpv1.LabelInstanceType: "m4.large"}, true},
		{map[string]string{}, false}, // a node not launched by Karpenter
	} {
		if got := InstanceTypeNotFound(tc.labels, its); got != tc.gone {
			t.Errorf("%v: InstanceTypeNotFound %v, want %v", tc.labels, got, tc.gone)
		}
	}
}
