package solver

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/scheduling"
)

// Upstream's "MinValues" cases (a NodeClaim keeps at least minValues distinct values of a key
// among its instance types, so the cloud provider has that much choice), volume topology, and
// which DaemonSets count on a NodePool's nodes.

func withMinValues(key string, op corev1.NodeSelectorOperator, n int, values ...string) karpv1.NodeSelectorRequirementWithMinValues {
	return karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: values, MinValues: ptr.To(n)}
}

// distinct counts the values of key among a NodeClaim's instance types.
func distinct(c *NodeClaim, key string) int {
	seen := map[string]bool{}
	for _, it := range c.InstanceTypes {
		if v, ok := it.Labels[key]; ok {
			seen[v] = true
		}
	}
	return len(seen)
}

// wideCatalog is 4 families (c, m, r, t) of sizes 1, 2, 4, 8 and 16 vCPU.
func wideCatalog() []*cloudprovider.InstanceType {
	var out []*cloudprovider.InstanceType
	for fi, family := range []string{"c6", "m6", "r6", "t3"} {
		for si, cpu := range []int{1, 2, 4, 8, 16} {
			mem := cpu * (2 << fi)
			price := 0.02 * float64(cpu) * (1 + 0.25*float64(fi))
			out = append(out, itype(fmt.Sprintf("%s.s%d", family, si), "amd64", cpu, mem, price))
		}
	}
	return out
}

func TestMinValuesCases(t *testing.T) {
	for name, tc := range map[string]struct {
		reqs    []karpv1.NodeSelectorRequirementWithMinValues
		pods    []*corev1.Pod
		check   map[string]int // key: at least this many distinct values on every NodeClaim
		because string
	}{
		"families: 3 of 4": {reqs: []karpv1.NodeSelectorRequirementWithMinValues{withMinValues(karpv1.LabelInstanceFamily, corev1.NodeSelectorOpExists, 3)},
			pods: pods("w", 2, "500m", "1Gi"), check: map[string]int{karpv1.LabelInstanceFamily: 3}},
		"types: 10": {reqs: []karpv1.NodeSelectorRequirementWithMinValues{withMinValues(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpExists, 10)},
			pods: pods("w", 3, "500m", "1Gi"), check: map[string]int{corev1.LabelInstanceTypeStable: 10}},
		"families In two with minValues 2": {reqs: []karpv1.NodeSelectorRequirementWithMinValues{withMinValues(karpv1.LabelInstanceFamily, corev1.NodeSelectorOpIn, 2, "c6", "m6")},
			pods: pods("w", 1, "1", "1Gi"), check: map[string]int{karpv1.LabelInstanceFamily: 2}},
		"families In two with minValues 3 cannot be met": {reqs: []karpv1.NodeSelectorRequirementWithMinValues{withMinValues(karpv1.LabelInstanceFamily, corev1.NodeSelectorOpIn, 3, "c6", "m6")},
			pods: pods("w", 1, "1", "1Gi"), because: "minValues 3 on karpenter.k8s.aws/instance-family"},
		"two keys each with minValues": {reqs: []karpv1.NodeSelectorRequirementWithMinValues{
			withMinValues(karpv1.LabelInstanceFamily, corev1.NodeSelectorOpExists, 2), withMinValues(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpExists, 5)},
			pods: pods("w", 2, "1", "2Gi"), check: map[string]int{karpv1.LabelInstanceFamily: 2, corev1.LabelInstanceTypeStable: 5}},
		"a large pod leaves too few families": {reqs: []karpv1.NodeSelectorRequirementWithMinValues{withMinValues(karpv1.LabelInstanceFamily, corev1.NodeSelectorOpExists, 4)},
			pods: []*corev1.Pod{pod("big", "10", "100Gi")}, because: "minValues 4"},
		"minValues on cpu with Gt": {reqs: []karpv1.NodeSelectorRequirementWithMinValues{withMinValues(karpv1.LabelInstanceCPU, corev1.NodeSelectorOpGt, 2, "1")},
			pods: pods("w", 1, "500m", "512Mi"), check: map[string]int{karpv1.LabelInstanceCPU: 2}},
		"many pods: every NodeClaim keeps the choice": {reqs: []karpv1.NodeSelectorRequirementWithMinValues{withMinValues(karpv1.LabelInstanceFamily, corev1.NodeSelectorOpExists, 3)},
			pods: pods("w", 40, "1", "2Gi"), check: map[string]int{karpv1.LabelInstanceFamily: 3}},
	} {
		t.Run(name, func(t *testing.T) {
			np := &NodePool{NodePool: nodePool("default", withRequirements(tc.reqs...)), InstanceTypes: wideCatalog()}
			r := solve(t, &Input{Pods: tc.pods, NodePools: []*NodePool{np}})
			if tc.because != "" {
				expectUnschedulable(t, r, tc.because)
				return
			}
			expectPlaced(t, r)
			for _, c := range r.NodeClaims {
				for key, n := range tc.check {
					if got := distinct(c, key); got < n {
						t.Fatalf("a NodeClaim of %d pods offers %d values of %s, want at least %d", len(c.Pods), got, key, n)
					}
				}
				// The minValues stand on the NodeClaim's requirements, for the provider.
				for _, req := range tc.reqs {
					if got := c.Requirements[req.Key].MinValues; got == nil || *got != *req.MinValues {
						t.Fatalf("%s minValues %v on the NodeClaim, want %d", req.Key, got, *req.MinValues)
					}
				}
			}
		})
	}
}

// Keeping minValues may cost more than the cheapest type alone: the NodeClaim is still priced
// at its cheapest type, and its list is cut at MaxInstanceTypes no lower than minValues.
func TestMinValuesKeepTheCheapestFirst(t *testing.T) {
	np := &NodePool{NodePool: nodePool("default", withRequirements(withMinValues(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpExists, 8))), InstanceTypes: wideCatalog()}
	r := solve(t, &Input{Pods: pods("w", 1, "500m", "512Mi"), NodePools: []*NodePool{np}})
	expectPlaced(t, r)
	c := r.NodeClaims[0]
	if c.InstanceType.Name != "c6.s0" {
		t.Fatalf("priced at %s, want the cheapest c6.s0", c.InstanceType.Name)
	}
	if len(c.InstanceTypes) < 8 || c.InstanceTypes[0].Name != "c6.s0" {
		t.Fatalf("%d types, first %s", len(c.InstanceTypes), c.InstanceTypes[0].Name)
	}
}

// Volume topology: a pod's bound volumes require zones of their own, which add to its node
// selector and affinity.
func TestVolumeTopology(t *testing.T) {
	zoneReq := func(zones ...string) []corev1.NodeSelectorRequirement {
		return []corev1.NodeSelectorRequirement{{Key: karpv1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: zones}}
	}
	for name, tc := range map[string]struct {
		volume  []corev1.NodeSelectorRequirement
		pod     []func(*corev1.Pod)
		np      []func(*karpv1.NodePool)
		zone    string
		because string
	}{
		"the volume's zone":                         {volume: zoneReq("z-c"), zone: "z-c"},
		"the volume's zone and a matching selector": {volume: zoneReq("z-c"), pod: []func(*corev1.Pod){selector(karpv1.LabelTopologyZone, "z-c")}, zone: "z-c"},
		"the volume's zone against the pod's":       {volume: zoneReq("z-c"), pod: []func(*corev1.Pod){selector(karpv1.LabelTopologyZone, "z-a")}, because: "topology.kubernetes.io/zone"},
		"the volume's zone outside the pool":        {volume: zoneReq("z-c"), np: []func(*karpv1.NodePool){withRequirements(requirement(karpv1.LabelTopologyZone, corev1.NodeSelectorOpIn, "z-a", "z-b"))}, because: "topology.kubernetes.io/zone"},
		"a volume reachable from two zones":         {volume: zoneReq("z-b", "z-c"), pod: []func(*corev1.Pod){requireAll(expr(karpv1.LabelTopologyZone, corev1.NodeSelectorOpNotIn, "z-b"))}, zone: "z-c"},
		"a volume on a labelled rack the pool sets": {volume: []corev1.NodeSelectorRequirement{{Key: "example.com/rack", Operator: corev1.NodeSelectorOpIn, Values: []string{"r1"}}},
			np: []func(*karpv1.NodePool){withLabels("example.com/rack", "r1")}, zone: ""},
	} {
		t.Run(name, func(t *testing.T) {
			p := pod("pg-0", "1", "1Gi", tc.pod...)
			r := solve(t, &Input{Pods: []*corev1.Pod{p}, NodePools: pools(nodePool("default", tc.np...)), VolumeRequirements: map[string][]corev1.NodeSelectorRequirement{PodKey(p): tc.volume}})
			if tc.because != "" {
				expectUnschedulable(t, r, tc.because)
				return
			}
			expectPlaced(t, r)
			if tc.zone != "" && r.NodeClaims[0].Offering.Zone != tc.zone {
				t.Fatalf("zone %s, want %s", r.NodeClaims[0].Offering.Zone, tc.zone)
			}
		})
	}
	t.Run("pods of volumes in different zones do not share", func(t *testing.T) {
		a, b := pod("pg-0", "500m", "512Mi"), pod("pg-1", "500m", "512Mi")
		r := solve(t, &Input{Pods: []*corev1.Pod{a, b}, NodePools: pools(nodePool("default")),
			VolumeRequirements: map[string][]corev1.NodeSelectorRequirement{PodKey(a): zoneReq("z-a"), PodKey(b): zoneReq("z-b")}})
		expectPlaced(t, r)
		if len(r.NodeClaims) != 2 {
			t.Fatalf("%d NodeClaims, want one per volume zone", len(r.NodeClaims))
		}
	})
	t.Run("an existing node in the volume's zone takes the pod", func(t *testing.T) {
		p := pod("pg-0", "500m", "512Mi")
		r := solve(t, &Input{Pods: []*corev1.Pod{p}, NodePools: pools(nodePool("default")),
			Nodes:              []*scheduling.Node{node("in-a", "z-a", "4", "8Gi"), node("in-b", "z-b", "4", "8Gi")},
			VolumeRequirements: map[string][]corev1.NodeSelectorRequirement{PodKey(p): zoneReq("z-b")}})
		if len(r.Existing["in-b"]) != 1 {
			t.Fatalf("want the pod on in-b, got %v and %d NodeClaims", r.Existing, len(r.NodeClaims))
		}
	})
}

// Every reason a pod cannot be placed names what to change.
func TestUnschedulableReasons(t *testing.T) {
	for name, tc := range map[string]struct {
		np   *NodePool
		pod  *corev1.Pod
		want []string
	}{
		"too large":     {pod: pod("p", "100", "1Gi"), want: []string{"nodepool default", "no instance type fits", "cpu=100"}},
		"a taint":       {np: &NodePool{NodePool: nodePool("default", tainted("dedicated", "db", corev1.TaintEffectNoSchedule))}, pod: pod("p", "1", "1Gi"), want: []string{"taint dedicated=db:NoSchedule not tolerated"}},
		"a requirement": {pod: pod("p", "1", "1Gi", selector("team", "x")), want: []string{"incompatible requirements", "team"}},
		"a limit":       {np: &NodePool{NodePool: nodePool("default", limited("cpu", "1"))}, pod: pod("p", "1500m", "1Gi"), want: []string{"limit cpu would be exceeded"}},
		"an extended one": {pod: pod("p", "1", "1Gi", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests["example.com/fpga"] = resource.MustParse("1")
		}), want: []string{"example.com/fpga"}},
	} {
		t.Run(name, func(t *testing.T) {
			np := tc.np
			if np == nil {
				np = &NodePool{NodePool: nodePool("default")}
			}
			r := solve(t, &Input{Pods: []*corev1.Pod{tc.pod}, NodePools: []*NodePool{np}})
			if len(r.Unschedulable) != 1 {
				t.Fatalf("want the pod pending, got %d NodeClaims", len(r.NodeClaims))
			}
			for _, w := range tc.want {
				if !strings.Contains(r.Unschedulable[0].Reason, w) {
					t.Errorf("reason %q does not say %q", r.Unschedulable[0].Reason, w)
				}
			}
		})
	}
}
