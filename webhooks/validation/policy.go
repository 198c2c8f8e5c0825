package validation

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/policies"
)

// CapacityBudget validates limits, Spot shares, family patterns and schedules.
func (v *Validator) CapacityBudget(b *policyv1.CapacityBudget) field.ErrorList {
	return budgetSpec(field.NewPath("spec"), &b.Spec)
}

// ClusterCapacityBudget validates what the CRD's schema cannot: a CapacityBudget's spec, and
// a namespaceSelector that parses.
func (v *Validator) ClusterCapacityBudget(b *policyv1.ClusterCapacityBudget) field.ErrorList {
	spec := field.NewPath("spec")
	errs := budgetSpec(spec, &b.Spec.CapacityBudgetSpec)
	if _, err := metav1.LabelSelectorAsSelector(&b.Spec.NamespaceSelector); err != nil {
		errs = append(errs, field.Invalid(spec.Child("namespaceSelector"), b.Spec.NamespaceSelector.String(), err.Error()))
	}
	return errs
}

func budgetSpec(spec *field.Path, s *policyv1.CapacityBudgetSpec) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateLimits(spec.Child("limits"), s.Limits)...)
	errs = append(errs, validateSpot(spec.Child("spot"), s.Spot)...)
	if f := s.InstanceFamilies; f != nil {
		for i, g := range f.Allow {
			errs = append(errs, validateGlob(spec.Child("instanceFamilies", "allow").Index(i), g)...)
		}
		for i, g := range f.Deny {
			errs = append(errs, validateGlob(spec.Child("instanceFamilies", "deny").Index(i), g)...)
		}
	}
	for i, s := range s.Schedules {
		p := spec.Child("schedules").Index(i)
		errs = append(errs, validateSchedule(p.Child("schedule"), s.Schedule)...)
		if s.Duration.Duration <= 0 {
			errs = append(errs, field.Invalid(p.Child("duration"), s.Duration.Duration.String(), "must be greater than zero"))
		}
		if s.Limits == nil && s.Spot == nil {
			errs = append(errs, field.Required(p, "a schedule overrides limits, spot or both"))
		}
		errs = append(errs, validateLimits(p.Child("limits"), s.Limits)...)
		errs = append(errs, validateSpot(p.Child("spot"), s.Spot)...)
	}
	return errs
}

func validateLimits(p *field.Path, l *policyv1.BudgetLimits) field.ErrorList {
	if l == nil {
		return nil
	}
	var errs field.ErrorList
	if l.HourlyCost == nil && l.MonthlyCost == nil {
		errs = append(errs, field.Required(p, "set hourlyCost, monthlyCost or both"))
	}
	if l.HourlyCost != nil {
		errs = append(errs, validateMoney(p.Child("hourlyCost"), string(*l.HourlyCost))...)
	}
	if l.MonthlyCost != nil {
		errs = append(errs, validateMoney(p.Child("monthlyCost"), string(*l.MonthlyCost))...)
	}
	return errs
}

func validateSpot(p *field.Path, s *policyv1.SpotShare) field.ErrorList {
	if s == nil {
		return nil
	}
	var errs field.ErrorList
	for name, v := range map[string]*int32{"minPercent": s.MinPercent, "maxPercent": s.MaxPercent} {
		if v != nil && (*v < 0 || *v > 100) {
			errs = append(errs, field.Invalid(p.Child(name), *v, "must be between 0 and 100"))
		}
	}
	if s.MinPercent != nil && s.MaxPercent != nil && *s.MinPercent > *s.MaxPercent {
		errs = append(errs, field.Invalid(p.Child("minPercent"), *s.MinPercent, fmt.Sprintf("must not exceed maxPercent (%d)", *s.MaxPercent)))
	}
	if s.OnDemandBaseCPU != nil && s.OnDemandBaseCPU.Sign() < 0 {
		errs = append(errs, field.Invalid(p.Child("onDemandBaseCPU"), s.OnDemandBaseCPU.String(), "must not be negative"))
	}
	return errs
}

// TestBudget is how long a CapacityPolicy's tests may run at admission, all together: half
// the API server's default webhook timeout (10 s), so that a slow policy is refused with a
// reason rather than by a timed-out webhook. karpenterctl validate applies the same budget.
var TestBudget = 5 * time.Second

// CapacityPolicy checks that the Rego compiles under OPA v1, that every module joins a known
// decision point, and that the modules' tests pass with the policy's parameters.
func (v *Validator) CapacityPolicy(ctx context.Context, p *policyv1.CapacityPolicy) field.ErrorList {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	params, perr := policies.Parameters(p)
	if perr != nil {
		errs = append(errs, field.Invalid(spec.Child("parameters"), "", perr.Error()))
	}
	modules, index := policies.PolicyModules(p)
	compiled, problems := policies.Compile(modules)
	for _, prob := range problems {
		mp := spec.Child("modules")
		if i, ok := index[prob.Module]; ok {
			mp = mp.Index(i).Child("rego")
		}
		errs = append(errs, field.Invalid(mp, prob.Module, prob.Error()))
	}
	if compiled == nil || perr != nil {
		return errs
	}
	tctx, cancel := context.WithTimeout(ctx, TestBudget)
	defer cancel()
	results, err := compiled.RunTests(tctx, params)
	if err != nil {
		return append(errs, field.InternalError(spec.Child("modules"), err))
	}
	if errors.Is(tctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
		// Tests cut short fail for that reason alone: say so once, not per test.
		return append(errs, field.Invalid(spec.Child("modules"), "", fmt.Sprintf(
			"the policy's tests did not finish within %s, the share of the admission webhook's timeout they may take; "+
				"make them cheaper (karpenterctl policy test shows each test's duration)", TestBudget)))
	}
	for _, r := range results {
		if r.Passed {
			continue
		}
		mp := spec.Child("modules")
		if i, ok := index[r.Module]; ok {
			mp = mp.Index(i).Child("rego")
		}
		errs = append(errs, field.Invalid(mp, r.Name, fmt.Sprintf("%s:%d: test %s failed: %s", r.Module, r.Line, r.Name, r.Message)))
	}
	return errs
}

// DefaultMaxExceptionDuration is how far out a CapacityException's expiresAt may be when it
// is written, unless the manager's --max-exception-duration says otherwise.
const DefaultMaxExceptionDuration = 720 * time.Hour

// CapacityException checks an exception: its amount, its selector, and, when it is created
// (old nil) or its expiresAt changes, that it expires after now and no further out than
// MaxExceptionDuration. An update that leaves expiresAt alone is not refused for the time
// passed since it was written.
func (v *Validator) CapacityException(ex, old *policyv1.CapacityException) field.ErrorList {
	now, maxDuration := v.now(), v.maxExceptionDuration()
	spec := field.NewPath("spec")
	var errs field.ErrorList
	if ex.Spec.NamespaceSelector != nil {
		if _, err := metav1.LabelSelectorAsSelector(ex.Spec.NamespaceSelector); err != nil {
			errs = append(errs, field.Invalid(spec.Child("namespaceSelector"), "", err.Error()))
		}
	}
	if ex.Spec.NamespaceSelector == nil && len(ex.Spec.Namespaces) == 0 {
		errs = append(errs, field.Required(spec.Child("namespaces"), "set one of namespaceSelector or namespaces"))
	}
	if ex.Spec.ExtraHourlyCost != nil {
		p := spec.Child("extraHourlyCost")
		errs = append(errs, validateMoney(p, string(*ex.Spec.ExtraHourlyCost))...)
		budget := false
		for _, x := range ex.Spec.Exempt {
			budget = budget || x.Kind == policyv1.ExemptCapacityBudget || x.Kind == policyv1.ExemptClusterCapacityBudget
		}
		if !budget {
			errs = append(errs, field.Invalid(p, string(*ex.Spec.ExtraHourlyCost), "raises a budget's hourly limit: exempt a CapacityBudget or ClusterCapacityBudget"))
		}
	}
	for i, x := range ex.Spec.Exempt {
		if x.Kind == policyv1.ExemptCapacityPolicy {
			continue
		}
		for j, r := range x.Rules {
			if !slices.Contains(policyv1.BudgetRules, r) {
				errs = append(errs, field.NotSupported(spec.Child("exempt").Index(i).Child("rules").Index(j), r, policyv1.BudgetRules))
			}
		}
	}
	if old == nil || !old.Spec.ExpiresAt.Equal(&ex.Spec.ExpiresAt) {
		p, at := spec.Child("expiresAt"), ex.Spec.ExpiresAt.UTC()
		switch {
		case !now.Before(at):
			errs = append(errs, field.Invalid(p, at.Format(time.RFC3339), fmt.Sprintf("has already passed (it is %s): an exception must expire in the future", now.UTC().Format(time.RFC3339))))
		case at.Sub(now) > maxDuration:
			errs = append(errs, field.Invalid(p, at.Format(time.RFC3339), fmt.Sprintf("is %s from now, further out than the %s an exception may last (--max-exception-duration)",
				at.Sub(now).Round(time.Minute), maxDuration)))
		}
	}
	return errs
}
