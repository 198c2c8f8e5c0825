package policies

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/test"
)

var (
	mid = time.Date(2026, 11, 16, 0, 0, 0, 0, time.UTC)
	dev = Namespace{Name: "team-dev", Labels: map[string]string{"tier": "dev"}}
	prd = Namespace{Name: "team-prod", Labels: map[string]string{"tier": "prod"}}
)

func money(s string) *policyv1.Money { m := policyv1.Money(s); return &m }

func i32(i int32) *int32 { return &i }

func testBudget(ns, hourly string) *policyv1.CapacityBudget {
	return &policyv1.CapacityBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"},
		Spec: policyv1.CapacityBudgetSpec{
			Limits:           &policyv1.BudgetLimits{HourlyCost: money(hourly)},
			Spot:             &policyv1.SpotShare{MinPercent: i32(60), MaxPercent: i32(90)},
			InstanceFamilies: &policyv1.InstanceFamilies{Allow: []string{"c*", "m*"}, Deny: []string{"*metal*"}},
			Enforcement:      policyv1.EnforcementDeny,
		},
	}
}

func testPolicy(name, rego string, enforcement policyv1.EnforcementAction, failure policyv1.FailurePolicy) policyv1.CapacityPolicy {
	return policyv1.CapacityPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1},
		Spec: policyv1.CapacityPolicySpec{
			Enforcement: enforcement, FailurePolicy: failure,
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "dev"}},
			Parameters:        &runtime.RawExtension{Raw: []byte(`{"deniedFamilies": ["p*", "g*"]}`)},
			Modules:           []policyv1.PolicyModule{{Name: name + ".rego", Rego: rego}},
		},
	}
}

func testTypes(t *testing.T) *InstanceTypes {
	t.Helper()
	its, err := NewInstanceTypes([]InstanceTypeInfo{
		{Name: "m6i.large", Family: "m6i", CPU: 2, MemoryGiB: 8, MinPricePerHour: 0.096},
		{Name: "c6i.metal", Family: "c6i", CPU: 128, MemoryGiB: 256, MinPricePerHour: 5.4},
		{Name: "r6i.large", Family: "r6i", CPU: 2, MemoryGiB: 16, MinPricePerHour: 0.126},
		{Name: "p4d.24xlarge", Family: "p4d", CPU: 96, MemoryGiB: 1152, GPUs: 8, MinPricePerHour: 32.77},
		{Name: "g5.xlarge", Family: "g5", CPU: 4, MemoryGiB: 16, GPUs: 1, MinPricePerHour: 1.006},
	})
	if err != nil {
		t.Fatal(err)
	}
	return its
}

func newEngine(t *testing.T) *Engine {
	t.Helper()
	e, err := NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func deniedNames(c *Constraints) []string {
	var out []string
	for _, n := range []string{"m6i.large", "c6i.metal", "r6i.large", "p4d.24xlarge", "g5.xlarge"} {
		if _, ok := c.DeniedInstanceTypes[n]; ok {
			out = append(out, n)
		}
	}
	return out
}

func TestProvisioningAppliesTheBudget(t *testing.T) {
	e := newEngine(t)
	c := e.Provisioning(context.Background(), ProvisioningInput{Namespace: prd, NodePool: "default", InstanceTypes: testTypes(t),
		Budget: testBudget("team-prod", "13.00"), Usage: Usage{HourlyCost: 6, InFlightHourlyCost: 1}, Now: mid})
	if got := strings.Join(deniedNames(c), ","); got != "c6i.metal,r6i.large,p4d.24xlarge,g5.xlarge" {
		t.Errorf("denied types %s", got)
	}
	if v := c.DeniedInstanceTypes["c6i.metal"]; v.Source.String() != "CapacityBudget team-prod/default" || !strings.Contains(v.Message, `instanceFamilies.deny "*metal*"`) {
		t.Errorf("violation %+v", v)
	}
	b := c.Budget
	if b == nil || !b.HasLimit || b.HourlyLimit != 13 || b.Remaining != 6 || b.Spot.MinPercent != 60 || b.Spot.MaxPercent != 90 {
		t.Fatalf("budget in force %+v", b)
	}
	if len(c.Denied()) != 0 || len(c.Errors) != 0 {
		t.Errorf("nothing should block: %+v %v", c.Denied(), c.Errors)
	}
}

func TestProvisioningBlocksANamespaceAtItsLimit(t *testing.T) {
	e := newEngine(t)
	c := e.Provisioning(context.Background(), ProvisioningInput{Namespace: prd, NodePool: "default", InstanceTypes: testTypes(t),
		Budget: testBudget("team-prod", "13.00"), Usage: Usage{HourlyCost: 12.4, InFlightHourlyCost: 0.8}, Now: mid})
	d := c.Denied()
	if len(d) != 1 || d[0].Message != "CapacityBudget team-prod/default: hourly cost 13.20 has reached the limit 13.00 (hourlyCost 13.00)" {
		t.Fatalf("denied %+v", d)
	}
}

func TestScheduleWindowChangesTheLimit(t *testing.T) {
	e := newEngine(t)
	b := testBudget("team-prod", "13.00")
	b.Spec.Schedules = []policyv1.BudgetSchedule{{Schedule: "0 18 * * *", Duration: metav1.Duration{Duration: 14 * time.Hour},
		Limits: &policyv1.BudgetLimits{HourlyCost: money("5.00")}}}
	for _, tc := range []struct {
		at    time.Time
		limit float64
	}{
		{time.Date(2026, 11, 16, 17, 59, 0, 0, time.UTC), 13},
		{time.Date(2026, 11, 16, 18, 0, 0, 0, time.UTC), 5},
		{time.Date(2026, 11, 17, 7, 59, 0, 0, time.UTC), 5},
		{time.Date(2026, 11, 17, 8, 0, 0, 0, time.UTC), 13},
	} {
		c := e.Provisioning(context.Background(), ProvisioningInput{Namespace: prd, Budget: b, Now: tc.at})
		if c.Budget == nil || c.Budget.HourlyLimit != tc.limit {
			t.Errorf("at %s: limit %+v, want %v", tc.at, c.Budget, tc.limit)
		}
	}
}

func TestCapacityPolicySelectsNamespaces(t *testing.T) {
	e := newEngine(t)
	if probs := e.SetPolicies([]policyv1.CapacityPolicy{testPolicy("no-gpu-in-dev", test.NoGPUInDevRego, "", "")}); len(probs) > 0 {
		t.Fatal(probs)
	}
	its := testTypes(t)
	c := e.Provisioning(context.Background(), ProvisioningInput{Namespace: dev, NodePool: "default", InstanceTypes: its, Now: mid})
	if got := strings.Join(deniedNames(c), ","); got != "p4d.24xlarge,g5.xlarge" {
		t.Errorf("dev: denied %s", got)
	}
	if v := c.DeniedInstanceTypes["g5.xlarge"]; v.Source.String() != "CapacityPolicy no-gpu-in-dev" || v.Message != "instance family g5 is denied in team-dev" {
		t.Errorf("violation %+v", v)
	}
	if c.Budget != nil {
		t.Errorf("no budget, got %+v", c.Budget)
	}
	c = e.Provisioning(context.Background(), ProvisioningInput{Namespace: prd, NodePool: "default", InstanceTypes: its, Now: mid})
	if len(c.DeniedInstanceTypes) != 0 {
		t.Errorf("prod is not selected, denied %v", deniedNames(c))
	}
}

func TestWarnAndDryRunDoNotConstrain(t *testing.T) {
	for _, enf := range []policyv1.EnforcementAction{policyv1.EnforcementWarn, policyv1.EnforcementDryRun} {
		e := newEngine(t)
		b := testBudget("team-dev", "1.00")
		b.Spec.Enforcement = enf
		e.SetPolicies([]policyv1.CapacityPolicy{testPolicy("gpu", test.NoGPUInDevRego+"\ndeny contains \"no\" if true\n", enf, "")})
		c := e.Provisioning(context.Background(), ProvisioningInput{Namespace: dev, InstanceTypes: testTypes(t), Budget: b,
			Usage: Usage{HourlyCost: 2}, Now: mid})
		if len(c.DeniedInstanceTypes) != 0 || len(c.Denied()) != 0 {
			t.Errorf("%s: constrained %v, denied %v", enf, deniedNames(c), c.Denied())
		}
		got := c.Warned()
		if enf == policyv1.EnforcementDryRun {
			got = c.DryRun()
		}
		if len(got) != 2 {
			t.Errorf("%s: want the budget's and the policy's violation, got %+v", enf, got)
		}
	}
}

func TestFailurePolicy(t *testing.T) {
	broken := "package karpenter.provisioning\n\ndeny contains msg if {\n\tto_number(input.namespace.name) > 1\n\tmsg := \"x\"\n}\n"
	for _, tc := range []struct {
		fp     policyv1.FailurePolicy
		denied int
	}{{policyv1.FailurePolicyIgnore, 0}, {policyv1.FailurePolicyFail, 1}} {
		e := newEngine(t)
		if probs := e.SetPolicies([]policyv1.CapacityPolicy{testPolicy("broken", broken, "", tc.fp)}); len(probs) > 0 {
			t.Fatal(probs)
		}
		c := e.Provisioning(context.Background(), ProvisioningInput{Namespace: dev, Now: mid})
		if len(c.Errors) != 1 || len(c.Denied()) != tc.denied {
			t.Errorf("%s: errors %v, denied %+v", tc.fp, c.Errors, c.Denied())
		}
	}
}

func TestSetPoliciesSwapsAndReportsProblems(t *testing.T) {
	e := newEngine(t)
	good := testPolicy("no-gpu-in-dev", test.NoGPUInDevRego, "", "")
	bad := testPolicy("bad", "package karpenter.provisioning\n\ndeny contains x if {\n", "", "")
	probs := e.SetPolicies([]policyv1.CapacityPolicy{good, bad})
	if len(probs) != 1 || probs[0].Policy != "bad" || probs[0].Problems[0].Line == 0 {
		t.Fatalf("problems %+v", probs)
	}
	first := (*e.policies.Load())[0]
	e.SetPolicies([]policyv1.CapacityPolicy{good})
	if (*e.policies.Load())[0] != first {
		t.Error("an unchanged policy was compiled again")
	}
	e.SetPolicies(nil)
	if len(e.Policies()) != 0 {
		t.Errorf("policies left: %v", e.Policies())
	}
}

func TestLaunchGateCountsInFlight(t *testing.T) {
	e := newEngine(t)
	d := e.Launch(context.Background(), LaunchInput{NodePool: "default", InstanceType: "m6i.2xlarge", Family: "m6i", CapacityType: "spot",
		PricePerHour: 0.16, Now: mid, Namespaces: []LaunchNamespace{
			{Namespace: prd, Cost: 0.8, Budget: testBudget("team-prod", "13.00"), Usage: Usage{HourlyCost: 12, InFlightHourlyCost: 0.4}},
			{Namespace: dev, Cost: 0.1},
		}})
	denied := d.Denied()
	if len(denied) != 1 || denied[0].Namespace != "team-prod" ||
		denied[0].Message != "CapacityBudget team-prod/default: hourly cost 12.40 + 0.80 would exceed 13.00 (hourlyCost 13.00)" {
		t.Fatalf("denied %+v", denied)
	}
}

// The budgets fit a batch when the namespaces' costs summed over its NodeClaims fit: each
// NodeClaim alone fitting is not enough, and a Warn budget passing its limit does not fit
// either (its warnings need the per-NodeClaim evaluation). A CapacityPolicy at the launch gate
// is evaluated per NodeClaim all the same.
func TestLaunchBudgetsFitTheBatch(t *testing.T) {
	e := newEngine(t)
	claim := func(cost float64, b *policyv1.CapacityBudget) LaunchInput {
		return LaunchInput{NodePool: "default", InstanceType: "m6i.large", Family: "m6i", CapacityType: "spot", PricePerHour: 0.1, Now: mid,
			Namespaces: []LaunchNamespace{{Namespace: prd, Cost: cost, Budget: b, Usage: Usage{HourlyCost: 12}}, {Namespace: dev, Cost: 0.1}}}
	}
	b := testBudget("team-prod", "13.00")
	if !e.LaunchBudgetsFit(context.Background(), []LaunchInput{claim(0.4, b), claim(0.5, b)}) {
		t.Error("12 + 0.4 + 0.5 fits 13")
	}
	if e.LaunchBudgetsFit(context.Background(), []LaunchInput{claim(0.6, b), claim(0.6, b)}) {
		t.Error("12 + 0.6 + 0.6 passes 13 although each NodeClaim alone fits")
	}
	warn := testBudget("team-prod", "13.00")
	warn.Spec.Enforcement = policyv1.EnforcementWarn
	if e.LaunchBudgetsFit(context.Background(), []LaunchInput{claim(0.6, warn), claim(0.6, warn)}) {
		t.Error("a Warn budget over its limit must be evaluated per NodeClaim for its warnings")
	}
	if probs := e.SetPolicies([]policyv1.CapacityPolicy{testPolicy("no-spot-launch", `package karpenter.launch

deny contains {"namespace": ns.name, "msg": "no Spot in dev"} if {
	input.nodeClaim.capacityType == "spot"
	some ns in input.namespaces
}
`, policyv1.EnforcementDeny, "")}); len(probs) > 0 {
		t.Fatal(probs)
	}
	d := e.LaunchPolicies(context.Background(), claim(0.1, b))
	if denied := d.Denied(); len(denied) != 1 || denied[0].Namespace != "team-dev" || denied[0].Message != "no Spot in dev" {
		t.Errorf("LaunchPolicies: %+v", denied)
	}
}

func TestDisruptionAndAdmission(t *testing.T) {
	e := newEngine(t)
	d := e.Disruption(context.Background(), DisruptionInput{Reason: "Drifted", Now: mid,
		Replacements: []DisruptionNode{{InstanceType: "m6i.xlarge", Family: "m6i", CapacityType: "on-demand", PricePerHour: 0.192}},
		Namespaces:   []DisruptionNamespace{{Namespace: prd, CostDelta: 0.5, Budget: testBudget("team-prod", "13.00"), Usage: Usage{HourlyCost: 12.8}}}})
	if len(d.Denied()) != 1 || !strings.HasSuffix(d.Denied()[0].Message, "(disruption Drifted)") {
		t.Errorf("disruption %+v", d.Denied())
	}
	b := testBudget("team-prod", "5.00")
	a := e.Admission(context.Background(), AdmissionInput{Operation: "UPDATE", Kind: "CapacityBudget", Object: b, Namespace: &prd, Budget: b,
		Usage: Usage{HourlyCost: 7, SpotCPU: 8, OnDemandCPU: 2}, Now: mid})
	if w := a.Warned(); len(w) != 1 || !strings.Contains(w[0].Message, "below the current run-rate 7.00") {
		t.Errorf("admission %+v", w)
	}
}

func TestConcurrentEvaluation(t *testing.T) {
	e := newEngine(t)
	its := testTypes(t)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				if i == 0 {
					e.SetPolicies([]policyv1.CapacityPolicy{testPolicy("no-gpu-in-dev", test.NoGPUInDevRego, "", "")})
				}
				c := e.Provisioning(context.Background(), ProvisioningInput{Namespace: dev, InstanceTypes: its, Budget: testBudget("team-dev", "3"), Now: mid})
				if len(c.Errors) > 0 || c.Budget == nil {
					t.Errorf("evaluation: %v", c.Errors)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// A policy that runs past the evaluation deadline is an evaluation error naming the deadline,
// handled by its failurePolicy; a quick policy beside it is still evaluated.
func TestEvaluationDeadline(t *testing.T) {
	slow := "package karpenter.provisioning\n\ndeny contains \"never\" if {\n\tsome i in numbers.range(1, 5000)\n\tsome j in numbers.range(1, 5000)\n\ti * j == -1\n}\n"
	for _, tc := range []struct {
		fp     policyv1.FailurePolicy
		denied bool
	}{{policyv1.FailurePolicyIgnore, false}, {policyv1.FailurePolicyFail, true}} {
		e := newEngine(t)
		e.EvalTimeout = 20 * time.Millisecond
		quick := testPolicy("no-gpu-in-dev", test.NoGPUInDevRego, "", "")
		if probs := e.SetPolicies([]policyv1.CapacityPolicy{testPolicy("slow", slow, "", tc.fp), quick}); len(probs) > 0 {
			t.Fatal(probs)
		}
		c := e.Provisioning(context.Background(), ProvisioningInput{Namespace: dev, Now: mid, InstanceTypes: testTypes(t)})
		if len(c.Errors) != 1 || !strings.Contains(c.Errors[0].Error(), "deadline") || !strings.Contains(c.Errors[0].Error(), "slow") {
			t.Fatalf("%s: errors %v, want one naming the policy and its deadline", tc.fp, c.Errors)
		}
		slowDenied := false
		for _, v := range c.Denied() {
			slowDenied = slowDenied || v.Source.Name == "slow"
		}
		if slowDenied != tc.denied {
			t.Errorf("%s: the slow policy denies %v, want %v", tc.fp, slowDenied, tc.denied)
		}
		if len(c.DeniedInstanceTypes) == 0 {
			t.Errorf("%s: the quick policy beside it was not evaluated (no instance type denied)", tc.fp)
		}
	}
}
