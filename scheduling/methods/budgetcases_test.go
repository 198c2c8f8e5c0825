package methods

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

// Disruption budgets as a cluster counts them (upstream's "Budgets" cases): which nodes count
// as disrupting, the reasons, percentages of the pool's size, schedules, and what the
// commands of a pass take from them.

func disruptedTaint(n *corev1.Node) {
	n.Spec.Taints = append(n.Spec.Taints, karpv1.DisruptedNoScheduleTaint)
}

func deleting(n *corev1.Node) {
	ts := metav1.NewTime(now.Add(-time.Minute))
	n.DeletionTimestamp = &ts
	n.Finalizers = []string{"karpenter.sh/termination"}
}

func TestBudgetUseCounts(t *testing.T) {
	for name, tc := range map[string]struct {
		budgets   []karpv1.Budget
		nodes     []*corev1.Node
		reason    Reason
		total     int
		consuming int
	}{
		"the default 10% of 10 nodes": {nodes: nodesOf(10, "m5.large", "on-demand"), reason: ReasonEmpty, total: 1},
		"a count":                     {budgets: []karpv1.Budget{budget("3")}, nodes: nodesOf(10, "m5.large", "on-demand"), reason: ReasonDrifted, total: 3},
		"a tainted node consumes": {budgets: []karpv1.Budget{budget("3")}, reason: ReasonUnderutilized, total: 3, consuming: 1,
			nodes: append(nodesOf(4, "m5.large", "on-demand"), node("x", "m5.large", "on-demand", "z-a", disruptedTaint))},
		"a deleting node consumes": {budgets: []karpv1.Budget{budget("3")}, reason: ReasonUnderutilized, total: 3, consuming: 1,
			nodes: append(nodesOf(4, "m5.large", "on-demand"), node("x", "m5.large", "on-demand", "z-a", deleting))},
		"a NotReady node consumes for consolidation": {budgets: []karpv1.Budget{budget("3")}, reason: ReasonUnderutilized, total: 3, consuming: 1,
			nodes: append(nodesOf(4, "m5.large", "on-demand"), node("x", "m5.large", "on-demand", "z-a", notReady))},
		"a NotReady node does not consume for repair": {budgets: []karpv1.Budget{budget("3")}, reason: ReasonUnhealthy, total: 3, consuming: 0,
			nodes: append(nodesOf(4, "m5.large", "on-demand"), node("x", "m5.large", "on-demand", "z-a", notReady))},
		"a percentage of the pool rounds up": {budgets: []karpv1.Budget{budget("25%")}, nodes: nodesOf(5, "m5.large", "on-demand"), reason: ReasonEmpty, total: 2},
		"a budget for another reason":        {budgets: []karpv1.Budget{budget("0", karpv1.DisruptionReasonDrifted)}, nodes: nodesOf(5, "m5.large", "on-demand"), reason: ReasonEmpty, total: 5},
		"an unmanaged node is not counted": {budgets: []karpv1.Budget{budget("50%")}, reason: ReasonEmpty, total: 2,
			nodes: append(nodesOf(4, "m5.large", "on-demand"), node("u", "m5.large", "on-demand", "z-a", unmanaged))},
	} {
		t.Run(name, func(t *testing.T) {
			c := world{pools: pool(withBudgets(tc.budgets...)), nodes: tc.nodes}.cluster()
			total, consuming := BudgetUse(c, "default", tc.reason)
			if total != tc.total || consuming != tc.consuming {
				t.Fatalf("total %d, consuming %d; want %d and %d", total, consuming, tc.total, tc.consuming)
			}
			if got := NewBudgets(c).Allowed("default", tc.reason); got != max(0, tc.total-tc.consuming) {
				t.Fatalf("allowed %d, want %d", got, max(0, tc.total-tc.consuming))
			}
		})
	}
	if total, consuming := BudgetUse(world{}.cluster(), "gone", ReasonEmpty); total != 0 || consuming != 0 {
		t.Fatalf("an unknown pool: %d, %d", total, consuming)
	}
}

// Budget windows (upstream's schedule and duration): a budget of 0 during business hours
// stops disruption then and only then.
func TestBudgetWindows(t *testing.T) {
	// now is Tuesday 2026-12-01 12:00 UTC.
	window := func(schedule string, d time.Duration) karpv1.Budget {
		return karpv1.Budget{Nodes: "0", Schedule: ptr.To(schedule), Duration: &metav1.Duration{Duration: d}}
	}
	for name, tc := range map[string]struct {
		budget karpv1.Budget
		want   string
	}{
		"inside business hours":             {budget: window("0 9 * * 1-5", 8*time.Hour), want: ""},
		"after business hours":              {budget: window("0 9 * * 1-5", 2*time.Hour), want: "delete:a,b"},
		"a weekend window on a weekday":     {budget: window("0 0 * * 6", 48*time.Hour), want: "delete:a,b"},
		"a window that opened a minute ago": {budget: window("59 11 * * *", time.Hour), want: ""},
		"a window that closed a minute ago": {budget: window("0 11 * * *", 59*time.Minute), want: "delete:a,b"},
		"a window for Drifted only":         {budget: karpv1.Budget{Nodes: "0", Schedule: ptr.To("0 0 * * *"), Duration: &metav1.Duration{Duration: 24 * time.Hour}, Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonDrifted}}, want: "delete:a,b"},
	} {
		t.Run(name, func(t *testing.T) {
			w := world{pools: pool(withBudgets(tc.budget, budget("100%"))), nodes: nodesOf(2, "m5.large", "on-demand")}
			if got := strings.Join(commandNames(commands(t, Emptiness{}, w.cluster())), " | "); got != tc.want {
				t.Fatalf("commands %q, want %q", got, tc.want)
			}
		})
	}
}

// Budgets by size: a pool of 20 nodes with a 10% budget disrupts two at a time, 25% five.
func TestBudgetPercentagesOfLargePools(t *testing.T) {
	for _, tc := range []struct {
		nodes int
		pct   string
		want  int
	}{{20, "10%", 2}, {20, "25%", 5}, {7, "10%", 1}, {7, "50%", 4}, {1, "1%", 1}, {3, "0%", 0}, {3, "100%", 3}} {
		t.Run(fmt.Sprintf("%s of %d", tc.pct, tc.nodes), func(t *testing.T) {
			var nodes []*corev1.Node
			for i := range tc.nodes {
				nodes = append(nodes, node(fmt.Sprintf("n%02d", i), "m5.large", "on-demand", "z-a"))
			}
			cmds := commands(t, Emptiness{}, world{pools: pool(withBudgets(budget(tc.pct))), nodes: nodes}.cluster())
			got := 0
			for _, cmd := range cmds {
				got += len(cmd.Candidates)
			}
			if got != tc.want {
				t.Fatalf("%d empty nodes deleted, want %d", got, tc.want)
			}
		})
	}
}

// A pass takes from the budgets what its commands disrupt, for every reason.
func TestPassTakesFromTheBudgets(t *testing.T) {
	w := world{pools: pool(withBudgets(budget("2"))), nodes: nodesOf(4, "m5.large", "on-demand")}
	c := w.cluster()
	b := NewBudgets(c)
	var cands []*Candidate
	for _, cand := range c.Candidates {
		if (Emptiness{}).Qualifies(c, cand) {
			cands = append(cands, cand)
		}
	}
	cmds, err := Emptiness{}.Commands(t.Context(), c, cands, b)
	if err != nil || len(cmds) != 1 || len(cmds[0].Candidates) != 2 {
		t.Fatalf("commands %v (%v), want one of two nodes", commandNames(cmds), err)
	}
	for _, r := range BudgetReasons {
		if got := b.Allowed("default", r); got != 0 {
			t.Errorf("%s: %d allowed after the command took the budget of 2", r, got)
		}
	}
}

// Candidates of two pools: each pool's budget is its own, and its size counts only its nodes.
func TestBudgetsArePerPool(t *testing.T) {
	var nodes []*corev1.Node
	for i := range 10 {
		nodes = append(nodes, node(fmt.Sprintf("a%02d", i), "m5.large", "on-demand", "z-a"))
	}
	for i := range 2 {
		nodes = append(nodes, node(fmt.Sprintf("b%02d", i), "m5.large", "on-demand", "z-a", inPool("batch")))
	}
	w := world{pools: []*karpv1.NodePool{nodePool("default", withBudgets(budget("20%"))), nodePool("batch", withBudgets(budget("50%")))}, nodes: nodes}
	per := map[string]int{}
	for _, cmd := range commands(t, Emptiness{}, w.cluster()) {
		for _, cand := range cmd.Candidates {
			per[cand.NodePoolName()]++
		}
	}
	if per["default"] != 2 || per["batch"] != 1 {
		t.Fatalf("deleted per pool %v, want default 2 (20%% of 10) and batch 1 (50%% of 2)", per)
	}
}

// Budgets for the Unhealthy reason bound repair alone; the others do not.
func TestUnhealthyBudgets(t *testing.T) {
	for name, tc := range map[string]struct {
		budgets []karpv1.Budget
		want    int
	}{
		"the default 10% of 10":           {want: 1},
		"an Unhealthy budget of 3":        {budgets: []karpv1.Budget{budget("3", karpv1.DisruptionReasonUnhealthy), budget("100%")}, want: 3},
		"a Drifted budget of 0 is not it": {budgets: []karpv1.Budget{budget("0", karpv1.DisruptionReasonDrifted), budget("5")}, want: 5},
		"a budget for all reasons":        {budgets: []karpv1.Budget{budget("2")}, want: 2},
	} {
		t.Run(name, func(t *testing.T) {
			c := world{pools: pool(withBudgets(tc.budgets...)), nodes: nodesOf(10, "m5.large", "on-demand")}.cluster()
			if got := NewBudgets(c).Allowed("default", ReasonUnhealthy); got != tc.want {
				t.Fatalf("allowed %d, want %d", got, tc.want)
			}
		})
	}
}
