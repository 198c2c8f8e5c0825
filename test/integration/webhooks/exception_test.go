package webhooks_test

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/test"
)

func exception(name string, expires time.Time, mutate ...func(*policyv1.CapacityException)) *policyv1.CapacityException {
	e := &policyv1.CapacityException{ObjectMeta: metav1.ObjectMeta{Name: test.Name(name)},
		Spec: policyv1.CapacityExceptionSpec{Namespaces: []string{"shop"}, ExpiresAt: metav1.NewTime(expires), Reason: "launch week",
			Exempt: []policyv1.ExemptPolicy{{Kind: policyv1.ExemptCapacityBudget, Name: "default", Rules: []string{policyv1.BudgetRuleHourlyCost}}}}}
	for _, m := range mutate {
		m(e)
	}
	return e
}

// Admission refuses an exception that has expired or that expires further out than
// --max-exception-duration (720h by default), on create and when expiresAt changes; the CRD
// refuses one without reason, expiresAt or namespaces, and rules a budget does not have.
func TestCapacityExceptionAdmission(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	for _, tc := range []struct {
		name string
		obj  *policyv1.CapacityException
		want string
	}{
		{"expired", exception("expired", now.Add(-time.Minute)), "spec.expiresAt: Invalid value"},
		{"a year out", exception("year", now.Add(365*24*time.Hour)), "further out than the 720h0m0s an exception may last"},
		{"no reason (CRD)", exception("noreason", now.Add(time.Hour), func(e *policyv1.CapacityException) { e.Spec.Reason = "" }), "spec.reason"},
		{"neither namespaces nor a selector (CRD)", exception("nons", now.Add(time.Hour), func(e *policyv1.CapacityException) { e.Spec.Namespaces = nil }),
			"set one of namespaceSelector or namespaces"},
		{"a rule a budget has not (CRD)", exception("rule", now.Add(time.Hour), func(e *policyv1.CapacityException) { e.Spec.Exempt[0].Rules = []string{"cpu"} }),
			"the rules of a CapacityBudget or ClusterCapacityBudget are hourlyCost, monthlyCost, spot and instanceFamilies"},
		{"a raise without a budget to raise", exception("raise", now.Add(time.Hour), func(e *policyv1.CapacityException) {
			m := policyv1.Money("0.50")
			e.Spec.ExtraHourlyCost = &m
			e.Spec.Exempt = []policyv1.ExemptPolicy{{Kind: policyv1.ExemptCapacityPolicy, Name: "*"}}
		}), "spec.extraHourlyCost: Invalid value: \"0.50\": raises a budget's hourly limit"},
	} {
		err := testEnv.Client.Create(ctx, tc.obj)
		if err == nil {
			_ = testEnv.Client.Delete(ctx, tc.obj)
			t.Errorf("%s: accepted", tc.name)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}

	// A week is accepted; changing its reason later is too, but moving expiresAt past the
	// bound, or into the past, is refused.
	ok := exception("week", now.Add(7*24*time.Hour))
	if err := testEnv.Client.Create(ctx, ok); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = testEnv.Client.Delete(context.Background(), ok) })
	patch := func(change func(*policyv1.CapacityException)) error {
		cur := &policyv1.CapacityException{}
		if err := testEnv.Client.Get(ctx, client.ObjectKeyFromObject(ok), cur); err != nil {
			t.Fatal(err)
		}
		base := cur.DeepCopy()
		change(cur)
		return testEnv.Client.Patch(ctx, cur, client.MergeFrom(base))
	}
	if err := patch(func(e *policyv1.CapacityException) { e.Spec.Reason = "launch week, extended review" }); err != nil {
		t.Errorf("changing the reason: %v", err)
	}
	if err := patch(func(e *policyv1.CapacityException) { e.Spec.ExpiresAt = metav1.NewTime(now.Add(800 * time.Hour)) }); err == nil ||
		!strings.Contains(err.Error(), "further out than the 720h0m0s") {
		t.Errorf("moving expiresAt past the bound: %v", err)
	}
	if err := patch(func(e *policyv1.CapacityException) { e.Spec.ExpiresAt = metav1.NewTime(now.Add(-time.Hour)) }); err == nil ||
		!strings.Contains(err.Error(), "has already passed") {
		t.Errorf("moving expiresAt into the past: %v", err)
	}
}
