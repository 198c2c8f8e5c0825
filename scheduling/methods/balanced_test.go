package methods

import (
	"fmt"
	"math"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

// The Balanced policy's table: each case that acts beside one that must not, the numbers
// worked in the comments (the catalog: m5.large $0.10, m5.xlarge $0.20, m5.2xlarge $0.40
// on-demand; Spot 30% of that).
func TestBalanced(t *testing.T) {
	balanced := func(mut ...func(*karpv1.NodePool)) []*karpv1.NodePool {
		return []*karpv1.NodePool{nodePool("default", append([]func(*karpv1.NodePool){func(np *karpv1.NodePool) {
			np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyBalanced
		}}, mut...)...)}
	}
	onDemandOnly := func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{
			Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.CapacityTypeOnDemand}}}
	}
	pinned := func(p *corev1.Pod) { p.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"} }
	expensive := func(p *corev1.Pod) { p.Annotations = map[string]string{PodDeletionCostAnnotation: "2147483647"} }
	// a runs one pod that fits beside b's and c's, which are pinned: deleting a saves 1/3 of
	// the pool's cost.
	deletable := func(podOfA ...func(*corev1.Pod)) world {
		return world{nodes: []*corev1.Node{node("a", "m5.xlarge", "on-demand", "z-a"), node("b", "m5.xlarge", "on-demand", "z-a"), node("c", "m5.xlarge", "on-demand", "z-a")},
			pods: []*corev1.Pod{pod("web", "a", "1", "2Gi", podOfA...), pod("db-0", "b", "1", "2Gi", pinned), pod("db-1", "c", "1", "2Gi", pinned)}}
	}
	// Four m5.xlarge ($0.80); a's pods fit on a large ($0.10: saves 1/8 of the cost), the
	// others' are too big for anything but their own type.
	uniform := func(podsOfA int) world {
		w := world{pools: balanced(onDemandOnly)}
		for _, n := range []string{"a", "b", "c", "d"} {
			w.nodes = append(w.nodes, node(n, "m5.xlarge", "on-demand", "z-a"))
		}
		for i := 0; i < podsOfA; i++ {
			w.pods = append(w.pods, pod(fmt.Sprintf("small-%d", i), "a", "400m", "512Mi"))
		}
		for _, n := range []string{"b", "c", "d"} {
			for i := 0; i < 3; i++ {
				w.pods = append(w.pods, pod(fmt.Sprintf("big-%s%d", n, i), n, "1300m", "2Gi"))
			}
		}
		return w
	}
	with := func(w world, pools []*karpv1.NodePool) world { w.pools = pools; return w }
	for name, tc := range map[string]struct {
		method Method
		w      world
		want   string
		why    string // a substring of a's Unconsolidatable note, when nothing acts
		scores string // the moves scored, for the metrics and events (scoresString)
	}{
		// Deleting a: saves 1/3 of the cost, disrupts (1+1)/(2+2+2) = 1/3: score 1.
		"a delete of default-cost pods passes": {&SingleNode{}, with(deletable(), balanced()), "delete:a", "", "a approved default=1.00"},
		// The same delete with a pod that is expensive to evict: a costs 1+10 of 15, score 0.45.
		"a delete evicting an expensive pod is refused": {&SingleNode{}, with(deletable(expensive), balanced()), "", "Balanced: score 0.45 < 0.50", ""},
		"WhenEmptyOrUnderutilized takes that delete":    {&SingleNode{}, deletable(expensive), "delete:a", "", "a approved default=-"},
		// Replacing a (4 pods) by a large: saves 1/8, disrupts 5/17: score 0.42.
		"a replace saving too little for its pods is refused": {&SingleNode{}, uniform(4), "", "Balanced: score 0.42 < 0.50", "a rejected default=0.42"},
		// With 3 pods: saves 1/8, disrupts 4/16: exactly 0.5, the uniform pool's boundary.
		"a half-price replace in a uniform pool passes": {&SingleNode{}, uniform(3), "replace:a+c5.large/on-demand", "", "a approved default=0.50"},
		"WhenEmptyOrUnderutilized takes the marginal replace": {&SingleNode{}, with(uniform(4), []*karpv1.NodePool{nodePool("default", onDemandOnly)}),
			"replace:a+c5.large/on-demand", "", "a approved default=-"},
		// Three m5.xlarge for one m5.2xlarge on Spot: saves 80%, disrupts all: score 0.8.
		"multi-node passes when the saving is large": {&MultiNode{}, threeBusy(balanced()), "replace:a,b,c+m5.2xlarge/spot", "", "multi a,b,c approved default=0.80"},
		// The same on-demand only: all three for an m5.2xlarge save 1/3 for all the disruption
		// (0.33), so the search settles on a and b for a large beside c: saves 1/2, disrupts
		// 2/3 (0.75).
		"multi-node takes the largest prefix worth its pods": {&MultiNode{}, threeBusy(balanced(onDemandOnly)), "replace:a,b+c5.large/on-demand", "", "multi a,b approved default=0.75"},
		"WhenEmptyOrUnderutilized takes all three":           {&MultiNode{}, threeBusy([]*karpv1.NodePool{nodePool("default", onDemandOnly)}), "replace:a,b,c+m5.2xlarge/on-demand", "", "multi a,b,c approved default=-"},
		// Emptiness is not scored: an empty node goes under Balanced too.
		"an empty node goes": {Emptiness{}, world{pools: balanced(), nodes: []*corev1.Node{node("a", "m5.large", "on-demand", "z-a"), node("b", "m5.4xlarge", "on-demand", "z-a")},
			pods: []*corev1.Pod{pod("w1", "b", "2", "4Gi")}}, "delete:a", "", ""},
	} {
		t.Run(name, func(t *testing.T) {
			c := tc.w.cluster()
			got := strings.Join(commandNames(commands(t, tc.method, c)), " | ")
			if got != tc.want {
				t.Errorf("commands %q, want %q", got, tc.want)
			}
			if got := scoresString(c.Scores); got != tc.scores {
				t.Errorf("scored moves %q, want %q", got, tc.scores)
			}
			if tc.why == "" {
				return
			}
			for _, u := range c.Unconsolidatable {
				if u.Node == "a" {
					if !strings.Contains(u.Reason, tc.why) {
						t.Errorf("a is unconsolidatable because %q, want %q", u.Reason, tc.why)
					}
					return
				}
			}
			t.Errorf("no note for a, want %q (notes %v)", tc.why, c.Unconsolidatable)
		})
	}
}

// threeBusy is three m5.xlarge, each with half of it requested.
func threeBusy(pools []*karpv1.NodePool) world {
	return world{pools: pools, nodes: []*corev1.Node{node("a", "m5.xlarge", "on-demand", "z-a"), node("b", "m5.xlarge", "on-demand", "z-a"), node("c", "m5.xlarge", "on-demand", "z-a")},
		pods: []*corev1.Pod{pod("w1", "a", "2", "4Gi"), pod("w2", "b", "2", "4Gi"), pod("w3", "c", "2", "4Gi")}}
}

// A move across NodePools is scored for each Balanced source pool against its own totals,
// with its share of the savings by the candidates' prices; a move off WhenEmptyOrUnderutilized
// pools only is not scored.
func TestBalancedScoreAcrossPools(t *testing.T) {
	w := world{pools: []*karpv1.NodePool{
		nodePool("default", func(np *karpv1.NodePool) { np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyBalanced }),
		nodePool("other")},
		nodes: []*corev1.Node{node("a", "m5.xlarge", "on-demand", "z-a"), node("c", "m5.xlarge", "on-demand", "z-a"),
			node("b", "m5.xlarge", "on-demand", "z-a", func(n *corev1.Node) { n.Labels[karpv1.NodePoolLabelKey] = "other" })},
		pods: []*corev1.Pod{pod("w1", "a", "1", "2Gi"), pod("w2", "b", "1", "2Gi"), pod("w3", "c", "1", "2Gi")}}
	c := w.cluster()
	var a, b *Candidate
	for _, cand := range c.Candidates {
		switch cand.Name() {
		case "a":
			a = cand
		case "b":
			b = cand
		}
	}
	// a and b go for $0.20 saved: default's share is half ($0.10) of its $0.40, for a's
	// disruption 2 of its 4: score 0.5.
	pools := c.poolScores([]*Candidate{a, b}, 0.2)
	want := []PoolScore{
		{NodePool: "default", Policy: karpv1.ConsolidationPolicyBalanced, Approved: true, Scored: true, Score: 0.5, SavedShare: 0.25, DisruptedShare: 0.5},
		{NodePool: "other", Policy: karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized, Approved: true},
	}
	near := func(x, y float64) bool { return math.Abs(x-y) < 1e-9 }
	if len(pools) != len(want) {
		t.Fatalf("scores %+v, want %+v", pools, want)
	}
	for i, p := range pools {
		w := want[i]
		if p.NodePool != w.NodePool || p.Policy != w.Policy || p.Approved != w.Approved || p.Scored != w.Scored ||
			!near(p.Score, w.Score) || !near(p.SavedShare, w.SavedShare) || !near(p.DisruptedShare, w.DisruptedShare) {
			t.Errorf("score of %s %+v, want %+v", p.NodePool, p, w)
		}
	}
	if why := balancedRefusal(pools, 0.2); why != "" {
		t.Errorf("refused a move on the threshold: %s", why)
	}
	if pools := c.poolScores([]*Candidate{b}, 0.2); len(pools) != 1 || pools[0].Scored || !pools[0].Approved {
		t.Errorf("a move off a WhenEmptyOrUnderutilized pool only: %+v, want unscored and approved", pools)
	}
	if why := balancedRefusal(c.poolScores([]*Candidate{a}, 0), 0); why != "Balanced: the move saves nothing" {
		t.Errorf("a move saving nothing: %q", why)
	}
}

// Consolidation candidates are tried as upstream v1.15 tries them under every policy: the
// highest savings ratio (price over 1 plus the pods' eviction costs) first, across NodePools;
// equal ratios go to the lower disruption cost, then the name.
func TestCandidatesOrderedBySavingsRatio(t *testing.T) {
	balancedPool := nodePool("default", func(np *karpv1.NodePool) { np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyBalanced })
	inOther := func(n *corev1.Node) { n.Labels[karpv1.NodePoolLabelKey] = "other" }
	w := world{pools: []*karpv1.NodePool{balancedPool, nodePool("other")},
		nodes: []*corev1.Node{
			// Balanced: a m5.xlarge with one pod (ratio p/2), b m5.2xlarge with one (2p/2), c
			// m5.xlarge with three (p/4). WhenEmptyOrUnderutilized: x m5.2xlarge with three
			// (2p/4, a's ratio at a higher disruption cost), y m5.xlarge with one (p/2, a's
			// ratio and cost). Cheapest to disrupt first would be a, b, y, then c, x.
			node("a", "m5.xlarge", "on-demand", "z-a"), node("b", "m5.2xlarge", "on-demand", "z-a"), node("c", "m5.xlarge", "on-demand", "z-a"),
			node("x", "m5.2xlarge", "on-demand", "z-a", inOther), node("y", "m5.xlarge", "on-demand", "z-a", inOther)},
		pods: []*corev1.Pod{pod("a1", "a", "100m", "128Mi"), pod("b1", "b", "100m", "128Mi"),
			pod("c1", "c", "100m", "128Mi"), pod("c2", "c", "100m", "128Mi"), pod("c3", "c", "100m", "128Mi"),
			pod("x1", "x", "100m", "128Mi"), pod("x2", "x", "100m", "128Mi"), pod("x3", "x", "100m", "128Mi"),
			pod("y1", "y", "100m", "128Mi")}}
	c := w.cluster()
	var got []string
	for _, cand := range consolidationCandidates(t.Context(), c, c.Candidates) {
		got = append(got, cand.Name())
	}
	if strings.Join(got, ",") != "b,a,y,x,c" {
		t.Errorf("candidates in order %v, want [b a y x c]", got)
	}
}

// scoresString is each scored move as "[multi ]<nodes> approved|rejected <pool>=<score>|-",
// joined by " | ".
func scoresString(scores []MoveScore) string {
	var out []string
	for _, m := range scores {
		var names, pools []string
		for _, cand := range m.Candidates {
			names = append(names, cand.Name())
		}
		for _, p := range m.Pools {
			if p.Scored {
				pools = append(pools, fmt.Sprintf("%s=%.2f", p.NodePool, p.Score))
			} else {
				pools = append(pools, p.NodePool+"=-")
			}
		}
		decision := "rejected"
		if m.Approved {
			decision = "approved"
		}
		s := strings.Join(names, ",") + " " + decision + " " + strings.Join(pools, ",")
		if m.Multi {
			s = "multi " + s
		}
		out = append(out, s)
	}
	return strings.Join(out, " | ")
}

// A pod's eviction cost reads karpenter.sh/disruption-cost first, pod-deletion-cost without
// it, both as int32s, as upstream v1.15 does.
func TestPodEvictionCost(t *testing.T) {
	unit := math.Exp2(-27)
	for name, tc := range map[string]struct {
		annotations map[string]string
		priority    *int32
		want        float64
	}{
		"none":                               {want: 1},
		"pod-deletion-cost":                  {annotations: map[string]string{PodDeletionCostAnnotation: "1024"}, want: 1 + 1024*unit},
		"disruption-cost":                    {annotations: map[string]string{karpv1.DisruptionCostAnnotationKey: "-2048"}, want: 1 - 2048*unit},
		"disruption-cost over deletion-cost": {annotations: map[string]string{karpv1.DisruptionCostAnnotationKey: "2048", PodDeletionCostAnnotation: "1024"}, want: 1 + 2048*unit},
		"a bad disruption-cost hides deletion-cost": {annotations: map[string]string{karpv1.DisruptionCostAnnotationKey: "high", PodDeletionCostAnnotation: "1024"}, want: 1},
		"not an int32":               {annotations: map[string]string{PodDeletionCostAnnotation: "2147483648"}, want: 1},
		"not an integer":             {annotations: map[string]string{karpv1.DisruptionCostAnnotationKey: "1.5"}, want: 1},
		"the int32 maximum, clamped": {annotations: map[string]string{karpv1.DisruptionCostAnnotationKey: "2147483647"}, want: 10},
		"priority":                   {priority: ptr.To[int32](1 << 25), want: 2},
		"clamped":                    {priority: ptr.To[int32](2000000000), want: 10},
	} {
		t.Run(name, func(t *testing.T) {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: tc.annotations}, Spec: corev1.PodSpec{Priority: tc.priority}}
			if got := podEvictionCost(p); math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("podEvictionCost = %v, want %v", got, tc.want)
			}
		})
	}
}

// InvalidEvictionCost names the annotation podEvictionCost reads only when that one does not
// parse: a good disruption-cost hides a bad pod-deletion-cost, a bad one is named.
func TestInvalidEvictionCost(t *testing.T) {
	dc, pdc := karpv1.DisruptionCostAnnotationKey, PodDeletionCostAnnotation
	for name, tc := range map[string]struct {
		annotations     map[string]string
		key, value, why string
	}{
		"none":                       {},
		"good disruption-cost":       {annotations: map[string]string{dc: "-5"}},
		"good deletion-cost":         {annotations: map[string]string{pdc: "100"}},
		"bad disruption-cost":        {annotations: map[string]string{dc: "high"}, key: dc, value: "high", why: "not an integer"},
		"bad deletion-cost":          {annotations: map[string]string{pdc: "1e3"}, key: pdc, value: "1e3", why: "not an integer"},
		"empty":                      {annotations: map[string]string{dc: ""}, key: dc, why: "not an integer"},
		"over int32":                 {annotations: map[string]string{pdc: "2147483648"}, key: pdc, value: "2147483648", why: "out of the int32 range"},
		"good one hides the bad one": {annotations: map[string]string{dc: "7", pdc: "x"}},
		"bad one read, good ignored": {annotations: map[string]string{dc: "x", pdc: "7"}, key: dc, value: "x", why: "not an integer"},
	} {
		t.Run(name, func(t *testing.T) {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: tc.annotations}}
			key, value, why := InvalidEvictionCost(p)
			if key != tc.key || value != tc.value || why != tc.why {
				t.Errorf("InvalidEvictionCost = %q, %q, %q; want %q, %q, %q", key, value, why, tc.key, tc.value, tc.why)
			}
		})
	}
}
