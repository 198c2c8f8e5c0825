package policies

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
)

func testException(name string, expires time.Time, exempt ...policyv1.ExemptPolicy) policyv1.CapacityException {
	return policyv1.CapacityException{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: policyv1.CapacityExceptionSpec{Namespaces: []string{"team-prod"}, Exempt: exempt, ExpiresAt: metav1.NewTime(expires), Reason: "launch week"}}
}

// Applies is the one answer, at every boundary: before expiresAt it applies, at expiresAt and
// after it does not; only in the namespaces named or selected; only to the kind, name and
// rules named.
func TestExceptionApplies(t *testing.T) {
	exp := mid.Add(time.Hour)
	ex := testException("spike", exp, policyv1.ExemptPolicy{Kind: policyv1.ExemptCapacityPolicy, Name: "max-cpu", Rules: []string{"cpu"}},
		policyv1.ExemptPolicy{Kind: policyv1.ExemptCapacityBudget, Name: "*"})
	for name, tc := range map[string]struct {
		ns         Namespace
		kind       policyv1.ExemptKind
		obj, rule  string
		at         time.Time
		wantExempt bool
	}{
		"policy rule named":          {prd, policyv1.ExemptCapacityPolicy, "max-cpu", "cpu", mid, true},
		"policy, any rule asked":     {prd, policyv1.ExemptCapacityPolicy, "max-cpu", "", mid, true},
		"policy, another rule":       {prd, policyv1.ExemptCapacityPolicy, "max-cpu", "memory", mid, false},
		"another policy":             {prd, policyv1.ExemptCapacityPolicy, "no-gpu", "cpu", mid, false},
		"any budget, any rule":       {prd, policyv1.ExemptCapacityBudget, "default", policyv1.BudgetRuleSpot, mid, true},
		"another namespace":          {dev, policyv1.ExemptCapacityBudget, "default", "", mid, false},
		"a nanosecond before expiry": {prd, policyv1.ExemptCapacityBudget, "default", "", exp.Add(-time.Nanosecond), true},
		"at expiry":                  {prd, policyv1.ExemptCapacityBudget, "default", "", exp, false},
		"after expiry":               {prd, policyv1.ExemptCapacityBudget, "default", "", exp.Add(time.Minute), false},
	} {
		if got := Applies(&ex, tc.ns, tc.kind, tc.obj, tc.rule, tc.at); got != tc.wantExempt {
			t.Errorf("%s: Applies = %v", name, got)
		}
	}
	sel := testException("by-label", exp, policyv1.ExemptPolicy{Kind: policyv1.ExemptCapacityBudget, Name: "*"})
	sel.Spec.Namespaces, sel.Spec.NamespaceSelector = nil, &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "dev"}}
	if !Applies(&sel, dev, policyv1.ExemptCapacityBudget, "default", "", mid) || Applies(&sel, prd, policyv1.ExemptCapacityBudget, "default", "", mid) {
		t.Error("a selector picks namespaces by their labels")
	}
}

// An exception with extraHourlyCost raises the budget's limit at provisioning, in status
// (BudgetInForce), at the launch gate and at the disruption gate; once it expires, each of
// them holds the namespace to the budget again.
func TestBudgetExceptionRaisesTheLimitUntilItExpires(t *testing.T) {
	e := newEngine(t)
	exp := mid.Add(time.Hour)
	ex := testException("spike", exp, policyv1.ExemptPolicy{Kind: policyv1.ExemptCapacityBudget, Name: "default", Rules: []string{policyv1.BudgetRuleHourlyCost}})
	ex.Spec.ExtraHourlyCost = money("2.50")
	if errs := e.SetExceptions([]policyv1.CapacityException{ex}); len(errs) > 0 {
		t.Fatal(errs)
	}
	b := testBudget("team-prod", "13.00")
	usage := Usage{HourlyCost: 13.2}
	ctx := context.Background()

	c := e.Provisioning(ctx, ProvisioningInput{Namespace: prd, Budget: b, Usage: usage, Now: mid})
	if len(c.Denied()) != 0 || c.Budget == nil || c.Budget.HourlyLimit != 15.5 || !strings.Contains(c.Budget.LimitReason, "hourlyCost 13.00 + 2.50 by CapacityException spike") {
		t.Fatalf("with the exception: denied %+v, budget %+v", c.Denied(), c.Budget)
	}
	if len(c.Exemptions) != 1 || c.Exemptions[0].Exception != "spike" || c.Exemptions[0].Rule != "hourlyCost" {
		t.Errorf("exemptions %+v", c.Exemptions)
	}
	bif, err := e.BudgetInForce(ctx, prd, b, usage, mid)
	if err != nil || bif.HourlyLimit != 15.5 {
		t.Errorf("status: %+v %v", bif, err)
	}
	launch := LaunchInput{NodePool: "default", InstanceType: "m6i.large", PricePerHour: 1, Now: mid,
		Namespaces: []LaunchNamespace{{Namespace: prd, Cost: 1, Budget: b, Usage: usage}}}
	if d := e.Launch(ctx, launch); len(d.Denied()) != 0 {
		t.Errorf("launch with the exception: %+v", d.Denied())
	}
	dis := DisruptionInput{Reason: "Underutilized", Now: mid, Namespaces: []DisruptionNamespace{{Namespace: prd, CostDelta: 1, Budget: b, Usage: usage}}}
	if d := e.Disruption(ctx, dis); len(d.Denied()) != 0 {
		t.Errorf("disruption with the exception: %+v", d.Denied())
	}

	// At expiresAt, every point holds the namespace to its budget again.
	c = e.Provisioning(ctx, ProvisioningInput{Namespace: prd, Budget: b, Usage: usage, Now: exp})
	if len(c.Denied()) != 1 || c.Budget.HourlyLimit != 13 || len(c.Exemptions) != 0 {
		t.Errorf("expired: denied %+v, budget %+v", c.Denied(), c.Budget)
	}
	if bif, _ := e.BudgetInForce(ctx, prd, b, usage, exp); bif.HourlyLimit != 13 {
		t.Errorf("status after expiry %+v", bif)
	}
	launch.Now, dis.Now = exp, exp
	if d := e.Launch(ctx, launch); len(d.Denied()) != 1 {
		t.Errorf("launch after expiry: %+v", d.Denied())
	}
	if d := e.Disruption(ctx, dis); len(d.Denied()) != 1 {
		t.Errorf("disruption after expiry: %+v", d.Denied())
	}
}

// Without extraHourlyCost an exception lifts the rules it names: the limit, the Spot bounds,
// the instance families, each alone.
func TestBudgetExceptionLiftsRules(t *testing.T) {
	e := newEngine(t)
	exp := mid.Add(time.Hour)
	b := testBudget("team-prod", "13.00")
	ctx := context.Background()
	for name, tc := range map[string]struct {
		rules                        []string
		limited, spotBound, families bool
	}{
		"all":              {nil, false, false, false},
		"hourlyCost":       {[]string{policyv1.BudgetRuleHourlyCost}, false, true, true},
		"spot":             {[]string{policyv1.BudgetRuleSpot}, true, false, true},
		"instanceFamilies": {[]string{policyv1.BudgetRuleInstanceFamilies}, true, true, false},
	} {
		ex := testException("lift", exp, policyv1.ExemptPolicy{Kind: policyv1.ExemptCapacityBudget, Name: "default", Rules: tc.rules})
		e.SetExceptions([]policyv1.CapacityException{ex})
		c := e.Provisioning(ctx, ProvisioningInput{Namespace: prd, InstanceTypes: testTypes(t), Budget: b, Usage: Usage{HourlyCost: 20}, Now: mid})
		if got := len(c.Denied()) > 0; got != tc.limited {
			t.Errorf("%s: limited %v, want %v", name, got, tc.limited)
		}
		if got := c.Budget != nil && c.Budget.Spot.MinPercent == 60; got != tc.spotBound {
			t.Errorf("%s: Spot bound %v, want %v (%+v)", name, got, tc.spotBound, c.Budget)
		}
		if got := len(c.DeniedInstanceTypes) > 0; got != tc.families {
			t.Errorf("%s: families enforced %v, want %v", name, got, tc.families)
		}
	}
}

// A CapacityPolicy's results are exempt by the rule they name and the namespace they concern.
func TestPolicyExceptionDropsResultsOfItsRules(t *testing.T) {
	e := newEngine(t)
	p := testPolicy("launch-guard", `package karpenter.launch

deny contains {"msg": sprintf("%s: nodes over $1/hour", [ns.name]), "namespace": ns.name, "rule": "price"} if {
	some ns in input.namespaces
	input.nodeClaim.pricePerHour > 1
}

deny contains {"msg": "no GPUs", "rule": "gpu"} if startswith(input.nodeClaim.instanceType, "g")
`, policyv1.EnforcementDeny, policyv1.FailurePolicyIgnore)
	p.Spec.NamespaceSelector = nil
	if probs := e.SetPolicies([]policyv1.CapacityPolicy{p}); len(probs) > 0 {
		t.Fatal(probs)
	}
	ex := testException("pricey", mid.Add(time.Hour), policyv1.ExemptPolicy{Kind: policyv1.ExemptCapacityPolicy, Name: "launch-guard", Rules: []string{"price", "gpu"}})
	e.SetExceptions([]policyv1.CapacityException{ex})
	in := LaunchInput{NodePool: "default", InstanceType: "g5.xlarge", PricePerHour: 2, Now: mid,
		Namespaces: []LaunchNamespace{{Namespace: prd, Cost: 1}, {Namespace: dev, Cost: 1}}}
	d := e.Launch(context.Background(), in)
	var denied []string
	for _, v := range d.Denied() {
		denied = append(denied, v.Message)
	}
	// team-prod's price result is exempt; team-dev's stands; the GPU result names no
	// namespace, and not every namespace on the NodeClaim is exempt, so it stands.
	if strings.Join(denied, "|") != "no GPUs|team-dev: nodes over $1/hour" && strings.Join(denied, "|") != "team-dev: nodes over $1/hour|no GPUs" {
		t.Errorf("denied %v", denied)
	}
	if len(d.Exemptions) != 1 || d.Exemptions[0].Namespace != "team-prod" || d.Exemptions[0].Rule != "price" {
		t.Errorf("exemptions %+v", d.Exemptions)
	}
	// With team-prod alone on the NodeClaim, the GPU result is exempt too.
	in.Namespaces = in.Namespaces[:1]
	if d := e.Launch(context.Background(), in); len(d.Denied()) != 0 || len(d.Exemptions) != 2 {
		t.Errorf("team-prod alone: denied %+v, exemptions %+v", d.Denied(), d.Exemptions)
	}
}

// scopedEnforcement chooses the action per enforcement point; a point it does not name takes
// enforcement.
func TestScopedEnforcement(t *testing.T) {
	e := newEngine(t)
	p := testPolicy("max-cpu", `package karpenter.admission

deny contains "over 500" if {
	input.kind == "NodePool"
	units.parse(input.object.spec.limits.cpu) > 500
}
`, policyv1.EnforcementDeny, policyv1.FailurePolicyIgnore)
	p.Spec.NamespaceSelector = nil
	p.Spec.ScopedEnforcement = []policyv1.ScopedEnforcement{{Points: []policyv1.EnforcementPoint{policyv1.PointCI}, Action: policyv1.EnforcementWarn}}
	if probs := e.SetPolicies([]policyv1.CapacityPolicy{p}); len(probs) > 0 {
		t.Fatal(probs)
	}
	np := map[string]any{"spec": map[string]any{"limits": map[string]any{"cpu": "600"}}}
	at := func(point policyv1.EnforcementPoint) *Decision {
		return e.Admission(context.Background(), AdmissionInput{Operation: "CREATE", Kind: "NodePool", Object: np, Now: mid, Point: point})
	}
	if d := at(policyv1.PointAdmission); len(d.Denied()) != 1 {
		t.Errorf("admission denies: %+v", d)
	}
	if d := at(policyv1.PointCI); len(d.Denied()) != 0 || len(d.Warned()) != 1 {
		t.Errorf("ci warns: %+v", d)
	}

	// A budget that denies in the controllers but only dry-runs at provisioning holds no pods
	// and constrains nothing there, while disruption still denies.
	b := testBudget("team-prod", "13.00")
	b.Spec.ScopedEnforcement = []policyv1.ScopedEnforcement{{Points: []policyv1.EnforcementPoint{policyv1.PointProvisioning}, Action: policyv1.EnforcementDryRun}}
	if b.HoldsPods() {
		t.Error("a budget in DryRun at provisioning holds no pods")
	}
	c := e.Provisioning(context.Background(), ProvisioningInput{Namespace: prd, InstanceTypes: testTypes(t), Budget: b, Usage: Usage{HourlyCost: 20}, Now: mid})
	if len(c.Denied()) != 0 || len(c.DryRun()) != 1 || len(c.DeniedInstanceTypes) != 0 {
		t.Errorf("provisioning in DryRun: denied %+v, dry run %+v, types %d", c.Denied(), c.DryRun(), len(c.DeniedInstanceTypes))
	}
	d := e.Disruption(context.Background(), DisruptionInput{Reason: "Underutilized", Now: mid,
		Namespaces: []DisruptionNamespace{{Namespace: prd, CostDelta: 1, Budget: b, Usage: Usage{HourlyCost: 20}}}})
	if len(d.Denied()) != 1 {
		t.Errorf("disruption denies: %+v", d)
	}
}

// A lift wins over a raise: with hourlyCost lifted by one exception and raised by another,
// the budget limits nothing; several raises add up.
func TestExceptionsCombine(t *testing.T) {
	e := newEngine(t)
	exp := mid.Add(time.Hour)
	raise := func(name, amount string) policyv1.CapacityException {
		x := testException(name, exp, policyv1.ExemptPolicy{Kind: policyv1.ExemptCapacityBudget, Name: "default", Rules: []string{policyv1.BudgetRuleHourlyCost}})
		x.Spec.ExtraHourlyCost = money(amount)
		return x
	}
	lift := testException("lift", exp, policyv1.ExemptPolicy{Kind: policyv1.ExemptCapacityBudget, Name: "*", Rules: []string{policyv1.BudgetRuleHourlyCost}})
	b := testBudget("team-prod", "13.00")
	e.SetExceptions([]policyv1.CapacityException{raise("a", "1.00"), raise("b", "2.50")})
	if c := e.Provisioning(context.Background(), ProvisioningInput{Namespace: prd, Budget: b, Now: mid}); c.Budget == nil || c.Budget.HourlyLimit != 16.5 {
		t.Errorf("two raises: %+v", c.Budget)
	}
	e.SetExceptions([]policyv1.CapacityException{raise("a", "1.00"), lift})
	if c := e.Provisioning(context.Background(), ProvisioningInput{Namespace: prd, Budget: b, Usage: Usage{HourlyCost: 100}, Now: mid}); c.Budget == nil || c.Budget.HasLimit || len(c.Denied()) != 0 {
		t.Errorf("a lift and a raise: %+v, denied %+v", c.Budget, c.Denied())
	}
}
