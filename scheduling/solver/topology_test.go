package solver

import (
	"fmt"
	"reflect"
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/scheduling"
)

// The cases of upstream's scheduling suite "Topology": zonal, hostname and capacity-type
// spreads, maxSkew, minDomains, the node affinity and taint policies, several constraints on
// one pod, pod affinity and anti-affinity between new and existing pods, written against this
// solver.

// spreadSpec is a topology spread constraint over pods labelled app=<app>.
type spreadSpec struct {
	key      string
	skew     int32
	anyway   bool
	minDoms  int32
	app      string
	taints   *corev1.NodeInclusionPolicy
	affinity *corev1.NodeInclusionPolicy
}

func (s spreadSpec) apply(p *corev1.Pod) {
	app := s.app
	if app == "" {
		app = p.Labels["app"]
	}
	c := corev1.TopologySpreadConstraint{MaxSkew: s.skew, TopologyKey: s.key, WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}, NodeTaintsPolicy: s.taints, NodeAffinityPolicy: s.affinity}
	if s.anyway {
		c.WhenUnsatisfiable = corev1.ScheduleAnyway
	}
	if s.minDoms > 0 {
		c.MinDomains = ptr.To(s.minDoms)
	}
	p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, c)
}

// labelled sets a pod's app label.
func labelled(app string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Labels = map[string]string{"app": app} }
}

// podsPer counts the placed pods by the value of key on their NodeClaim (new) or node.
func podsPer(r *Result, nodes []*scheduling.Node, key string) map[string]int {
	out := map[string]int{}
	for _, c := range r.NodeClaims {
		v := label(c, key)
		if key == corev1.LabelHostname {
			v = c.Hostname
		}
		if key == karpv1.CapacityTypeLabelKey {
			v = c.Offering.CapacityType
		}
		out[v] += len(c.Pods)
	}
	for _, n := range nodes {
		out[n.Labels[key]] += len(r.Existing[n.Name])
	}
	return out
}

// counts are the values of a map in descending order, for skews that do not depend on which
// domain got which count.
func counts(m map[string]int) []int {
	var out []int
	for _, v := range m {
		if v > 0 {
			out = append(out, v)
		}
	}
	sort.Sort(sort.Reverse(sort.IntSlice(out)))
	return out
}

func TestZonalTopologySpread(t *testing.T) {
	for name, tc := range map[string]struct {
		n      int
		spread []spreadSpec
		np     []func(*karpv1.NodePool)
		nodes  []*scheduling.Node
		pod    []func(*corev1.Pod)
		// want are the new pods' counts per zone; pending how many stay pending.
		want    map[string]int
		pending int
	}{
		"balances evenly over three zones": {n: 6, spread: []spreadSpec{{key: karpv1.LabelTopologyZone, skew: 1}},
			want: map[string]int{"z-a": 2, "z-b": 2, "z-c": 2}},
		"one extra pod goes to one zone": {n: 7, spread: []spreadSpec{{key: karpv1.LabelTopologyZone, skew: 1}},
			want: map[string]int{"z-a": 3, "z-b": 2, "z-c": 2}},
		"maxSkew 2 packs two ahead": {n: 2, spread: []spreadSpec{{key: karpv1.LabelTopologyZone, skew: 2}},
			want: map[string]int{"z-a": 2}},
		"maxSkew 4 of 8 pods": {n: 8, spread: []spreadSpec{{key: karpv1.LabelTopologyZone, skew: 4}},
			want: map[string]int{"z-a": 4, "z-b": 4}},
		"balances within the zones the NodePool allows": {n: 4, spread: []spreadSpec{{key: karpv1.LabelTopologyZone, skew: 1}},
			np:   []func(*karpv1.NodePool){withRequirements(requirement(karpv1.LabelTopologyZone, corev1.NodeSelectorOpIn, "z-a", "z-b"))},
			want: map[string]int{"z-a": 2, "z-b": 2}},
		"balances within the zones the pod selects": {n: 4, spread: []spreadSpec{{key: karpv1.LabelTopologyZone, skew: 1}},
			pod:  []func(*corev1.Pod){requireAll(expr(karpv1.LabelTopologyZone, corev1.NodeSelectorOpIn, "z-b", "z-c"))},
			want: map[string]int{"z-b": 2, "z-c": 2}},
		"evens out the zones existing pods hold": {n: 3, spread: []spreadSpec{{key: karpv1.LabelTopologyZone, skew: 1}},
			nodes: []*scheduling.Node{nodeWithApp("na", "z-a", "web", 2), nodeWithApp("nb", "z-b", "web", 2)},
			want:  map[string]int{"z-c": 3}},
		"pods of another app do not count": {n: 3, spread: []spreadSpec{{key: karpv1.LabelTopologyZone, skew: 1}},
			nodes: []*scheduling.Node{nodeWithApp("na", "z-a", "db", 5)},
			want:  map[string]int{"z-a": 1, "z-b": 1, "z-c": 1}},
		"a NodePool in one zone cannot keep the skew against others": {n: 4, spread: []spreadSpec{{key: karpv1.LabelTopologyZone, skew: 1}},
			np:    []func(*karpv1.NodePool){withRequirements(requirement(karpv1.LabelTopologyZone, corev1.NodeSelectorOpIn, "z-a"))},
			nodes: []*scheduling.Node{nodeWithApp("nb", "z-b", "web", 1), nodeWithApp("nc", "z-c", "web", 1)},
			want:  map[string]int{"z-a": 2}, pending: 2},
		"ScheduleAnyway places what DoNotSchedule would not": {n: 4, spread: []spreadSpec{{key: karpv1.LabelTopologyZone, skew: 1, anyway: true}},
			np:    []func(*karpv1.NodePool){withRequirements(requirement(karpv1.LabelTopologyZone, corev1.NodeSelectorOpIn, "z-a"))},
			nodes: []*scheduling.Node{nodeWithApp("nb", "z-b", "web", 1), nodeWithApp("nc", "z-c", "web", 1)},
			want:  map[string]int{"z-a": 4}},
		"nodeAffinityPolicy Ignore counts zones the pod cannot use": {n: 2,
			spread: []spreadSpec{{key: karpv1.LabelTopologyZone, skew: 1, affinity: ptr.To(corev1.NodeInclusionPolicyIgnore)}},
			pod:    []func(*corev1.Pod){requireAll(expr(karpv1.LabelTopologyZone, corev1.NodeSelectorOpIn, "z-a"))},
			nodes:  []*scheduling.Node{nodeWithApp("nb", "z-b", "other", 0)},
			want:   map[string]int{"z-a": 1}, pending: 1},
		"nodeAffinityPolicy Honor leaves out the zones the pod cannot use": {n: 2,
			spread: []spreadSpec{{key: karpv1.LabelTopologyZone, skew: 1}},
			pod:    []func(*corev1.Pod){requireAll(expr(karpv1.LabelTopologyZone, corev1.NodeSelectorOpIn, "z-a"))},
			nodes:  []*scheduling.Node{nodeWithApp("nb", "z-b", "other", 0)},
			want:   map[string]int{"z-a": 2}},
		"minDomains 3 with a pool of two zones keeps one pod a zone": {n: 4,
			spread: []spreadSpec{{key: karpv1.LabelTopologyZone, skew: 1, minDoms: 3}},
			np:     []func(*karpv1.NodePool){withRequirements(requirement(karpv1.LabelTopologyZone, corev1.NodeSelectorOpIn, "z-a", "z-b"))},
			want:   map[string]int{"z-a": 1, "z-b": 1}, pending: 2},
		"minDomains met behaves as without": {n: 6,
			spread: []spreadSpec{{key: karpv1.LabelTopologyZone, skew: 1, minDoms: 3}},
			want:   map[string]int{"z-a": 2, "z-b": 2, "z-c": 2}},
		"zone and hostname spreads together": {n: 6,
			spread: []spreadSpec{{key: karpv1.LabelTopologyZone, skew: 1}, {key: corev1.LabelHostname, skew: 1}},
			want:   map[string]int{"z-a": 2, "z-b": 2, "z-c": 2}},
	} {
		t.Run(name, func(t *testing.T) {
			opts := append([]func(*corev1.Pod){labelled("web")}, tc.pod...)
			for _, s := range tc.spread {
				opts = append(opts, s.apply)
			}
			r := solve(t, &Input{Pods: pods("web", tc.n, "100m", "128Mi", opts...), NodePools: pools(nodePool("default", tc.np...)), Nodes: tc.nodes})
			if len(r.Unschedulable) != tc.pending {
				t.Fatalf("%d pods pending, want %d: %v", len(r.Unschedulable), tc.pending, r.Unschedulable)
			}
			got := map[string]int{}
			for _, c := range r.NodeClaims {
				got[label(c, karpv1.LabelTopologyZone)] += len(c.Pods)
			}
			for _, n := range tc.nodes {
				if k := len(r.Existing[n.Name]); k > 0 {
					got[""] += k
				}
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Fatalf("pods per zone %v, want %v", got, tc.want)
				}
			}
			for k, v := range got {
				if _, ok := tc.want[k]; !ok && v > 0 {
					t.Fatalf("pods per zone %v, want %v", got, tc.want)
				}
			}
			if name == "zone and hostname spreads together" && len(r.NodeClaims) != 6 {
				t.Fatalf("hostname maxSkew 1 over 6 pods: %d NodeClaims, want 6", len(r.NodeClaims))
			}
		})
	}
}

// nodeWithApp is a small node in a zone with n pods labelled app.
func nodeWithApp(name, zone, app string, n int) *scheduling.Node {
	return node(name, zone, "100m", "128Mi", func(nd *scheduling.Node) {
		for i := range n {
			nd.Pods = append(nd.Pods, pod(fmt.Sprintf("%s-%s-%d", app, name, i), "1m", "1Mi", labelled(app)))
		}
	})
}

func TestHostnameTopologySpread(t *testing.T) {
	for name, tc := range map[string]struct {
		n, skew   int
		anyway    bool
		wantNodes int
	}{
		"maxSkew 1: a node a pod":             {n: 4, skew: 1, wantNodes: 4},
		"maxSkew 2: two pods a node":          {n: 4, skew: 2, wantNodes: 2},
		"maxSkew 3 of 7":                      {n: 7, skew: 3, wantNodes: 3},
		"ScheduleAnyway still spreads":        {n: 3, skew: 1, anyway: true, wantNodes: 3},
		"maxSkew larger than the pods":        {n: 3, skew: 5, wantNodes: 1},
		"maxSkew 1 of one pod: a single node": {n: 1, skew: 1, wantNodes: 1},
	} {
		t.Run(name, func(t *testing.T) {
			s := spreadSpec{key: corev1.LabelHostname, skew: int32(tc.skew), anyway: tc.anyway}
			r := solve(t, &Input{Pods: pods("web", tc.n, "100m", "128Mi", labelled("web"), s.apply), NodePools: pools(nodePool("default"))})
			expectPlaced(t, r)
			if len(r.NodeClaims) != tc.wantNodes {
				t.Fatalf("%d NodeClaims, want %d", len(r.NodeClaims), tc.wantNodes)
			}
			for _, c := range r.NodeClaims {
				if len(c.Pods) > tc.skew && !tc.anyway {
					t.Fatalf("%d pods on one node with maxSkew %d", len(c.Pods), tc.skew)
				}
			}
		})
	}
	t.Run("existing nodes with the app count as domains", func(t *testing.T) {
		s := spreadSpec{key: corev1.LabelHostname, skew: 1}
		nodes := []*scheduling.Node{node("n1", "z-a", "8", "8Gi", func(n *scheduling.Node) { n.Pods = []*corev1.Pod{pod("web-old", "100m", "128Mi", labelled("web"))} })}
		r := solve(t, &Input{Pods: pods("web", 2, "100m", "128Mi", labelled("web"), s.apply), NodePools: pools(nodePool("default")), Nodes: nodes})
		expectPlaced(t, r)
		if len(r.Existing["n1"]) != 0 || len(r.NodeClaims) != 2 {
			t.Fatalf("n1 already has one; want two new nodes, got %v and %d NodeClaims", r.Existing, len(r.NodeClaims))
		}
	})
	t.Run("an empty existing node takes one", func(t *testing.T) {
		s := spreadSpec{key: corev1.LabelHostname, skew: 1}
		nodes := []*scheduling.Node{node("n1", "z-a", "8", "8Gi")}
		r := solve(t, &Input{Pods: pods("web", 2, "100m", "128Mi", labelled("web"), s.apply), NodePools: pools(nodePool("default")), Nodes: nodes})
		expectPlaced(t, r)
		if len(r.Existing["n1"]) != 1 || len(r.NodeClaims) != 1 {
			t.Fatalf("want one pod on n1 and one new node, got %v and %d NodeClaims", r.Existing, len(r.NodeClaims))
		}
	})
}

func TestCapacityTypeTopologySpread(t *testing.T) {
	s := spreadSpec{key: karpv1.CapacityTypeLabelKey, skew: 1}
	r := solve(t, &Input{Pods: pods("web", 4, "100m", "128Mi", labelled("web"), s.apply), NodePools: pools(nodePool("default", bothCapacityTypes))})
	expectPlaced(t, r)
	got := podsPer(r, nil, karpv1.CapacityTypeLabelKey)
	if !reflect.DeepEqual(got, map[string]int{karpv1.CapacityTypeSpot: 2, karpv1.CapacityTypeOnDemand: 2}) {
		t.Fatalf("pods per capacity type %v, want 2 and 2", got)
	}
	// A NodePool of on-demand only has one domain: every pod goes there.
	r = solve(t, &Input{Pods: pods("web", 3, "100m", "128Mi", labelled("web"), s.apply), NodePools: pools(nodePool("default"))})
	expectPlaced(t, r)
	if got := podsPer(r, nil, karpv1.CapacityTypeLabelKey); got[karpv1.CapacityTypeOnDemand] != 3 {
		t.Fatalf("pods per capacity type %v, want all on-demand", got)
	}
}

// A spread over a custom label the NodePool requires with several values spreads over them.
func TestCustomLabelTopologySpread(t *testing.T) {
	np := nodePool("default", withRequirements(requirement("example.com/rack", corev1.NodeSelectorOpIn, "r1", "r2", "r3")))
	s := spreadSpec{key: "example.com/rack", skew: 1}
	r := solve(t, &Input{Pods: pods("web", 6, "100m", "128Mi", labelled("web"), s.apply), NodePools: pools(np)})
	expectPlaced(t, r)
	got := map[string]int{}
	for _, c := range r.NodeClaims {
		v, ok := c.Requirements["example.com/rack"].Single()
		if !ok {
			t.Fatalf("NodeClaim rack %s: the spread must decide one", reqString(c.Requirements, "example.com/rack"))
		}
		got[v] += len(c.Pods)
	}
	if !reflect.DeepEqual(counts(got), []int{2, 2, 2}) {
		t.Fatalf("pods per rack %v, want 2 each", got)
	}
}

func TestPodAntiAffinityCases(t *testing.T) {
	anti := func(key, app string, preferred bool) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			term := corev1.PodAffinityTerm{TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}
			if preferred {
				p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 10, PodAffinityTerm: term}}}}
				return
			}
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term}}}
		}
	}
	t.Run("zonal anti-affinity: one pod a zone, the fourth pending", func(t *testing.T) {
		r := solve(t, &Input{Pods: pods("db", 4, "100m", "128Mi", labelled("db"), anti(karpv1.LabelTopologyZone, "db", false)), NodePools: pools(nodePool("default"))})
		if len(r.Unschedulable) != 1 || len(r.NodeClaims) != 3 {
			t.Fatalf("%d NodeClaims and %d pending, want 3 and 1", len(r.NodeClaims), len(r.Unschedulable))
		}
		if got := counts(podsPer(r, nil, karpv1.LabelTopologyZone)); !reflect.DeepEqual(got, []int{1, 1, 1}) {
			t.Fatalf("pods per zone %v, want one in each", got)
		}
	})
	t.Run("preferred zonal anti-affinity places the fourth anyway", func(t *testing.T) {
		r := solve(t, &Input{Pods: pods("db", 4, "100m", "128Mi", labelled("db"), anti(karpv1.LabelTopologyZone, "db", true)), NodePools: pools(nodePool("default"))})
		expectPlaced(t, r)
		if got := podsPer(r, nil, karpv1.LabelTopologyZone); len(got) != 3 {
			t.Fatalf("pods per zone %v, want all three zones used", got)
		}
	})
	t.Run("anti-affinity to an app on an existing node keeps off that node's zone", func(t *testing.T) {
		nodes := []*scheduling.Node{nodeWithApp("na", "z-a", "cache", 1)}
		r := solve(t, &Input{Pods: pods("web", 2, "100m", "128Mi", labelled("web"), anti(karpv1.LabelTopologyZone, "cache", false)), NodePools: pools(nodePool("default")), Nodes: nodes})
		expectPlaced(t, r)
		for _, c := range r.NodeClaims {
			if z := label(c, karpv1.LabelTopologyZone); z == "z-a" {
				t.Fatalf("a web pod in z-a, where a cache pod runs")
			}
		}
		if len(r.Existing["na"]) != 0 {
			t.Fatal("a web pod on the cache's node")
		}
	})
	t.Run("an existing pod's anti-affinity keeps new pods away", func(t *testing.T) {
		guard := pod("guard", "100m", "128Mi", labelled("guard"), anti(karpv1.LabelTopologyZone, "web", false))
		nodes := []*scheduling.Node{node("na", "z-a", "8", "8Gi", func(n *scheduling.Node) { n.Pods = []*corev1.Pod{guard} })}
		r := solve(t, &Input{Pods: pods("web", 3, "100m", "128Mi", labelled("web")), NodePools: pools(nodePool("default")), Nodes: nodes})
		expectPlaced(t, r)
		if len(r.Existing["na"]) != 0 {
			t.Fatal("a web pod beside the guard that refuses it")
		}
		for _, c := range r.NodeClaims {
			if z := zonesOf(c); len(z) != 1 || z[0] == "z-a" {
				t.Fatalf("a new node for web pods may be in %v: the guard in z-a refuses them", z)
			}
		}
	})
	t.Run("hostname anti-affinity among new pods: a node each", func(t *testing.T) {
		r := solve(t, &Input{Pods: pods("web", 5, "100m", "128Mi", labelled("web"), anti(corev1.LabelHostname, "web", false)), NodePools: pools(nodePool("default"))})
		expectPlaced(t, r)
		if len(r.NodeClaims) != 5 {
			t.Fatalf("%d NodeClaims, want 5", len(r.NodeClaims))
		}
	})
	t.Run("anti-affinity to a different app lets same-app pods share", func(t *testing.T) {
		r := solve(t, &Input{Pods: pods("web", 4, "100m", "128Mi", labelled("web"), anti(corev1.LabelHostname, "batch", false)), NodePools: pools(nodePool("default"))})
		expectPlaced(t, r)
		if len(r.NodeClaims) != 1 {
			t.Fatalf("%d NodeClaims, want 1", len(r.NodeClaims))
		}
	})
	t.Run("two apps that refuse each other do not share a node", func(t *testing.T) {
		ps := append(pods("web", 2, "100m", "128Mi", labelled("web"), anti(corev1.LabelHostname, "batch", false)), pods("batch", 2, "100m", "128Mi", labelled("batch"))...)
		r := solve(t, &Input{Pods: ps, NodePools: pools(nodePool("default"))})
		expectPlaced(t, r)
		for _, c := range r.NodeClaims {
			apps := map[string]bool{}
			for _, p := range c.Pods {
				apps[p.Labels["app"]] = true
			}
			if apps["web"] && apps["batch"] {
				t.Fatal("web and batch share a node though web refuses batch")
			}
		}
	})
}

func TestPodAffinityCases(t *testing.T) {
	aff := func(key, app string, preferred bool) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			term := corev1.PodAffinityTerm{TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}
			if preferred {
				p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 10, PodAffinityTerm: term}}}}
				return
			}
			p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term}}}
		}
	}
	t.Run("hostname affinity to a pending pod puts them on one node", func(t *testing.T) {
		ps := append([]*corev1.Pod{pod("db-0", "1", "1Gi", labelled("db"))}, pods("api", 3, "100m", "128Mi", labelled("api"), aff(corev1.LabelHostname, "db", false))...)
		r := solve(t, &Input{Pods: ps, NodePools: pools(nodePool("default"))})
		expectPlaced(t, r)
		if len(r.NodeClaims) != 1 {
			t.Fatalf("%d NodeClaims, want the api pods beside the db", len(r.NodeClaims))
		}
	})
	t.Run("zone affinity to a pending pod follows its zone", func(t *testing.T) {
		ps := append([]*corev1.Pod{pod("db-0", "1", "1Gi", labelled("db"), selector(karpv1.LabelTopologyZone, "z-c"))},
			pods("api", 3, "1500m", "1Gi", labelled("api"), aff(karpv1.LabelTopologyZone, "db", false))...)
		r := solve(t, &Input{Pods: ps, NodePools: pools(nodePool("default"))})
		expectPlaced(t, r)
		for _, c := range r.NodeClaims {
			if z := zonesOf(c); len(z) != 1 || z[0] != "z-c" {
				t.Fatalf("a NodeClaim in %v, want every pod in z-c", z)
			}
		}
	})
	t.Run("hostname affinity to an existing pod places on its node", func(t *testing.T) {
		nodes := []*scheduling.Node{node("n1", "z-b", "8", "8Gi", func(n *scheduling.Node) { n.Pods = []*corev1.Pod{pod("db-old", "1", "1Gi", labelled("db"))} })}
		r := solve(t, &Input{Pods: pods("api", 2, "100m", "128Mi", labelled("api"), aff(corev1.LabelHostname, "db", false)), NodePools: pools(nodePool("default")), Nodes: nodes})
		expectPlaced(t, r)
		if len(r.Existing["n1"]) != 2 {
			t.Fatalf("want both on n1 with the db, got %v", r.Existing)
		}
	})
	t.Run("hostname affinity to an existing pod on a full node stays pending", func(t *testing.T) {
		nodes := []*scheduling.Node{node("n1", "z-b", "1", "1Gi", func(n *scheduling.Node) { n.Pods = []*corev1.Pod{pod("db-old", "900m", "900Mi", labelled("db"))} })}
		r := solve(t, &Input{Pods: pods("api", 1, "500m", "128Mi", labelled("api"), aff(corev1.LabelHostname, "db", false)), NodePools: pools(nodePool("default")), Nodes: nodes})
		if len(r.Unschedulable) != 1 || len(r.NodeClaims) != 0 {
			t.Fatalf("a new node cannot hold the db: %d NodeClaims, %d pending", len(r.NodeClaims), len(r.Unschedulable))
		}
	})
	t.Run("preferred affinity to nothing is relaxed", func(t *testing.T) {
		r := solve(t, &Input{Pods: pods("api", 2, "100m", "128Mi", labelled("api"), aff(karpv1.LabelTopologyZone, "nothing", true)), NodePools: pools(nodePool("default"))})
		expectPlaced(t, r)
	})
	t.Run("required affinity to nothing stays pending", func(t *testing.T) {
		r := solve(t, &Input{Pods: pods("api", 2, "100m", "128Mi", labelled("api"), aff(karpv1.LabelTopologyZone, "nothing", false)), NodePools: pools(nodePool("default"))})
		if len(r.Unschedulable) != 2 {
			t.Fatalf("%d pending, want both", len(r.Unschedulable))
		}
		expectUnschedulable(t, r, "pod affinity")
	})
	t.Run("affinity and a zonal spread together", func(t *testing.T) {
		s := spreadSpec{key: karpv1.LabelTopologyZone, skew: 1}
		ps := pods("web", 6, "100m", "128Mi", labelled("web"), s.apply, func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}}}
		})
		r := solve(t, &Input{Pods: ps, NodePools: pools(nodePool("default"))})
		// The first pod picks a node; affinity keeps the rest on it, and the spread then allows
		// only one more pod there (skew 1 against the empty zones).
		placed := 0
		for _, c := range r.NodeClaims {
			placed += len(c.Pods)
		}
		if placed+len(r.Unschedulable) != 6 || len(r.NodeClaims) != 1 {
			t.Fatalf("%d NodeClaims, %d placed, %d pending", len(r.NodeClaims), placed, len(r.Unschedulable))
		}
		if placed > 1 {
			t.Fatalf("%d pods on one node in one zone with maxSkew 1 against two empty zones", placed)
		}
	})
}

// Topology decisions are deterministic: the same input gives the same zones every time.
func TestTopologyDeterministic(t *testing.T) {
	in := func() *Input {
		s := spreadSpec{key: karpv1.LabelTopologyZone, skew: 1}
		return &Input{Pods: pods("web", 10, "300m", "256Mi", labelled("web"), s.apply), NodePools: pools(nodePool("default"))}
	}
	first := podsPer(solve(t, in()), nil, karpv1.LabelTopologyZone)
	for range 5 {
		if got := podsPer(solve(t, in()), nil, karpv1.LabelTopologyZone); !reflect.DeepEqual(got, first) {
			t.Fatalf("pods per zone %v then %v", first, got)
		}
	}
}

// matchLabelKeys (topology spread constraints and pod affinity terms) and mismatchLabelKeys
// (pod affinity terms) take the incoming pod's values into the selector, as kube-scheduler
// does: during a rollout, the new ReplicaSet's pods spread among themselves.
func TestMatchLabelKeys(t *testing.T) {
	rollout := func(hash string) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.Labels = map[string]string{"app": "web", "pod-template-hash": hash} }
	}
	spreadByHash := func(p *corev1.Pod) {
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: karpv1.LabelTopologyZone, WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, MatchLabelKeys: []string{"pod-template-hash"}}}
	}
	// The old ReplicaSet's three pods all sit in z-a (on a full node). Counted with them, the
	// new pods could not go to z-a until b and c had three each; with matchLabelKeys, the new
	// ReplicaSet spreads evenly on its own.
	old := node("old", "z-a", "100m", "64Mi", func(n *scheduling.Node) {
		for i := range 3 {
			n.Pods = append(n.Pods, pod(fmt.Sprintf("web-old-%d", i), "1m", "1Mi", rollout("v1")))
		}
	})
	r := solve(t, &Input{Pods: pods("web-new", 3, "100m", "128Mi", rollout("v2"), spreadByHash), NodePools: pools(nodePool("default")), Nodes: []*scheduling.Node{old}})
	expectPlaced(t, r)
	if got := podsPer(r, nil, karpv1.LabelTopologyZone); !reflect.DeepEqual(counts(got), []int{1, 1, 1}) {
		t.Fatalf("new pods per zone %v, want one in each (the old ReplicaSet's do not count)", got)
	}
	// Without matchLabelKeys the old pods count: none of the three new ones goes to z-a.
	plain := func(p *corev1.Pod) {
		spreadByHash(p)
		p.Spec.TopologySpreadConstraints[0].MatchLabelKeys = nil
	}
	r = solve(t, &Input{Pods: pods("web-new", 3, "100m", "128Mi", rollout("v2"), plain), NodePools: pools(nodePool("default")), Nodes: []*scheduling.Node{old}})
	expectPlaced(t, r)
	if got := podsPer(r, nil, karpv1.LabelTopologyZone); got["z-a"] != 0 {
		t.Fatalf("new pods per zone %v: with the old pods counted, z-a (3) is ahead", got)
	}

	// mismatchLabelKeys: a tenant's pods keep off nodes of other tenants' pods.
	tenant := func(name string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Labels = map[string]string{"tenant": name}
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tenant", Operator: metav1.LabelSelectorOpExists}}},
				MismatchLabelKeys: []string{"tenant"}}}}}
		}
	}
	ps := append(pods("a", 3, "100m", "128Mi", tenant("a")), pods("b", 3, "100m", "128Mi", tenant("b"))...)
	r = solve(t, &Input{Pods: ps, NodePools: pools(nodePool("default"))})
	expectPlaced(t, r)
	if len(r.NodeClaims) != 2 {
		t.Fatalf("%d NodeClaims, want one per tenant", len(r.NodeClaims))
	}
	for _, c := range r.NodeClaims {
		tenants := map[string]bool{}
		for _, p := range c.Pods {
			tenants[p.Labels["tenant"]] = true
		}
		if len(tenants) != 1 {
			t.Fatalf("a node with tenants %v", tenants)
		}
	}
	// matchLabelKeys on pod affinity: each tenant's pods gather on their own node.
	together := func(name string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Labels = map[string]string{"tenant": name}
			p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				TopologyKey: karpv1.LabelTopologyZone, LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tenant", Operator: metav1.LabelSelectorOpExists}}},
				MatchLabelKeys: []string{"tenant"}}}}}
		}
	}
	ps = append(pods("a", 2, "1500m", "1Gi", together("a")), pods("b", 2, "1500m", "1Gi", together("b"))...)
	r = solve(t, &Input{Pods: ps, NodePools: pools(nodePool("default"))})
	expectPlaced(t, r)
	zoneOf := map[string]map[string]bool{}
	for _, c := range r.NodeClaims {
		for _, p := range c.Pods {
			if zoneOf[p.Labels["tenant"]] == nil {
				zoneOf[p.Labels["tenant"]] = map[string]bool{}
			}
			zoneOf[p.Labels["tenant"]][label(c, karpv1.LabelTopologyZone)] = true
		}
	}
	for tenant, zs := range zoneOf {
		if len(zs) != 1 {
			t.Fatalf("tenant %s's pods in zones %v, want one", tenant, zs)
		}
	}
}

// Spreads over existing nodes with taints (nodeTaintsPolicy) and over domains of in-flight and
// new NodeClaims together: the counts add up across all three, so the skew holds overall.
func TestSpreadAcrossExistingInFlightAndNew(t *testing.T) {
	s := spreadSpec{key: karpv1.LabelTopologyZone, skew: 1}
	existing := node("ea", "z-a", "1", "1Gi", func(n *scheduling.Node) {
		n.Pods = []*corev1.Pod{pod("web-e", "900m", "900Mi", labelled("web"))}
	})
	inflight := node("fb", "z-b", "1", "1Gi", func(n *scheduling.Node) {
		n.InFlight = true
		n.Pods = []*corev1.Pod{pod("web-f", "900m", "900Mi", labelled("web"))}
	})
	r := solve(t, &Input{Pods: pods("web", 4, "500m", "512Mi", labelled("web"), s.apply), NodePools: pools(nodePool("default")), Nodes: []*scheduling.Node{existing, inflight}})
	expectPlaced(t, r)
	total := map[string]int{"z-a": 1, "z-b": 1}
	for _, c := range r.NodeClaims {
		total[label(c, karpv1.LabelTopologyZone)] += len(c.Pods)
	}
	lo, hi := -1, 0
	for _, z := range zones {
		if lo < 0 || total[z] < lo {
			lo = total[z]
		}
		hi = max(hi, total[z])
	}
	if hi-lo > 1 {
		t.Fatalf("web pods per zone %v (existing, in flight and new): skew %d", total, hi-lo)
	}
	if total["z-c"] < 2 {
		t.Fatalf("per zone %v: z-c starts empty and takes the first two", total)
	}
}

// Required pod anti-affinity on a custom topology key (a rack label the NodePool lists):
// one pod per rack, the fourth pending.
func TestAntiAffinityOnACustomKey(t *testing.T) {
	np := nodePool("default", withRequirements(requirement("example.com/rack", corev1.NodeSelectorOpIn, "r1", "r2", "r3")))
	anti := func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey: "example.com/rack", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}}}}
	}
	r := solve(t, &Input{Pods: pods("db", 4, "500m", "512Mi", labelled("db"), anti), NodePools: pools(np)})
	if len(r.NodeClaims) != 3 || len(r.Unschedulable) != 1 {
		t.Fatalf("%d NodeClaims and %d pending, want 3 and 1", len(r.NodeClaims), len(r.Unschedulable))
	}
	racks := map[string]bool{}
	for _, c := range r.NodeClaims {
		v, ok := c.Requirements["example.com/rack"].Single()
		if !ok || racks[v] {
			t.Fatalf("rack %s (%v) twice or undecided", reqString(c.Requirements, "example.com/rack"), ok)
		}
		racks[v] = true
	}
}
