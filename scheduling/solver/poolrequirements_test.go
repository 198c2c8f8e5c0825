package solver

import (
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/scheduling"
)

// A NodePool's requirements with every operator bound the types its NodeClaims may be, for
// every pod: each type a NodeClaim offers meets them all.
func TestNodePoolRequirementOperators(t *testing.T) {
	cpuOf := func(it *cloudprovider.InstanceType) int {
		n, _ := strconv.Atoi(it.Labels[karpv1.LabelInstanceCPU])
		return n
	}
	for name, tc := range map[string]struct {
		reqs  []karpv1.NodeSelectorRequirementWithMinValues
		pod   *corev1.Pod
		check func(*cloudprovider.InstanceType) bool
		none  bool
	}{
		"In families": {reqs: []karpv1.NodeSelectorRequirementWithMinValues{requirement(karpv1.LabelInstanceFamily, corev1.NodeSelectorOpIn, "m5", "r5")},
			check: func(it *cloudprovider.InstanceType) bool {
				f := it.Labels[karpv1.LabelInstanceFamily]
				return f == "m5" || f == "r5"
			}},
		"NotIn families": {reqs: []karpv1.NodeSelectorRequirementWithMinValues{requirement(karpv1.LabelInstanceFamily, corev1.NodeSelectorOpNotIn, "m6g", "c5")},
			check: func(it *cloudprovider.InstanceType) bool {
				f := it.Labels[karpv1.LabelInstanceFamily]
				return f != "m6g" && f != "c5"
			}},
		"Gt cpu": {reqs: []karpv1.NodeSelectorRequirementWithMinValues{requirement(karpv1.LabelInstanceCPU, corev1.NodeSelectorOpGt, "2")},
			check: func(it *cloudprovider.InstanceType) bool { return cpuOf(it) > 2 }},
		"Lt cpu": {reqs: []karpv1.NodeSelectorRequirementWithMinValues{requirement(karpv1.LabelInstanceCPU, corev1.NodeSelectorOpLt, "4")},
			check: func(it *cloudprovider.InstanceType) bool { return cpuOf(it) < 4 }},
		"Gt and Lt": {reqs: []karpv1.NodeSelectorRequirementWithMinValues{requirement(karpv1.LabelInstanceCPU, corev1.NodeSelectorOpGt, "2"), requirement(karpv1.LabelInstanceCPU, corev1.NodeSelectorOpLt, "16")},
			check: func(it *cloudprovider.InstanceType) bool { return cpuOf(it) > 2 && cpuOf(it) < 16 }},
		"Exists on a well-known label every type has": {reqs: []karpv1.NodeSelectorRequirementWithMinValues{requirement(karpv1.LabelInstanceFamily, corev1.NodeSelectorOpExists)},
			check: func(*cloudprovider.InstanceType) bool { return true }},
		"DoesNotExist on the GPU resource label": {reqs: []karpv1.NodeSelectorRequirementWithMinValues{requirement("example.com/gpu-type", corev1.NodeSelectorOpDoesNotExist)},
			check: func(*cloudprovider.InstanceType) bool { return true }},
		"In an arch": {reqs: []karpv1.NodeSelectorRequirementWithMinValues{requirement(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "arm64")},
			check: func(it *cloudprovider.InstanceType) bool { return it.Labels[corev1.LabelArchStable] == "arm64" }},
		"requirements that leave no type": {reqs: []karpv1.NodeSelectorRequirementWithMinValues{requirement(karpv1.LabelInstanceFamily, corev1.NodeSelectorOpIn, "m5"),
			requirement(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "arm64")}, none: true},
		"a zone In": {reqs: []karpv1.NodeSelectorRequirementWithMinValues{requirement(karpv1.LabelTopologyZone, corev1.NodeSelectorOpIn, "z-b")},
			check: func(*cloudprovider.InstanceType) bool { return true }},
	} {
		t.Run(name, func(t *testing.T) {
			p := tc.pod
			if p == nil {
				p = pod("w", "500m", "512Mi")
			}
			r := solve(t, &Input{Pods: []*corev1.Pod{p}, NodePools: pools(nodePool("default", withRequirements(tc.reqs...)))})
			if tc.none {
				expectUnschedulable(t, r, "no instance type")
				return
			}
			expectPlaced(t, r)
			c := r.NodeClaims[0]
			for _, it := range c.InstanceTypes {
				if !tc.check(it) {
					t.Errorf("%s offered against the NodePool's requirements", it.Name)
				}
			}
			if z, ok := c.Requirements[karpv1.LabelTopologyZone]; name == "a zone In" && (!ok || !z.Has("z-b") || z.Has("z-a")) {
				t.Errorf("zone requirement %s, want In [z-b]", reqString(c.Requirements, karpv1.LabelTopologyZone))
			}
			// The NodeClaim's requirements keep the NodePool's, for the provider and for drift.
			for _, req := range tc.reqs {
				if _, ok := c.Requirements[req.Key]; !ok {
					t.Errorf("the NodeClaim dropped the requirement on %s", req.Key)
				}
			}
		})
	}
}

// Template labels become NodeClaim requirements, and a NodePool requirement and a template
// label on the same key must agree.
func TestTemplateLabelsAsRequirements(t *testing.T) {
	np := nodePool("default", withLabels("team", "a", "tier", "gold"))
	r := solve(t, &Input{Pods: []*corev1.Pod{pod("w", "1", "1Gi")}, NodePools: pools(np)})
	expectPlaced(t, r)
	for _, kv := range [][2]string{{"team", "a"}, {"tier", "gold"}} {
		if v, ok := r.NodeClaims[0].Requirements[kv[0]].Single(); !ok || v != kv[1] {
			t.Errorf("%s requirement %s, want In [%s]", kv[0], reqString(r.NodeClaims[0].Requirements, kv[0]), kv[1])
		}
	}
	// A pod selecting two of them and a third the pool requires.
	np = nodePool("default", withLabels("team", "a"), withRequirements(requirement("zone-group", corev1.NodeSelectorOpIn, "east")))
	r = solve(t, &Input{Pods: []*corev1.Pod{pod("w", "1", "1Gi", selector("team", "a", "zone-group", "east"))}, NodePools: pools(np)})
	expectPlaced(t, r)
}

// Pods spread over a label whose domains exist only on existing nodes and in flight: an
// in-flight NodeClaim counts as the domain it will be in.
func TestInFlightDomainsCount(t *testing.T) {
	inflight := node("inflight", "z-a", "1", "1Gi", func(n *scheduling.Node) {
		n.InFlight = true
		n.Pods = []*corev1.Pod{pod("web-0", "900m", "900Mi", labelled("web"))}
	})
	s := spreadSpec{key: karpv1.LabelTopologyZone, skew: 1}
	r := solve(t, &Input{Pods: pods("web", 2, "500m", "512Mi", labelled("web"), s.apply), NodePools: pools(nodePool("default")), Nodes: []*scheduling.Node{inflight}})
	expectPlaced(t, r)
	for _, c := range r.NodeClaims {
		if z := label(c, karpv1.LabelTopologyZone); z == "z-a" {
			t.Fatalf("a new web pod in z-a, where the in-flight NodeClaim already has one")
		}
	}
}

// An existing node without a zone label is in no zone: a zone spread does not count it, and a
// pod that needs a zone does not land on it.
func TestNodesWithoutAZone(t *testing.T) {
	bare := node("bare", "", "8", "16Gi", func(n *scheduling.Node) { delete(n.Labels, karpv1.LabelTopologyZone) })
	r := solve(t, &Input{Pods: pods("w", 1, "500m", "512Mi", selector(karpv1.LabelTopologyZone, "z-a")), NodePools: pools(nodePool("default")), Nodes: []*scheduling.Node{bare}})
	expectPlaced(t, r)
	if len(r.Existing) != 0 {
		t.Fatal("a pod that needs z-a on a node without a zone")
	}
	r = solve(t, &Input{Pods: pods("w", 2, "500m", "512Mi"), NodePools: pools(nodePool("default")), Nodes: []*scheduling.Node{bare}})
	if len(r.Existing["bare"]) != 2 {
		t.Fatalf("pods without constraints use the node: %v", r.Existing)
	}
}
