package methods

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/policies"
	"github.com/karpenter-policy/karpenter/scheduling/planner"
)

// A command the policy gate refuses for its replacement is built again with the replacement
// narrowed (Narrower): on-demand after a Spot-share refusal, without the refused families
// after another. Drift and single-node consolidation narrow; the gate hears each attempt.

func TestNarrowingAlgebra(t *testing.T) {
	var n Narrowing
	if n.widens(Narrowing{}) {
		t.Error("nothing widens nothing")
	}
	a := Narrowing{OnDemandOnly: true}
	if !n.widens(a) || !a.widens(Narrowing{Families: []string{"c5"}}) || a.widens(Narrowing{OnDemandOnly: true}) {
		t.Error("widens")
	}
	b := a.and(Narrowing{Families: []string{"c5", "m5"}}).and(Narrowing{Families: []string{"m5", "r5"}})
	if !b.OnDemandOnly || strings.Join(b.Families, ",") != "c5,m5,r5" {
		t.Fatalf("and: %+v", b)
	}
	if b.widens(Narrowing{Families: []string{"r5"}}) || !b.widens(Narrowing{Families: []string{"t3"}}) {
		t.Error("widens by families")
	}
	rule := replacementRule{}.narrowed(b)
	if !rule.onDemandOnly || !rule.excludeFamilies["c5"] || !rule.excludeFamilies["r5"] {
		t.Fatalf("rule %+v", rule)
	}
	kept := rule.filter(types())
	for _, it := range kept {
		if strings.HasPrefix(it.Name, "c5.") || strings.HasPrefix(it.Name, "m5.") {
			t.Errorf("%s kept though its family is excluded", it.Name)
		}
		for _, o := range it.Offerings {
			if o.CapacityType == karpv1.CapacityTypeSpot {
				t.Errorf("%s keeps a Spot offering", it.Name)
			}
		}
	}
}

// A gate that refuses by a fixed rule, to count the attempts.
type refuser struct {
	refuse   func(cmd *Command) (string, Narrowing, bool)
	attempts int
	last     Narrowing
	lastCmd  *Command
}

func (r *refuser) Check(_ context.Context, _ *Cluster, cmd *Command) string {
	r.attempts++
	why, n, _ := r.refuse(cmd)
	r.lastCmd, r.last = cmd, n
	return why
}

func (r *refuser) Narrow(cmd *Command) (Narrowing, bool) {
	if cmd != r.lastCmd {
		return Narrowing{}, false
	}
	_, n, ok := r.refuse(cmd)
	return n, ok
}

func TestNarrowingRetries(t *testing.T) {
	w := world{nodes: nodesOf(1, "m5.2xlarge", "on-demand"), pods: []*corev1.Pod{pod("w", "a", "1", "2Gi")}}
	noSpot := func(cmd *Command) (string, Narrowing, bool) {
		for _, r := range cmd.Replacements {
			if r.Offering.CapacityType == karpv1.CapacityTypeSpot {
				return "no Spot", Narrowing{OnDemandOnly: true}, true
			}
		}
		return "", Narrowing{}, false
	}
	noC5 := func(cmd *Command) (string, Narrowing, bool) {
		for _, r := range cmd.Replacements {
			if strings.HasPrefix(r.InstanceType.Name, "c5.") {
				return "no c5", Narrowing{Families: []string{"c5"}}, true
			}
		}
		return "", Narrowing{}, false
	}
	never := func(cmd *Command) (string, Narrowing, bool) { return "never", Narrowing{}, false }
	always := func(cmd *Command) (string, Narrowing, bool) {
		return "again", Narrowing{Families: []string{cmd.Replacements[0].InstanceType.Name[:2]}}, true
	}
	for name, tc := range map[string]struct {
		refuse   func(*Command) (string, Narrowing, bool)
		method   Method
		drifted  bool
		want     string
		attempts int
	}{
		"Spot refused: on-demand":                {refuse: noSpot, method: &SingleNode{}, want: "replace:a+c5.large/on-demand", attempts: 2},
		"c5 refused: the next family":            {refuse: noC5, method: &SingleNode{}, want: "replace:a+m5.large/spot", attempts: 2},
		"refused without a narrowing: nothing":   {refuse: never, method: &SingleNode{}, want: "", attempts: 1},
		"refused every time: at most four tries": {refuse: always, method: &SingleNode{}, want: "", attempts: 2},
		"drift narrows too":                      {refuse: noSpot, method: Drift{}, drifted: true, want: "replace:a+c5.large/on-demand", attempts: 2},
		"multi-node does not narrow (one node)":  {refuse: noSpot, method: &MultiNode{}, want: "", attempts: 0},
	} {
		t.Run(name, func(t *testing.T) {
			ww := w
			if tc.drifted {
				ww.claims = claimsFor("a", drifted(time.Hour))
			}
			c := ww.cluster()
			r := &refuser{refuse: tc.refuse}
			c.Check = r
			got := strings.Join(commandNames(commands(t, tc.method, c)), " | ")
			if got != tc.want {
				t.Fatalf("commands %q, want %q", got, tc.want)
			}
			if tc.attempts > 0 && r.attempts != tc.attempts {
				t.Fatalf("%d attempts, want %d", r.attempts, tc.attempts)
			}
		})
	}
}

// A ClusterCapacityBudget's family rule narrows the replacement too.
func TestTeamFamiliesNarrowTheReplacement(t *testing.T) {
	engine, err := policies.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	hourly := policyv1.Money("100")
	cb := &policyv1.ClusterCapacityBudget{ObjectMeta: metav1.ObjectMeta{Name: "payments"}, Spec: policyv1.ClusterCapacityBudgetSpec{
		NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"team": "payments"}},
		CapacityBudgetSpec: policyv1.CapacityBudgetSpec{Limits: &policyv1.BudgetLimits{HourlyCost: &hourly}, Enforcement: policyv1.EnforcementDeny,
			InstanceFamilies: &policyv1.InstanceFamilies{Deny: []string{"c5*"}}}}}
	w := world{nodes: nodesOf(1, "m5.2xlarge", "on-demand"), pods: []*corev1.Pod{pod("w", "a", "500m", "1Gi", inNamespace("pay-a"))}}
	c := w.cluster()
	g := NewPolicyCheck(&planner.Planner{Engine: engine, Now: now, Budgets: map[string]*policyv1.CapacityBudget{},
		Namespaces:     map[string]policies.Namespace{"pay-a": {Name: "pay-a", Labels: map[string]string{"team": "payments"}}},
		ClusterBudgets: planner.ClusterBudgets([]*policyv1.ClusterCapacityBudget{cb})}, c)
	var refusals int
	g.OnRefusal = func(*Command, []policies.Violation) { refusals++ }
	c.Check = g
	got := strings.Join(commandNames(commands(t, &SingleNode{}, c)), " | ")
	if !strings.HasPrefix(got, "replace:a+") || strings.Contains(got, "+c5") {
		t.Fatalf("commands %q, want a replacement outside c5", got)
	}
	if refusals == 0 {
		t.Fatal("the c5 replacement was not refused first")
	}
}

// A narrowed command validates against a fresh cluster with the same gate: validation
// simulates again with the command's narrowing, so it meets the replacement the gate let
// through, not the one it refused.
func TestNarrowedCommandsValidate(t *testing.T) {
	noSpot := func(cmd *Command) (string, Narrowing, bool) {
		for _, r := range cmd.Replacements {
			if r.Offering.CapacityType == karpv1.CapacityTypeSpot {
				return "no Spot", Narrowing{OnDemandOnly: true}, true
			}
		}
		return "", Narrowing{}, false
	}
	for name, tc := range map[string]struct {
		method  Method
		drifted bool
	}{
		"single-node": {method: &SingleNode{}},
		"drift":       {method: Drift{}, drifted: true},
	} {
		t.Run(name, func(t *testing.T) {
			w := world{nodes: nodesOf(1, "m5.2xlarge", "on-demand"), pods: []*corev1.Pod{pod("w", "a", "1", "2Gi")}}
			if tc.drifted {
				w.claims = claimsFor("a", drifted(time.Hour))
			}
			c := w.cluster()
			c.Check = &refuser{refuse: noSpot}
			cmds := commands(t, tc.method, c)
			if len(cmds) != 1 || !cmds[0].Narrowed.OnDemandOnly {
				t.Fatalf("commands %v (narrowed %+v), want one narrowed to on-demand", commandNames(cmds), cmds[0].Narrowed)
			}
			fresh := w.cluster()
			fresh.Check = &refuser{refuse: noSpot}
			if why := Validate(context.Background(), cmds[0], fresh, tc.method, nil); why != "" {
				t.Fatalf("validate: %q", why)
			}
		})
	}
}
