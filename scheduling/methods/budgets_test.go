package methods

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

func TestAllowedDisruptions(t *testing.T) {
	noon := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC) // a Tuesday
	window := func(schedule, d string) karpv1.Budget {
		dur, _ := time.ParseDuration(d)
		return karpv1.Budget{Nodes: "0", Schedule: ptr.To(schedule), Duration: &metav1.Duration{Duration: dur}}
	}
	for name, tc := range map[string]struct {
		budgets    []karpv1.Budget
		reason     Reason
		nodes      int
		disrupting int
		want       int
	}{
		"default 10% of 25 rounds up to 3":           {nil, ReasonUnderutilized, 25, 0, 3},
		"a count":                                    {[]karpv1.Budget{{Nodes: "5"}}, ReasonEmpty, 25, 0, 5},
		"a percentage rounds up":                     {[]karpv1.Budget{{Nodes: "30%"}}, ReasonEmpty, 7, 0, 3},
		"0% allows none":                             {[]karpv1.Budget{{Nodes: "0%"}}, ReasonDrifted, 7, 0, 0},
		"the least of the active budgets":            {[]karpv1.Budget{{Nodes: "50%"}, {Nodes: "2"}}, ReasonEmpty, 10, 0, 2},
		"less the nodes disrupting":                  {[]karpv1.Budget{{Nodes: "3"}}, ReasonEmpty, 10, 2, 1},
		"never below zero":                           {[]karpv1.Budget{{Nodes: "1"}}, ReasonEmpty, 10, 4, 0},
		"a budget for another reason does not apply": {[]karpv1.Budget{{Nodes: "0", Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonDrifted}}, {Nodes: "4"}}, ReasonUnderutilized, 10, 0, 4},
		"a budget for the reason applies":            {[]karpv1.Budget{{Nodes: "0", Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonDrifted}}, {Nodes: "4"}}, ReasonDrifted, 10, 0, 0},
		"inside its window":                          {[]karpv1.Budget{{Nodes: "5"}, window("0 9 * * *", "8h")}, ReasonEmpty, 10, 0, 0},
		"outside its window":                         {[]karpv1.Budget{{Nodes: "5"}, window("0 9 * * *", "2h")}, ReasonEmpty, 10, 0, 5},
		"the window ends at fire + duration":         {[]karpv1.Budget{{Nodes: "5"}, window("0 9 * * *", "3h")}, ReasonEmpty, 10, 0, 5},
		"a weekday window":                           {[]karpv1.Budget{{Nodes: "5"}, window("0 8 * * mon-fri", "10h")}, ReasonEmpty, 10, 0, 0},
		"no active budget: unbounded":                {[]karpv1.Budget{window("0 0 1 1 *", "1h")}, ReasonEmpty, 10, 0, 10},
		"an unparsable count allows nothing":         {[]karpv1.Budget{{Nodes: "five"}, {Nodes: "5"}}, ReasonEmpty, 10, 0, 0},
		"an unparsable percentage allows nothing":    {[]karpv1.Budget{{Nodes: "150%"}}, ReasonEmpty, 10, 0, 0},
		"an unparsable schedule allows nothing":      {[]karpv1.Budget{{Nodes: "5"}, window("not cron", "1h")}, ReasonEmpty, 10, 0, 0},
		"a schedule without duration allows nothing": {[]karpv1.Budget{{Nodes: "5", Schedule: ptr.To("0 9 * * *")}}, ReasonEmpty, 10, 0, 0},
	} {
		t.Run(name, func(t *testing.T) {
			np := &karpv1.NodePool{Spec: karpv1.NodePoolSpec{Disruption: karpv1.Disruption{Budgets: tc.budgets}}}
			if got := AllowedDisruptions(np, tc.reason, noon, tc.nodes, tc.disrupting); got != tc.want {
				t.Errorf("allowed %d, want %d", got, tc.want)
			}
		})
	}
}

func TestBudgetsTakeFromEveryReason(t *testing.T) {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "general"}, Spec: karpv1.NodePoolSpec{Disruption: karpv1.Disruption{Budgets: []karpv1.Budget{{Nodes: "2"}}}}}
	c := &Cluster{NodePools: map[string]*NodePoolState{"general": {NodePool: np}}, PoolSizes: map[string]int{"general": 10}, Now: time.Now()}
	b := NewBudgets(c)
	b.Take("general", 1)
	if b.Allowed("general", ReasonDrifted) != 1 || b.Allowed("general", ReasonUnderutilized) != 1 {
		t.Errorf("a node taken by one reason counts against all: drifted %d, underutilized %d", b.Allowed("general", ReasonDrifted), b.Allowed("general", ReasonUnderutilized))
	}
	b.Take("general", 5)
	if b.Allowed("general", ReasonEmpty) != 0 {
		t.Errorf("empty %d, want 0", b.Allowed("general", ReasonEmpty))
	}
}
