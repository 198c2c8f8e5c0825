package solver

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/cloudprovider/catalog"
	"github.com/karpenter-policy/karpenter/scheduling"
)

func TestPackable(t *testing.T) {
	selectedByWeb := func(p *corev1.Pod) { p.Labels = map[string]string{"app": "db"} }
	web := pod("web-0", "1", "1Gi", podAffinity(karpv1.LabelTopologyZone, map[string]string{"app": "db"}))
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"plain", pod("plain-0", "1", "1Gi"), true},
		{"node selector and one required term", pod("sel-0", "1", "1Gi", func(p *corev1.Pod) {
			p.Spec.NodeSelector = map[string]string{corev1.LabelArchStable: "arm64"}
		}, requireAffinity(karpv1.LabelTopologyZone, corev1.NodeSelectorOpIn, "z-a")), true},
		{"topology spread", pod("spread-0", "1", "1Gi", spreadOn(karpv1.LabelTopologyZone, 1)), false},
		{"own pod affinity", web, false},
		{"selected by another pod's affinity", pod("db-0", "1", "1Gi", selectedByWeb), false},
		{"own anti-affinity", pod("anti-0", "1", "1Gi", podAntiAffinity(corev1.LabelHostname)), false},
		{"host port", pod("port-0", "1", "1Gi", hostPort(8080)), false},
		{"preferred node affinity", pod("pref-0", "1", "1Gi", prefer(karpv1.LabelTopologyZone, "z-a")), false},
		{"two required terms", pod("terms-0", "1", "1Gi", func(p *corev1.Pod) {
			terms := []corev1.NodeSelectorTerm{
				{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: karpv1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"z-a"}}}},
				{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: karpv1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"z-b"}}}},
			}
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
		}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &solver{in: &Input{}, topo: newTopology()}
			for _, p := range []*corev1.Pod{web, tc.pod} {
				if err := s.topo.register(p); err != nil {
					t.Fatal(err)
				}
			}
			if got := s.packable(tc.pod); got != tc.want {
				t.Fatalf("packable = %v, want %v", got, tc.want)
			}
		})
	}
}

// shapes is a catalog of three families with one price per vCPU and per GiB, as EC2's c, m
// and r families nearly are: 2, 4 and 8 GiB per vCPU, sizes 2 to 64 vCPU.
func shapes() []*cloudprovider.InstanceType {
	var out []*cloudprovider.InstanceType
	for _, f := range []struct {
		family    string
		gibPerCPU int
	}{{"c7", 2}, {"m7", 4}, {"r7", 8}} {
		for _, cpu := range []int{2, 4, 8, 16, 32, 64} {
			mem := cpu * f.gibPerCPU
			out = append(out, itype(fmt.Sprintf("%s.%dx", f.family, cpu), "amd64", cpu, mem, 0.03*float64(cpu)+0.004*float64(mem)))
		}
	}
	return out
}

// TestPackingMixesShapes: half the pods need 1 GiB per vCPU and half 8; no family has either
// shape, but nodes that hold both kinds in the right proportion are full. First fit in size
// order came to 1.069 x the lower bound here.
func TestPackingMixesShapes(t *testing.T) {
	in := &Input{
		Pods:      append(pods("cpu", 200, "2", "2Gi"), pods("mem", 200, "1", "8Gi")...),
		NodePools: []*NodePool{{NodePool: nodePool("default"), InstanceTypes: shapes()}},
	}
	r := solve(t, in)
	expectPlaced(t, r)
	ratio := r.PricePerHour() / r.LowerBoundPerHour
	t.Logf("%d nodes, $%.2f/hour, bound $%.2f/hour, ratio %.3f", len(r.NodeClaims), r.PricePerHour(), r.LowerBoundPerHour, ratio)
	if ratio > 1.03 {
		t.Fatalf("cost %.2f is %.3f x the lower bound %.2f; want at most 1.03", r.PricePerHour(), ratio, r.LowerBoundPerHour)
	}
	for _, c := range r.NodeClaims {
		req, alloc := toRes(c.Requests), toRes(c.InstanceType.Allocatable())
		if ok, res := req.fitsIn(alloc); !ok {
			t.Fatalf("%s holds more %s than %s has", c.Hostname, res, c.InstanceType.Name)
		}
	}
}

// TestPackingSizesTheLastNodes: fifty 1-vCPU pods. The cheapest type per allocatable vCPU
// is a burstable 2-vCPU type that holds one such pod (1.9 allocatable), and the type that
// holds all fifty is three quarters full; the packer fills mid-sized types instead.
func TestPackingSizesTheLastNodes(t *testing.T) {
	np := nodePool("default", func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
			{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"spot", "on-demand"}},
			{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
		}
	})
	types := catalog.Embedded().ForProvider()
	r := solve(t, &Input{Pods: pods("web", 50, "1", "2Gi"), NodePools: []*NodePool{{NodePool: np, InstanceTypes: types}}})
	expectPlaced(t, r)
	one, all := 0.0, 0.0 // the cheapest node for one pod, and for all fifty
	s := &solver{in: &Input{NodePools: []*NodePool{{NodePool: np, InstanceTypes: types}}}, topo: newTopology(), intern: newInterner()}
	if err := s.prepare(); err != nil {
		t.Fatal(err)
	}
	for _, it := range s.pools[0].types {
		o, ok := it.cheapestOffering(s.pools[0].reqs, nil)
		if !ok {
			continue
		}
		if it.alloc.cpu >= 1000 && it.alloc.mem >= 2<<30 && (one == 0 || o.Price < one) {
			one = o.Price
		}
		if it.alloc.cpu >= 50000 && it.alloc.mem >= 100<<30 && (all == 0 || o.Price < all) {
			all = o.Price
		}
	}
	t.Logf("%d nodes, $%.3f/hour; one node per pod $%.3f, one node for all $%.3f", len(r.NodeClaims), r.PricePerHour(), 50*one, all)
	if best := min(50*one, all); r.PricePerHour() > 0.9*best {
		t.Fatalf("$%.3f/hour is not clearly below the better of a node per pod and one node for all ($%.3f)", r.PricePerHour(), best)
	}
}

// TestPackingKeepsConstraints: free pods with a node selector and a toleration land only
// where those allow, existing nodes take them first, and pods selected by another pod's
// affinity are placed first fit so that the affinity can find them.
func TestPackingKeepsConstraints(t *testing.T) {
	tainted := nodePool("gpu", func(np *karpv1.NodePool) {
		np.Spec.Weight = ptr.To(int32(10))
		np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "gpu", Effect: corev1.TaintEffectNoSchedule}}
	})
	arm := func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{corev1.LabelArchStable: "arm64"} }
	tolerate := func(p *corev1.Pod) {
		p.Spec.Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}
	}
	existingNode := node("n1", "z-a", "4", "8Gi")
	in := &Input{
		Pods:      append(append(pods("arm", 6, "1", "2Gi", arm), pods("tol", 4, "1", "2Gi", tolerate)...), pods("any", 3, "1", "2Gi")...),
		NodePools: pools(tainted, nodePool("default")),
		Nodes:     []*scheduling.Node{existingNode},
	}
	r := solve(t, in)
	expectPlaced(t, r)
	if n := len(r.Existing["n1"]); n != 4 {
		t.Errorf("the existing node has room for 4 pods; it took %d", n)
	}
	for _, c := range r.NodeClaims {
		for _, p := range c.Pods {
			switch {
			case p.Spec.NodeSelector != nil && c.InstanceType.Labels[corev1.LabelArchStable] != "arm64":
				t.Errorf("%s on %s (%s)", PodKey(p), c.InstanceType.Name, c.InstanceType.Labels[corev1.LabelArchStable])
			case c.NodePool == "gpu" && len(p.Spec.Tolerations) == 0:
				t.Errorf("%s on the tainted NodePool without a toleration", PodKey(p))
			}
		}
	}
	// A database pinned to zone b that web pods must share a zone with, both pending: the
	// database is placed in size order with the web pods, not deferred to packing after them.
	db := pod("db-0", "1", "1Gi", func(p *corev1.Pod) {
		p.Labels = map[string]string{"app": "db"}
		p.Spec.NodeSelector = map[string]string{karpv1.LabelTopologyZone: "z-b"}
	})
	webs := pods("web", 3, "1", "1Gi", podAffinity(karpv1.LabelTopologyZone, map[string]string{"app": "db"}))
	r = solve(t, &Input{Pods: append(webs, db), NodePools: pools(nodePool("default"))})
	expectPlaced(t, r)
	zoneOf := map[string]string{}
	for _, c := range r.NodeClaims {
		for _, p := range c.Pods {
			zoneOf[p.Name] = label(c, karpv1.LabelTopologyZone)
		}
	}
	for _, w := range webs {
		if zoneOf[w.Name] != "z-b" || zoneOf["db-0"] != "z-b" {
			t.Errorf("%s in %q, the database in %q; want both in z-b", w.Name, zoneOf[w.Name], zoneOf["db-0"])
		}
	}
}
