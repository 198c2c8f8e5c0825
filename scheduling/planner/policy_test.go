package planner

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/cloudprovider/catalog"
	"github.com/karpenter-policy/karpenter/policies"
	"github.com/karpenter-policy/karpenter/scheduling"
	"github.com/karpenter-policy/karpenter/scheduling/solver"
	"github.com/karpenter-policy/karpenter/test"
)

var now = time.Date(2026, 11, 16, 12, 0, 0, 0, time.UTC)

func pods(ns, name string, n int, cpu, mem string, f ...func(*corev1.Pod)) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range n {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%d", name, i)},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}}}}}
		for _, fn := range f {
			fn(p)
		}
		out = append(out, p)
	}
	return out
}

func pool() *solver.NodePool {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
		{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"spot", "on-demand"}},
		{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
	}
	return &solver.NodePool{NodePool: np, InstanceTypes: catalog.Embedded().ForProvider()}
}

func budget(ns, hourly string, f ...func(*policyv1.CapacityBudget)) *policyv1.CapacityBudget {
	m := policyv1.Money(hourly)
	b := &policyv1.CapacityBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"},
		Spec: policyv1.CapacityBudgetSpec{Limits: &policyv1.BudgetLimits{HourlyCost: &m}, Enforcement: policyv1.EnforcementDeny}}
	for _, fn := range f {
		fn(b)
	}
	return b
}

func planner(t *testing.T, budgets ...*policyv1.CapacityBudget) *Planner {
	t.Helper()
	e, err := policies.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	p := &Planner{Engine: e, Namespaces: map[string]policies.Namespace{}, Budgets: map[string]*policyv1.CapacityBudget{}, Now: now}
	for _, b := range budgets {
		p.Budgets[b.Namespace] = b
	}
	return p
}

func solve(t *testing.T, p *Planner, in *solver.Input) *Outcome {
	t.Helper()
	out, err := p.Solve(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// attributed sums, per namespace, the cost the new NodeClaims attribute to its pods.
func attributed(res *solver.Result) map[string]float64 {
	out := map[string]float64{}
	for _, c := range res.NodeClaims {
		for _, p := range c.Pods {
			cost, _ := sizes{}.cost(p, c.Offering.Price, c.InstanceType.Allocatable())
			out[p.Namespace] += cost
		}
	}
	return out
}

func TestBudgetHoldsBackWhatWouldOverrun(t *testing.T) {
	p := planner(t, budget("team-a", "0.20"))
	in := &solver.Input{Pods: append(pods("team-a", "web", 40, "1", "2Gi"), pods("team-b", "api", 10, "1", "2Gi")...), NodePools: []*solver.NodePool{pool()}}
	out := solve(t, p, in)
	spent := attributed(out.Result)
	if spent["team-a"] > 0.205 {
		t.Errorf("team-a attributed %.4f/hour, over its 0.20 limit", spent["team-a"])
	}
	// Launch decisions charge the idle room of the namespace's new nodes too (its held pods
	// may take it), so the attributed run-rate ends below the limit, but not far.
	if spent["team-a"] < 0.10 {
		t.Errorf("team-a attributed only %.4f/hour of 0.20: the budget should be used", spent["team-a"])
	}
	ns := out.Namespaces["team-a"]
	if len(ns.Blocked) == 0 || len(ns.Blocked) == 40 {
		t.Fatalf("some, not all, team-a pods are held back: %d", len(ns.Blocked))
	}
	msg := ns.Blocked[0].Violation.Message
	if !strings.HasPrefix(msg, "CapacityBudget team-a/default: hourly cost ") || !strings.Contains(msg, " would exceed 0.20 (hourlyCost 0.20)") {
		t.Errorf("message %q", msg)
	}
	if len(out.Namespaces["team-b"].Blocked) != 0 {
		t.Error("team-b has no budget")
	}
	unsched := map[string]string{}
	for _, u := range out.Result.Unschedulable {
		unsched[solver.PodKey(u.Pod)] = u.Reason
	}
	if unsched[solver.PodKey(ns.Blocked[0].Pod)] != msg {
		t.Error("blocked pods are listed as unschedulable with the violation")
	}
	if got := ns.PricePerHour(); got > 0.205 {
		t.Errorf("run-rate after the batch %.4f", got)
	}
}

func TestBudgetCountsWhatIsAlreadyRunning(t *testing.T) {
	p := planner(t, budget("team-a", "1.00"))
	// A node running team-a pods worth most of the budget, and one in flight.
	it := pool().InstanceTypes[0]
	for _, x := range pool().InstanceTypes {
		if x.Name == "m6i.4xlarge" {
			it = x
		}
	}
	node := func(name string, inFlight bool, n int) *scheduling.Node {
		return &scheduling.Node{Name: name, InFlight: inFlight, Allocatable: it.Allocatable(), Pods: pods("team-a", name, n, "3", "12Gi"),
			Labels: map[string]string{corev1.LabelInstanceTypeStable: it.Name, karpv1.CapacityTypeLabelKey: "on-demand", corev1.LabelTopologyZone: "us-east-1a"}}
	}
	nodes := []*scheduling.Node{node("running", false, 2), node("launching", true, 2)}
	before := UsageOf(nodes, NewPriceBook(pool().InstanceTypes))["team-a"]
	if before.HourlyCost <= 0 || before.InFlightHourlyCost != before.HourlyCost {
		t.Fatalf("usage %+v", before)
	}
	out := solve(t, p, &solver.Input{Pods: pods("team-a", "web", 40, "1", "2Gi"), NodePools: []*solver.NodePool{pool()}, Nodes: nodes})
	if len(out.Blocked) == 0 {
		t.Error("40 more pods do not fit what is left of the budget")
	}
	// The nodes' idle room counts as committed: the namespace's pending pods may take it
	// whatever the budget says. Two m6i.4xlarge at $0.768/hour leave nothing of $1.00.
	if before.IdleHourlyCost <= 0 || before.HourlyCost+before.InFlightHourlyCost+before.IdleHourlyCost < 1 {
		t.Fatalf("usage %+v", before)
	}
	if len(out.Result.NodeClaims) != 0 || len(out.Blocked) != 40 {
		t.Errorf("a namespace at its limit launches nothing: %d NodeClaims, %d of 40 pods held", len(out.Result.NodeClaims), len(out.Blocked))
	}
}

func TestNamespaceAtItsLimitLaunchesNothing(t *testing.T) {
	p := planner(t, budget("team-a", "0.01"))
	it := pool().InstanceTypes[0]
	nodes := []*scheduling.Node{{Name: "n", Allocatable: it.Allocatable(), Pods: pods("team-a", "old", 1, "1", "1Gi"),
		Labels: map[string]string{corev1.LabelInstanceTypeStable: it.Name, karpv1.CapacityTypeLabelKey: "on-demand"}}}
	nodes[0].Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi"), corev1.ResourcePods: resource.MustParse("1")}
	out := solve(t, p, &solver.Input{Pods: pods("team-a", "web", 3, "1", "2Gi"), NodePools: []*solver.NodePool{pool()}, Nodes: nodes})
	if len(out.Result.NodeClaims) != 0 || len(out.Blocked) != 3 {
		t.Fatalf("claims %d, blocked %d", len(out.Result.NodeClaims), len(out.Blocked))
	}
	if m := out.Blocked[0].Violation.Message; !strings.Contains(m, "has reached the limit 0.01") {
		t.Errorf("message %q", m)
	}
}

func TestSpotShareEndsWithinBounds(t *testing.T) {
	for _, tc := range []struct{ min, max int32 }{{50, 80}, {0, 30}, {100, 100}, {60, 100}} {
		b := budget("team-a", "100", func(b *policyv1.CapacityBudget) {
			b.Spec.Spot = &policyv1.SpotShare{MinPercent: &tc.min, MaxPercent: &tc.max}
		})
		out := solve(t, planner(t, b), &solver.Input{Pods: append(pods("team-a", "web", 30, "1", "2Gi"), pods("team-a", "big", 5, "4", "8Gi")...),
			NodePools: []*solver.NodePool{pool()}})
		var spot, all float64
		for _, c := range out.Result.NodeClaims {
			for _, p := range c.Pods {
				r := scheduling.PodRequests(p)
				cpu := float64(r.Cpu().MilliValue()) / 1000
				all += cpu
				if c.Offering.CapacityType == "spot" {
					spot += cpu
				}
			}
		}
		share := 100 * spot / all
		if all != 50 || share < float64(tc.min) || share > float64(tc.max) {
			t.Errorf("[%d, %d]: Spot share %.1f%% of %.0f vCPU", tc.min, tc.max, share, all)
		}
		// Even when kube-scheduler binds on-demand pods into the Spot nodes' spare room.
		h := newHook(nil)
		for _, c := range out.Result.NodeClaims {
			for _, p := range c.Pods {
				h.capacityType[p] = c.Offering.CapacityType
			}
		}
		if worst := 100 * (spot + spotDrift(out.Result, out.Namespaces, sizes{})["team-a"]) / all; tc.max < 100 && worst > float64(tc.max)+0.01 {
			t.Errorf("[%d, %d]: kube-scheduler filling Spot's spare room would make it %.1f%%", tc.min, tc.max, worst)
		}
		if got := out.Namespaces["team-a"].After().SpotShare(out.Namespaces["team-a"].Budget.Spot).Percent; got != share {
			t.Errorf("reported share %.1f, placed %.1f", got, share)
		}
	}
}

func TestSpotShareAboveTheOnDemandBase(t *testing.T) {
	base := resource.MustParse("10")
	b := budget("team-a", "100", func(b *policyv1.CapacityBudget) {
		b.Spec.Spot = &policyv1.SpotShare{MinPercent: ptr(int32(100)), OnDemandBaseCPU: &base}
	})
	out := solve(t, planner(t, b), &solver.Input{Pods: pods("team-a", "web", 30, "1", "2Gi"), NodePools: []*solver.NodePool{pool()}})
	u := out.Namespaces["team-a"].After()
	if u.OnDemandCPU != 10 || u.SpotCPU != 20 {
		t.Errorf("want the 10-vCPU base on-demand and the rest Spot, got %+v", u)
	}
}

func ptr[T any](v T) *T { return &v }

func TestCapacityPolicyDeniesGPUFamiliesInDev(t *testing.T) {
	p := planner(t)
	p.Namespaces["ml-dev"] = policies.Namespace{Name: "ml-dev", Labels: map[string]string{"tier": "dev"}}
	p.Namespaces["ml-prod"] = policies.Namespace{Name: "ml-prod", Labels: map[string]string{"tier": "prod"}}
	probs := p.Engine.SetPolicies([]policyv1.CapacityPolicy{*test.NoGPUInDev()})
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	gpu := func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = resource.MustParse("1")
	}
	np := pool()
	np.NodePool.Spec.Template.Spec.Requirements = np.NodePool.Spec.Template.Spec.Requirements[:1]
	out := solve(t, p, &solver.Input{Pods: append(pods("ml-dev", "train", 1, "4", "16Gi", gpu), pods("ml-prod", "train", 1, "4", "16Gi", gpu)...),
		NodePools: []*solver.NodePool{np}})
	if len(out.Result.NodeClaims) != 1 || out.Result.NodeClaims[0].Pods[0].Namespace != "ml-prod" {
		t.Fatalf("only ml-prod gets a GPU node: %d claims", len(out.Result.NodeClaims))
	}
	if len(out.Result.Unschedulable) != 1 || !strings.Contains(out.Result.Unschedulable[0].Reason, "CapacityPolicy no-gpu-in-dev") {
		t.Errorf("unschedulable %+v", out.Result.Unschedulable)
	}
}

func TestLaunchGateWarnsUnderWarnEnforcement(t *testing.T) {
	// Warn enforcement skips the trim; the gate then reports the overrun as a warning and
	// lets the NodeClaims through.
	b := budget("team-a", "0.10", func(b *policyv1.CapacityBudget) { b.Spec.Enforcement = policyv1.EnforcementWarn })
	out := solve(t, planner(t, b), &solver.Input{Pods: pods("team-a", "web", 20, "1", "2Gi"), NodePools: []*solver.NodePool{pool()}})
	if len(out.Blocked) != 0 || len(out.Result.NodeClaims) == 0 {
		t.Fatalf("Warn blocks nothing: blocked %d", len(out.Blocked))
	}
	found := false
	for _, w := range out.Warnings {
		found = found || strings.Contains(w.Message, "would exceed 0.10")
	}
	if !found {
		t.Errorf("the launch gate warns of the overrun: %+v", out.Warnings)
	}
}

// kube-scheduler binds held pods into the spare room of the nodes launched for the pods a
// budget lets through; the budget must hold even then.
func TestBudgetHoldsWhenHeldPodsFillSpareRoom(t *testing.T) {
	np := pool()
	np.NodePool.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
		{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"spot"}},
		{Key: karpv1.LabelInstanceCategory, Operator: corev1.NodeSelectorOpIn, Values: []string{"c", "m", "r"}},
	}
	for _, limit := range []string{"0.02", "0.03", "0.04", "0.05", "0.07", "0.08", "0.11", "0.13"} {
		p := planner(t, budget("team-b", limit))
		out := solve(t, p, &solver.Input{Pods: pods("team-b", "batch", 24, "500m", "1Gi"), NodePools: []*solver.NodePool{np}})
		z := sizes{}
		total := 0.0
		held := append([]Blocked(nil), out.Namespaces["team-b"].Blocked...)
		for _, c := range out.Result.NodeClaims {
			alloc := c.InstanceType.Allocatable()
			cpu := float64(alloc.Cpu().MilliValue()-c.Requests.Cpu().MilliValue()) / 1000
			mem := float64(alloc.Memory().Value() - c.Requests.Memory().Value())
			for _, pod := range c.Pods {
				cost, _ := z.cost(pod, c.Offering.Price, alloc)
				total += cost
			}
			for len(held) > 0 {
				pc, pm := z.of(held[0].Pod)
				if pc > cpu || pm > mem {
					break
				}
				cost, _ := z.cost(held[0].Pod, c.Offering.Price, alloc)
				total, cpu, mem, held = total+cost, cpu-pc, mem-pm, held[1:]
			}
		}
		l, _ := strconv.ParseFloat(limit, 64)
		if total > l+0.005 {
			t.Errorf("limit %s: with held pods in the spare room the namespace runs at %.4f", limit, total)
		}
		if len(out.Result.NodeClaims) == 0 && l >= 0.05 {
			t.Errorf("limit %s: nothing launched", limit)
		}
	}
}

func catalogType(t *testing.T, name string) *cloudprovider.InstanceType {
	t.Helper()
	for _, it := range catalog.Embedded().ForProvider() {
		if it.Name == name {
			return it
		}
	}
	t.Fatalf("no %s in the embedded catalog", name)
	return nil
}

func claimOn(t *testing.T, it *cloudprovider.InstanceType, capacityType string, ps []*corev1.Pod) *solver.NodeClaim {
	t.Helper()
	var off cloudprovider.Offering
	for _, o := range it.Offerings {
		if o.CapacityType == capacityType && o.Available {
			off = o
			break
		}
	}
	req := corev1.ResourceList{}
	for _, p := range ps {
		scheduling.AddResources(req, scheduling.PodRequests(p))
	}
	return &solver.NodeClaim{NodePool: "default", InstanceType: it, InstanceTypes: []*cloudprovider.InstanceType{it}, Offering: off, Pods: ps, Requests: req,
		Requirements: scheduling.Requirements{karpv1.CapacityTypeLabelKey: scheduling.NewRequirement(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, capacityType)}}
}

// kube-scheduler would move the on-demand pods into the Spot node's spare room, passing the
// namespace's 60% maximum: the Spot NodeClaim, which holds the namespace's pods alone, is
// launched on-demand instead; a NodeClaim with a pod pinned to Spot is not.
func TestDriftFlipsDedicatedSpotNodeClaims(t *testing.T) {
	big := catalogType(t, "m6i.2xlarge")
	spotPods, odPods := pods("team-a", "s", 2, "1", "2Gi"), pods("team-a", "o", 2, "1", "2Gi")
	ns := map[string]*Namespace{"team-a": {Budget: &policies.BudgetInForce{Enforcement: policyv1.EnforcementDeny,
		Spot: policies.SpotBounds{MinPercent: 0, MaxPercent: 60}}}}
	for _, pinned := range []bool{false, true} {
		res := &solver.Result{NodeClaims: []*solver.NodeClaim{claimOn(t, big, "spot", spotPods), claimOn(t, catalogType(t, "m6i.large"), "on-demand", odPods)}}
		h := newHook(nil)
		for _, p := range spotPods {
			h.capacityType[p] = "spot"
		}
		for _, p := range odPods {
			h.capacityType[p] = "on-demand"
		}
		if pinned {
			spotPods[0].Spec.NodeSelector = map[string]string{karpv1.CapacityTypeLabelKey: "spot"}
		}
		if d := spotDrift(res, ns, sizes{}); d["team-a"] != 2 {
			t.Fatalf("drift %v, want the two on-demand vCPU", d)
		}
		ok := spotByClaim(res, h, ns, sizes{})
		c := res.NodeClaims[0]
		if pinned {
			if ok || c.Offering.CapacityType != "spot" {
				t.Errorf("a NodeClaim with a pod pinned to Spot was flipped")
			}
			continue
		}
		if !ok || c.Offering.CapacityType != "on-demand" || !c.Requirements[karpv1.CapacityTypeLabelKey].Has("on-demand") ||
			c.Requirements[karpv1.CapacityTypeLabelKey].Has("spot") || h.capacityType[spotPods[0]] != "on-demand" {
			t.Errorf("flip: ok %v, offering %+v, requirements %v", ok, c.Offering, c.Requirements[karpv1.CapacityTypeLabelKey])
		}
	}
}

// Spot shares by NodeClaim: team-a shares one Spot NodeClaim with team-b and has another to
// itself, of the same type. At most 50% Spot for team-a, the one to itself is launched
// on-demand: the same relief for the same price, and no team-b pod moves. At most 0%, the
// shared one must go too, which team-b allows at a minimum of 50% and refuses at 100%: then
// the planner gives up by NodeClaim (and assigns by pod). The pods' memory keeps
// kube-scheduler from moving team-a's on-demand pods into the spare Spot room.
func TestSpotByClaimFlipsTheCheapestRelief(t *testing.T) {
	it := catalogType(t, "m6i.2xlarge")
	for _, tc := range []struct {
		aMax, bMin int32
		ok         bool
		flipped    []int
	}{{50, 50, true, []int{1}}, {50, 100, true, []int{1}}, {0, 50, true, []int{0, 1}}, {0, 100, false, []int{1}}} {
		res := &solver.Result{NodeClaims: []*solver.NodeClaim{
			claimOn(t, it, "spot", append(pods("team-a", "a1", 2, "1", "12Gi"), pods("team-b", "b1", 2, "1", "2Gi")...)),
			claimOn(t, it, "spot", pods("team-a", "a2", 2, "1", "12Gi")),
			claimOn(t, it, "spot", pods("team-b", "b2", 4, "1", "6Gi")),
		}}
		ns := map[string]*Namespace{
			"team-a": {Budget: &policies.BudgetInForce{Enforcement: policyv1.EnforcementDeny, Spot: policies.SpotBounds{MaxPercent: float64(tc.aMax)}}},
			"team-b": {Budget: &policies.BudgetInForce{Enforcement: policyv1.EnforcementDeny, Spot: policies.SpotBounds{MinPercent: float64(tc.bMin), MaxPercent: 100}}},
		}
		ok := spotByClaim(res, newHook(nil), ns, sizes{})
		var flipped []int
		for i, c := range res.NodeClaims {
			if c.Offering.CapacityType == "on-demand" {
				flipped = append(flipped, i)
			}
		}
		if ok != tc.ok || !slices.Equal(flipped, tc.flipped) {
			t.Errorf("team-a max %d, team-b min %d: ok %v, flipped %v; want %v, %v", tc.aMax, tc.bMin, ok, flipped, tc.ok, tc.flipped)
		}
	}
}

// A namespace is charged a new NodeClaim's idle room too: its held or later pods may take it.
// One pod on an m6i.2xlarge costs a fraction of the node; a limit between that fraction and
// the node's price gives the NodeClaim up, a limit above the price keeps it.
func TestIdleRoomOfNewNodeClaimsCounts(t *testing.T) {
	big := catalogType(t, "m6i.2xlarge")
	for _, tc := range []struct {
		limit float64
		held  int
	}{{0.10, 1}, {big.Offerings[0].Price * 3, 0}} {
		c := claimOn(t, big, "on-demand", pods("team-a", "web", 1, "1", "2Gi"))
		ns := map[string]*Namespace{"team-a": {Budget: &policies.BudgetInForce{Source: policies.Source{Kind: "CapacityBudget", Namespace: "team-a", Name: "default"},
			Enforcement: policyv1.EnforcementDeny, HasLimit: true, HourlyLimit: tc.limit, LimitReason: "hourlyCost"}}}
		cost, _ := sizes{}.cost(c.Pods[0], c.Offering.Price, big.Allocatable())
		if cost >= 0.10 || c.Offering.Price <= 0.10 {
			t.Fatalf("the pod's share %.4f and the node's price %.4f must straddle 0.10", cost, c.Offering.Price)
		}
		held := (&Planner{}).overBudgetBySpareRoom(&solver.Result{NodeClaims: []*solver.NodeClaim{c}}, ns, sizes{}, nil)
		if len(held) != tc.held {
			t.Errorf("limit %.2f: %d pods held, want %d", tc.limit, len(held), tc.held)
		}
		if tc.held > 0 && len(held) > 0 && !strings.Contains(held[0].Violation.Message, "would exceed 0.10") {
			t.Errorf("message %q", held[0].Violation.Message)
		}
	}
}

// The launch gate drops a NodeClaim that would take a namespace past its limit, counting the
// NodeClaims it let through before, and holds its pods with the budget's message.
func TestLaunchGateDropsTheNodeClaimPastTheLimit(t *testing.T) {
	it := catalogType(t, "m6i.large")
	first, second := claimOn(t, it, "on-demand", pods("team-a", "a", 1, "1", "4Gi")), claimOn(t, it, "on-demand", pods("team-a", "b", 1, "1", "4Gi"))
	p := planner(t, budget("team-a", "0.15"))
	out := &Outcome{Namespaces: map[string]*Namespace{"team-a": {}}}
	res := &solver.Result{NodeClaims: []*solver.NodeClaim{first, second}}
	p.gate(context.Background(), res, out, sizes{})
	if len(res.NodeClaims) != 1 || res.NodeClaims[0] != first {
		t.Fatalf("two m6i.large at $%.3f/hour each pass $0.15: the second must be dropped, kept %d", it.Offerings[0].Price, len(res.NodeClaims))
	}
	if len(out.Blocked) != 1 || out.Blocked[0].Pod != second.Pods[0] || !strings.Contains(out.Blocked[0].Violation.Message, "would exceed 0.15") {
		t.Errorf("blocked %+v", out.Blocked)
	}
}

// A CapacityPolicy that runs out of its evaluation deadline under failurePolicy Fail keeps the
// pods of the namespaces it selects pending, with a violation naming the policy and the
// deadline; a namespace it does not select provisions as usual. Under Ignore both provision.
func TestSlowPolicyFailsOnlyWhatItSelects(t *testing.T) {
	slow := "package karpenter.provisioning\n\ndeny contains \"never\" if {\n\tsome i in numbers.range(1, 5000)\n\tsome j in numbers.range(1, 5000)\n\ti * j == -1\n}\n"
	for _, fp := range []policyv1.FailurePolicy{policyv1.FailurePolicyFail, policyv1.FailurePolicyIgnore} {
		p := planner(t)
		p.Engine.EvalTimeout = 20 * time.Millisecond
		p.Namespaces["dev"] = policies.Namespace{Name: "dev", Labels: map[string]string{"tier": "dev"}}
		p.Namespaces["prod"] = policies.Namespace{Name: "prod", Labels: map[string]string{"tier": "prod"}}
		policy := policyv1.CapacityPolicy{ObjectMeta: metav1.ObjectMeta{Name: "slow", Generation: 1}, Spec: policyv1.CapacityPolicySpec{
			FailurePolicy: fp, NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "dev"}},
			Modules: []policyv1.PolicyModule{{Name: "slow.rego", Rego: slow}}}}
		if probs := p.Engine.SetPolicies([]policyv1.CapacityPolicy{policy}); len(probs) > 0 {
			t.Fatal(probs)
		}
		out := solve(t, p, &solver.Input{Pods: append(pods("dev", "web", 1, "1", "1Gi"), pods("prod", "web", 1, "1", "1Gi")...),
			NodePools: []*solver.NodePool{pool()}})
		var launched []string
		for _, c := range out.Result.NodeClaims {
			for _, pod := range c.Pods {
				launched = append(launched, pod.Namespace)
			}
		}
		slices.Sort(launched)
		switch fp {
		case policyv1.FailurePolicyFail:
			if !slices.Equal(launched, []string{"prod"}) || len(out.Blocked) != 1 || out.Blocked[0].Pod.Namespace != "dev" ||
				!strings.Contains(out.Blocked[0].Violation.Message, "slow") || !strings.Contains(out.Blocked[0].Violation.Message, "deadline") {
				t.Errorf("Fail: launched for %v, blocked %+v", launched, out.Blocked)
			}
		default:
			if !slices.Equal(launched, []string{"dev", "prod"}) || len(out.Errors) == 0 {
				t.Errorf("Ignore: launched for %v, errors %v", launched, out.Errors)
			}
		}
	}
}

// With the CapacityBudget gate, kube-scheduler binds a budgeted namespace's pods only where
// the provisioner lets them, so pods placed on a node with room count against the budget too.
func TestBudgetHoldsPodsPlacedOnNodesWithRoom(t *testing.T) {
	it := catalogType(t, "m6i.4xlarge") // 16 vCPU at $0.768/h: $0.048 per vCPU and 4 GiB
	p := planner(t, budget("team-a", "0.20"))
	nodes := []*scheduling.Node{{Name: "roomy", Allocatable: it.Allocatable(), Pods: pods("team-b", "other", 1, "1", "4Gi"),
		Labels: map[string]string{corev1.LabelInstanceTypeStable: it.Name, karpv1.CapacityTypeLabelKey: "on-demand"}}}
	out := solve(t, p, &solver.Input{Pods: pods("team-a", "web", 10, "1", "4Gi"), NodePools: []*solver.NodePool{pool()}, Nodes: nodes})
	placed := len(out.Result.Existing["roomy"])
	if len(out.Result.NodeClaims) != 0 {
		t.Fatalf("%d NodeClaims for pods that fit the node with room", len(out.Result.NodeClaims))
	}
	// $0.20 buys four pods of $0.048 on the node.
	if placed != 4 || len(out.Blocked) != 6 {
		t.Errorf("%d pods placed on the node with room and %d held, want 4 and 6", placed, len(out.Blocked))
	}
}

// The idle room of a namespace's nodes is committed only as far as kube-scheduler may fill it
// with its pending pods; with the CapacityBudget gate on each of them, not at all.
func TestGatedNamespaceIsNotChargedIdleRoom(t *testing.T) {
	it := catalogType(t, "m6i.4xlarge")
	nodes := func() []*scheduling.Node {
		return []*scheduling.Node{{Name: "running", Allocatable: it.Allocatable(), Pods: pods("team-a", "old", 2, "3", "12Gi"),
			Labels: map[string]string{corev1.LabelInstanceTypeStable: it.Name, karpv1.CapacityTypeLabelKey: "on-demand"}}}
	}
	gated := func(p *corev1.Pod) {
		p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: policyv1.CapacityBudgetGate}}
	}
	// $0.768 node, team-a's two pods use 6 of 16 vCPU: about $0.29 its own, $0.48 idle.
	for _, tc := range []struct {
		name    string
		gate    []func(*corev1.Pod)
		assume  bool
		blocked int
	}{
		// $0.768 committed leaves $0.037: one pod on a NodeClaim of its own no dearer (a Spot
		// m5.large at $0.031), the held pods' retry.
		{"ungated: the idle room is committed, $0.037 is left of $0.80", nil, false, 19},
		{"gated: $0.51 is left", []func(*corev1.Pod){gated}, false, -1},
		{"manifests, as the webhook would gate them", nil, true, -1},
	} {
		p := planner(t, budget("team-a", "0.80"))
		p.AssumeGated = tc.assume
		out := solve(t, p, &solver.Input{Pods: pods("team-a", "web", 20, "1", "4Gi", tc.gate...), NodePools: []*solver.NodePool{pool()}, Nodes: nodes()})
		ns := out.Namespaces["team-a"]
		switch {
		case tc.blocked >= 0 && len(out.Blocked) != tc.blocked:
			t.Errorf("%s: %d of 20 pods held, want %d", tc.name, len(out.Blocked), tc.blocked)
		case tc.blocked < 0 && (len(out.Blocked) == 0 || len(out.Blocked) == 20):
			t.Errorf("%s: %d of 20 pods held, want some", tc.name, len(out.Blocked))
		case ns.PricePerHour() > 0.805:
			t.Errorf("%s: $%.3f/h after the batch, over $0.80", tc.name, ns.PricePerHour())
		}
	}
}
