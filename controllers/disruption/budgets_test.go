package disruption

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/controllers/metrics"
	"github.com/karpenter-policy/karpenter/scheduling/methods"
)

// The budget gauges are upstream's: the budget itself and the nodes consuming it, by NodePool
// and lower-case reason; a NodePool whose budget is 0 for a reason is told so on the NodePool,
// at most once a minute; a NodePool gone leaves no series.
func TestBudgetGaugesAndBlockedPoolEvents(t *testing.T) {
	pool := func(name string, budgets ...karpv1.Budget) *methods.NodePoolState {
		return &methods.NodePoolState{NodePool: &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: karpv1.NodePoolSpec{Disruption: karpv1.Disruption{Budgets: budgets}}}}
	}
	voluntary := []karpv1.DisruptionReason{karpv1.DisruptionReasonDrifted, karpv1.DisruptionReasonEmpty, karpv1.DisruptionReasonUnderutilized}
	snap := func() *methods.Cluster {
		return &methods.Cluster{
			NodePools: map[string]*methods.NodePoolState{
				// Repair may take 2 at once; everything else is frozen.
				"frozen": pool("frozen", karpv1.Budget{Nodes: "0", Reasons: voluntary}, karpv1.Budget{Nodes: "2"}),
				"open":   pool("open", karpv1.Budget{Nodes: "50%"}),
			},
			PoolSizes:  map[string]int{"frozen": 4, "open": 10},
			Disrupting: map[string]int{"frozen": 2, "open": 3},
			NotReady:   map[string]int{"frozen": 1, "open": 1},
			Now:        now,
		}
	}
	clk := clocktesting.NewFakeClock(now)
	rec := &objectRecorder{}
	ctl := NewController(nil, nil, nil, rec, clk, nil, methods.Options{})
	// With repair off, a pool whose budget blocks everything is told so for the voluntary
	// reasons only.
	all := snap()
	all.NodePools["frozen"] = pool("frozen", karpv1.Budget{Nodes: "0"})
	ctl.observe(all)
	if got := rec.take(); len(got) != 3 || slices.ContainsFunc(got, func(e string) bool { return strings.Contains(e, "unhealthy") }) {
		t.Errorf("with repair off: %v; want the three voluntary reasons", got)
	}
	ctl = NewController(nil, nil, nil, rec, clk, nil, methods.Options{NodeRepair: true})
	ctl.observe(snap())

	gauge := func(name, pool, reason string) float64 {
		if name == "allowed" {
			return testutil.ToFloat64(metrics.NodePoolAllowedDisruptions.WithLabelValues(pool, reason))
		}
		return testutil.ToFloat64(metrics.NodePoolNodesConsumingBudgets.WithLabelValues(pool, reason))
	}
	for _, tc := range []struct {
		pool, reason       string
		allowed, consuming float64
	}{
		{"frozen", "drifted", 0, 2},
		{"frozen", "underutilized", 0, 2},
		{"frozen", "unhealthy", 2, 1},
		{"open", "empty", 5, 3},
		{"open", "unhealthy", 5, 2},
	} {
		if got := gauge("allowed", tc.pool, tc.reason); got != tc.allowed {
			t.Errorf("allowed_disruptions{nodepool=%q,reason=%q} = %v, want %v", tc.pool, tc.reason, got, tc.allowed)
		}
		if got := gauge("consuming", tc.pool, tc.reason); got != tc.consuming {
			t.Errorf("nodes_consuming_budgets{nodepool=%q,reason=%q} = %v, want %v", tc.pool, tc.reason, got, tc.consuming)
		}
	}

	want := []string{
		"NodePool/frozen Normal DisruptionBlocked No allowed disruptions for disruption reason drifted due to blocking budget",
		"NodePool/frozen Normal DisruptionBlocked No allowed disruptions for disruption reason empty due to blocking budget",
		"NodePool/frozen Normal DisruptionBlocked No allowed disruptions for disruption reason underutilized due to blocking budget",
	}
	got := rec.take()
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	clk.Step(30 * time.Second)
	ctl.observe(snap())
	if got := rec.take(); len(got) != 0 {
		t.Errorf("told again within a minute: %v", got)
	}
	clk.Step(30 * time.Second)
	ctl.observe(snap())
	if got := rec.take(); len(got) != 3 {
		t.Errorf("a minute later, %d events, want the 3 again: %v", len(got), got)
	}

	gone := snap()
	delete(gone.NodePools, "frozen")
	ctl.observe(gone)
	for _, r := range methods.BudgetReasons {
		reason := strings.ToLower(string(r))
		if metrics.NodePoolAllowedDisruptions.DeleteLabelValues("frozen", reason) || metrics.NodePoolNodesConsumingBudgets.DeleteLabelValues("frozen", reason) {
			t.Errorf("the NodePool frozen is gone, but its %s series are still exported", reason)
		}
		if !metrics.NodePoolAllowedDisruptions.DeleteLabelValues("open", reason) {
			t.Errorf("the NodePool open's %s series went with frozen", reason)
		}
	}
}
