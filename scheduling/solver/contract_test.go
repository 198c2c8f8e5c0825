package solver

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	karpv1alpha1 "github.com/karpenter-policy/karpenter/api/karpenter/v1alpha1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/scheduling"
)

// The solver's contract with its callers: it does not change its input, the order of the
// pods does not change the decision, a prepared input solves once, Progress counts every pod
// down, and packing keeps what first fit would honour.

func contractInput() *Input {
	ps := append(pods("web", 20, "300m", "512Mi", labelled("web"), spreadSpec{key: karpv1.LabelTopologyZone, skew: 1}.apply), pods("batch", 15, "1", "2Gi")...)
	ps = append(ps, pods("proxy", 3, "100m", "64Mi", hostPort(443))...)
	ps = append(ps, pod("pinned", "2", "4Gi", selector(karpv1.LabelTopologyZone, "z-b")))
	np := &NodePool{NodePool: nodePool("default", bothCapacityTypes), InstanceTypes: testCatalog(),
		DaemonSetOverhead: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}
	return &Input{Pods: ps, NodePools: []*NodePool{np}, Nodes: []*scheduling.Node{node("n1", "z-a", "2", "4Gi")}}
}

func TestSolveDoesNotChangeItsInput(t *testing.T) {
	in := contractInput()
	before := struct {
		pods  []*corev1.Pod
		nodes []*scheduling.Node
		np    *karpv1.NodePool
		types []*cloudprovider.InstanceType
	}{}
	for _, p := range in.Pods {
		before.pods = append(before.pods, p.DeepCopy())
	}
	for _, n := range in.Nodes {
		cp := *n
		cp.Allocatable = n.Allocatable.DeepCopy()
		before.nodes = append(before.nodes, &cp)
	}
	before.np = in.NodePools[0].NodePool.DeepCopy()
	for _, it := range in.NodePools[0].InstanceTypes {
		cp := *it
		cp.Offerings = append([]cloudprovider.Offering(nil), it.Offerings...)
		before.types = append(before.types, &cp)
	}
	order := make([]string, len(in.Pods))
	for i, p := range in.Pods {
		order[i] = p.Name
	}
	r := solve(t, in)
	expectPlaced(t, r)
	for i, p := range in.Pods {
		if p.Name != order[i] {
			t.Fatalf("the input's pods were reordered: %s at %d, was %s", p.Name, i, order[i])
		}
		if !equality.Semantic.DeepEqual(p, before.pods[i]) {
			t.Fatalf("pod %s changed", p.Name)
		}
	}
	for i, n := range in.Nodes {
		if !equality.Semantic.DeepEqual(n.Allocatable, before.nodes[i].Allocatable) || len(n.Pods) != len(before.nodes[i].Pods) {
			t.Fatalf("node %s changed", n.Name)
		}
	}
	if !equality.Semantic.DeepEqual(in.NodePools[0].NodePool, before.np) {
		t.Fatal("the NodePool changed")
	}
	for i, it := range in.NodePools[0].InstanceTypes {
		if !reflect.DeepEqual(it.Offerings, before.types[i].Offerings) {
			t.Fatalf("the offerings of %s changed", it.Name)
		}
	}
}

func TestPodOrderDoesNotChangeTheDecision(t *testing.T) {
	want := summary(solve(t, contractInput()))
	for seed := range 5 {
		in := contractInput()
		rng := rand.New(rand.NewPCG(uint64(seed), 3))
		rng.Shuffle(len(in.Pods), func(i, j int) { in.Pods[i], in.Pods[j] = in.Pods[j], in.Pods[i] })
		if got := summary(solve(t, in)); got != want {
			t.Fatalf("shuffle %d changed the decision:\n%s\nwant\n%s", seed, got, want)
		}
	}
}

func TestPreparedSolvesOnce(t *testing.T) {
	pr, err := Prepare(contractInput())
	if err != nil {
		t.Fatal(err)
	}
	zones := pr.EffectiveZones()
	if zones["z-b"] != 1 {
		t.Errorf("effective zones %v, want the pinned pod in z-b", zones)
	}
	if _, err := pr.Solve(); err != nil {
		t.Fatal(err)
	}
	if _, err := pr.Solve(); err == nil || !strings.Contains(err.Error(), "solves once") {
		t.Fatalf("a second Solve: %v, want an error", err)
	}
	// Preparing and solving gives what Solve gives.
	pr2, _ := Prepare(contractInput())
	a, _ := pr2.Solve()
	b := solve(t, contractInput())
	if summary(a) != summary(b) {
		t.Fatal("Prepare then Solve differs from Solve")
	}
}

func TestProgressCountsEveryPod(t *testing.T) {
	in := contractInput()
	var seen []int
	in.Progress = func(left int) { seen = append(seen, left) }
	solve(t, in)
	if len(seen) == 0 || seen[len(seen)-1] != 0 {
		t.Fatalf("progress %v, want it to end at 0", seen)
	}
	for i := 1; i < len(seen); i++ {
		if seen[i] > seen[i-1] {
			t.Fatalf("progress went up: %v", seen)
		}
	}
	if seen[0] > len(in.Pods) {
		t.Fatalf("progress starts at %d for %d pods", seen[0], len(in.Pods))
	}
}

// Packing (pods with requests only) must honour what first fit does: the same pods with a
// trivially satisfied constraint, which turns packing off for them, cost no less.
func TestPackingIsNoWorseThanFirstFit(t *testing.T) {
	for _, n := range []int{10, 50, 200} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			var packable, firstFit []*corev1.Pod
			sizes := []struct{ cpu, mem string }{{"250m", "512Mi"}, {"1", "1Gi"}, {"500m", "3Gi"}, {"2", "2Gi"}}
			for i := range n {
				sz := sizes[i%len(sizes)]
				packable = append(packable, pod(fmt.Sprintf("p-%d", i), sz.cpu, sz.mem))
				firstFit = append(firstFit, pod(fmt.Sprintf("p-%d", i), sz.cpu, sz.mem, requireAll(expr("example.com/none", corev1.NodeSelectorOpDoesNotExist))))
			}
			packed := solve(t, &Input{Pods: packable, NodePools: pools(nodePool("default"))})
			fitted := solve(t, &Input{Pods: firstFit, NodePools: pools(nodePool("default"))})
			expectPlaced(t, packed)
			expectPlaced(t, fitted)
			if packed.PricePerHour() > fitted.PricePerHour()*1.02 {
				t.Fatalf("packed $%.3f, first fit $%.3f", packed.PricePerHour(), fitted.PricePerHour())
			}
			if packed.PricePerHour() < packed.LowerBoundPerHour-1e-9 {
				t.Fatalf("$%.3f below the lower bound $%.3f", packed.PricePerHour(), packed.LowerBoundPerHour)
			}
		})
	}
}

// Packing fills existing nodes first, as first fit does.
func TestPackingUsesExistingNodesFirst(t *testing.T) {
	r := solve(t, &Input{Pods: pods("p", 10, "500m", "512Mi"), NodePools: pools(nodePool("default")),
		Nodes: []*scheduling.Node{node("n1", "z-a", "2", "4Gi"), node("n2", "z-b", "1", "2Gi")}})
	expectPlaced(t, r)
	if got := len(r.Existing["n1"]) + len(r.Existing["n2"]); got != 6 {
		t.Fatalf("%d pods on the existing nodes, want 6 (4 on n1, 2 on n2): %v", got, r.Existing)
	}
	placed := 0
	for _, c := range r.NodeClaims {
		placed += len(c.Pods)
	}
	if placed != 4 {
		t.Fatalf("%d on new NodeClaims, want 4", placed)
	}
}

// Packing respects NodePool limits and weights.
func TestPackingRespectsLimitsAndWeights(t *testing.T) {
	capped := &NodePool{NodePool: weighted("capped", 90, limited("cpu", "8")), InstanceTypes: testCatalog()}
	open := &NodePool{NodePool: weighted("open", 10), InstanceTypes: testCatalog()}
	r := solve(t, &Input{Pods: pods("p", 40, "500m", "512Mi"), NodePools: []*NodePool{capped, open}})
	expectPlaced(t, r)
	cpu := resource.Quantity{}
	for _, c := range r.NodeClaims {
		if c.NodePool == "capped" {
			cpu.Add(c.InstanceType.Capacity[corev1.ResourceCPU])
		}
	}
	if cpu.Cmp(resource.MustParse("8")) > 0 {
		t.Fatalf("capped launches %s cpu against a limit of 8", cpu.String())
	}
	if got := byPool(r); got["capped"] == 0 || got["open"] == 0 {
		t.Fatalf("pods per pool %v: want capped used to its limit, the rest on open", got)
	}
}

// The cost of a decision: PricePerHour sums its NodeClaims' offerings, and the lower bound
// never exceeds it.
func TestPricePerHourAndLowerBound(t *testing.T) {
	r := solve(t, contractInput())
	total := 0.0
	for _, c := range r.NodeClaims {
		total += c.Offering.Price
	}
	if diff := r.PricePerHour() - total; diff > 1e-9 || diff < -1e-9 {
		t.Fatalf("PricePerHour %.4f, offerings sum %.4f", r.PricePerHour(), total)
	}
	if r.LowerBoundPerHour <= 0 || r.LowerBoundPerHour > r.PricePerHour()+1e-9 {
		t.Fatalf("lower bound %.4f against %.4f", r.LowerBoundPerHour, r.PricePerHour())
	}
	empty := solve(t, &Input{NodePools: pools(nodePool("default"))})
	if empty.PricePerHour() != 0 || empty.LowerBoundPerHour != 0 || len(empty.NodeClaims) != 0 {
		t.Fatalf("no pods: %+v", empty)
	}
}

// Requests are reported for every pending pod, as counted (Result.Requests).
func TestResultRequests(t *testing.T) {
	in := contractInput()
	r := solve(t, in)
	for _, p := range in.Pods {
		got, ok := r.Requests[p]
		if !ok {
			t.Fatalf("no requests for %s", p.Name)
		}
		want := scheduling.PodRequests(p)
		if !equality.Semantic.DeepEqual(got, want) {
			t.Fatalf("%s: %v, want %v", p.Name, got, want)
		}
	}
}

// A catalog shared by several solves (the planner's retries) gives each the decision it
// would make alone: prepared types and nodes are reused, never their per-solve state (the
// reservations' room, what the nodes' pods leave free).
func TestCatalogGivesTheSameSolves(t *testing.T) {
	types := []*cloudprovider.InstanceType{withReservation(itype("m5.large", "amd64", 2, 8, 0.096), "cr-1", 2), itype("m5.xlarge", "amd64", 4, 16, 0.192),
		itype("c5.large", "amd64", 2, 4, 0.085)}
	np := &NodePool{NodePool: nodePool("default", func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Requirements[0].Values = []string{karpv1.CapacityTypeOnDemand, karpv1.CapacityTypeReserved}
	}), InstanceTypes: types}
	nodes := []*scheduling.Node{node("n1", "z-a", "2", "4Gi", func(n *scheduling.Node) { n.Pods = []*corev1.Pod{pod("old", "1500m", "1Gi")} })}
	input := func(n int, c *Catalog) *Input {
		return &Input{Pods: pods("w", n, "1500m", "2Gi"), NodePools: []*NodePool{np}, Nodes: nodes, Catalog: c}
	}
	cat := NewCatalog()
	for round, n := range []int{3, 5, 1, 4} {
		alone := solve(t, input(n, nil))
		shared := solve(t, input(n, cat))
		if a, b := summary(alone), summary(shared); a != b {
			t.Fatalf("round %d (%d pods): with the catalog\n%s\nalone\n%s", round, n, b, a)
		}
		reserved := 0
		for _, c := range shared.NodeClaims {
			if c.Offering.ReservationID != "" {
				reserved++
			}
		}
		if reserved != min(n, 2) {
			t.Fatalf("round %d: %d NodeClaims in the reservation of 2 for %d pods", round, reserved, n)
		}
	}
	if len(cat.types) != len(types) || len(cat.nodes) != len(nodes) {
		t.Fatalf("catalog holds %d types and %d nodes, want %d and %d", len(cat.types), len(cat.nodes), len(types), len(nodes))
	}
	// Freed reservations change what a type offers: such a solve prepares its own.
	in := input(3, cat)
	in.FreedReservations = map[string]int{"cr-1": 1}
	freed := solve(t, in)
	in2 := input(3, nil)
	in2.FreedReservations = map[string]int{"cr-1": 1}
	if a, b := summary(freed), summary(solve(t, in2)); a != b {
		t.Fatalf("freed reservations with the catalog\n%s\nalone\n%s", a, b)
	}
	// A node catalog keeps nodes, not types.
	nc := NewNodeCatalog()
	solve(t, input(2, nc))
	if nc.types != nil || len(nc.nodes) != 1 {
		t.Fatalf("node catalog: %d types, %d nodes", len(nc.types), len(nc.nodes))
	}
}

// A pod whose selector does not parse (karpenterctl reads manifests the API server never
// validated) stays pending with why; the rest of the batch is placed.
func TestAnInvalidSelectorHoldsOnlyItsPod(t *testing.T) {
	bad := pod("bad", "1", "1Gi", func(p *corev1.Pod) {
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: karpv1.LabelTopologyZone, WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near", Values: []string{"x"}}}}}}
	})
	r := solve(t, &Input{Pods: append(pods("good", 3, "1", "1Gi"), bad), NodePools: pools(nodePool("default"))})
	if len(r.Unschedulable) != 1 || r.Unschedulable[0].Pod != bad || !strings.Contains(r.Unschedulable[0].Reason, "do not parse") {
		t.Fatalf("unschedulable %+v, want only the bad pod, with why", r.Unschedulable)
	}
	placed := 0
	for _, c := range r.NodeClaims {
		placed += len(c.Pods)
	}
	if placed != 3 {
		t.Fatalf("%d pods placed, want the 3 good ones", placed)
	}
	if _, ok := r.Requests[bad]; !ok {
		t.Fatal("the bad pod's requests are not reported")
	}
}

// A NodeClaim offers at most MaxInstanceTypes types, the cheapest, whatever the catalog's
// size; the priced type is among them.
func TestMaxInstanceTypes(t *testing.T) {
	var types []*cloudprovider.InstanceType
	for i := range 3 * MaxInstanceTypes {
		types = append(types, itype(fmt.Sprintf("t%03d.large", i), "amd64", 2, 8, 0.05+0.001*float64(i)))
	}
	r := solve(t, &Input{Pods: []*corev1.Pod{pod("w", "1", "1Gi")}, NodePools: []*NodePool{{NodePool: nodePool("default"), InstanceTypes: types}}})
	expectPlaced(t, r)
	c := r.NodeClaims[0]
	if len(c.InstanceTypes) != MaxInstanceTypes {
		t.Fatalf("%d types offered, want %d", len(c.InstanceTypes), MaxInstanceTypes)
	}
	for i, it := range c.InstanceTypes {
		if want := fmt.Sprintf("t%03d.large", i); it.Name != want {
			t.Fatalf("type %d is %s, want %s (the cheapest first)", i, it.Name, want)
		}
	}
}

// A request cache handed in (the snapshot's) is used and filled for pods it did not know.
func TestRequestCacheIsShared(t *testing.T) {
	cache := scheduling.NewPodRequestCache()
	known := pod("known", "1", "1Gi")
	cache.Of(known)
	fresh := pod("fresh", "2", "2Gi")
	r := solve(t, &Input{Pods: []*corev1.Pod{known, fresh}, NodePools: pools(nodePool("default")), Requests: cache})
	expectPlaced(t, r)
	if got := cache.Of(fresh); got.Cpu().MilliValue() != 2000 {
		t.Fatalf("cache for the fresh pod: %v", got)
	}
	if got := r.Requests[known]; got.Cpu().MilliValue() != 1000 {
		t.Fatalf("requests of the known pod: %v", got)
	}
}

// Policies.Apply sets both scheduling policies on an input and returns it.
func TestPoliciesApply(t *testing.T) {
	in := &Input{}
	if out := (Policies{IgnorePreferences: true, MinValuesBestEffort: true}).Apply(in); out != in || !in.IgnorePreferences || !in.MinValuesBestEffort {
		t.Fatalf("apply: %+v", in)
	}
	if (Policies{}).Apply(in); in.IgnorePreferences || in.MinValuesBestEffort {
		t.Fatalf("the zero Policies must clear them: %+v", in)
	}
}

// A NodeClaim's pods resource counts its pods and the DaemonSets' none: the pods limit of a
// type holds exactly that many.
func TestPodsResourceCountsPodsOnly(t *testing.T) {
	types := []*cloudprovider.InstanceType{itype("m5.large", "amd64", 2, 8, 0.096)}
	types[0].Capacity[corev1.ResourcePods] = resource.MustParse("3")
	np := &NodePool{NodePool: nodePool("default"), InstanceTypes: types,
		DaemonSetOverhead: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}
	r := solve(t, &Input{Pods: pods("w", 6, "100m", "128Mi"), NodePools: []*NodePool{np}})
	expectPlaced(t, r)
	if len(r.NodeClaims) != 2 {
		t.Fatalf("%d NodeClaims for 6 pods at 3 a node, want 2", len(r.NodeClaims))
	}
	for _, c := range r.NodeClaims {
		if n := c.Requests[corev1.ResourcePods]; n.Value() != int64(len(c.Pods)) {
			t.Fatalf("pods resource %s for %d pods", n.String(), len(c.Pods))
		}
	}
}

// Unschedulable pods are reported sorted by namespace and name, whatever order they came in.
func TestUnschedulableOrder(t *testing.T) {
	var ps []*corev1.Pod
	for _, n := range []string{"zeta", "alpha", "mu"} {
		for _, ns := range []string{"b", "a"} {
			ps = append(ps, pod(n, "100", "1Gi", func(p *corev1.Pod) { p.Namespace = ns }))
		}
	}
	r := solve(t, &Input{Pods: ps, NodePools: pools(nodePool("default"))})
	var got []string
	for _, u := range r.Unschedulable {
		got = append(got, PodKey(u.Pod))
	}
	want := []string{"a/alpha", "a/mu", "a/zeta", "b/alpha", "b/mu", "b/zeta"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("unschedulable %v, want %v", got, want)
	}
}

// NodeClaimFor marks a NodeClaim whose types a NodeOverlay changed, as upstream's do.
func TestNodeClaimForOverlays(t *testing.T) {
	types := testCatalog()
	for _, it := range types {
		it.PriceOverlaid = it.Name == "m6g.large"
		it.CapacityOverlaid = it.Name == "c5.large"
	}
	np := nodePool("default")
	r := solve(t, &Input{Pods: []*corev1.Pod{pod("w", "1", "1Gi")}, NodePools: []*NodePool{{NodePool: np, InstanceTypes: types}}})
	expectPlaced(t, r)
	nc := NodeClaimFor(np, r.NodeClaims[0])
	for _, key := range []string{karpv1alpha1.PriceOverlayAppliedAnnotationKey, karpv1alpha1.CapacityOverlayAppliedAnnotationKey} {
		if nc.Annotations[key] != "true" {
			t.Errorf("annotation %s = %q, want true", key, nc.Annotations[key])
		}
	}
}
