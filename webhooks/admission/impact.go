package admission

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/policies"
)

// nodePoolImpact is the most its cpu limit lets the NodePool cost per hour, at the cheapest
// and the dearest $/vCPU among its instance types' offerings.
func (a *Reviewer) nodePoolImpact(ctx context.Context, np *karpv1.NodePool, old runtime.Object) []Result {
	ceiling := func(p *karpv1.NodePool) (lo, hi float64, ok bool) {
		limit, has := p.Spec.Limits[corev1.ResourceCPU]
		if !has {
			return 0, 0, false
		}
		its := a.facts.InstanceTypes(ctx, p)
		if len(its) == 0 {
			return 0, 0, false
		}
		minPer, maxPer := math.Inf(1), 0.0
		for _, it := range its {
			cpu := float64(it.Capacity.Cpu().MilliValue()) / 1000
			if cpu <= 0 {
				continue
			}
			for _, o := range it.Offerings.Available() {
				minPer, maxPer = min(minPer, o.Price/cpu), max(maxPer, o.Price/cpu)
			}
		}
		if maxPer == 0 {
			return 0, 0, false
		}
		cpus := limit.AsApproximateFloat64()
		return cpus * minPer, cpus * maxPer, true
	}
	lo, hi, ok := ceiling(np)
	if !ok {
		if _, has := np.Spec.Limits[corev1.ResourceCPU]; !has {
			return notice(fmt.Sprintf("NodePool %s has no cpu limit: only CapacityBudgets bound what its nodes cost", np.Name))
		}
		return nil
	}
	msg := fmt.Sprintf("NodePool %s: its cpu limit allows nodes costing $%.2f-$%.2f/hour at its instance types' prices", np.Name, lo, hi)
	if prev, isNP := old.(*karpv1.NodePool); isNP && prev != nil {
		if plo, phi, pok := ceiling(prev); pok && (plo != lo || phi != hi) {
			msg += fmt.Sprintf(" (was $%.2f-$%.2f/hour)", plo, phi)
		}
	}
	return info(msg)
}

// unhealthyBudgets warns of budgets that name Unhealthy while node repair is off: accepted (a
// gate may be turned on later) but acting on nothing until then.
func (a *Reviewer) unhealthyBudgets(np *karpv1.NodePool) []Result {
	if a.nodeRepair {
		return nil
	}
	for _, b := range np.Spec.Disruption.Budgets {
		if slices.Contains(b.Reasons, karpv1.DisruptionReasonUnhealthy) {
			return notice(fmt.Sprintf("NodePool %s: a disruption budget names Unhealthy, but node repair is off (--feature-gates NodeRepair=true): it limits nothing", np.Name))
		}
	}
	return nil
}

// staticReplicas warns about spec.replicas while static NodePools are off (the
// StaticCapacity feature gate): accepted, as upstream's CRD accepts it, but acted on by nothing.
func (a *Reviewer) staticReplicas(np *karpv1.NodePool) []Result {
	if !a.staticOff || !np.IsStatic() {
		return nil
	}
	return notice(fmt.Sprintf("NodePool %s: spec.replicas makes it static, but static NodePools are off (--feature-gates StaticCapacity=false): no node is launched or removed for it", np.Name))
}

// budgetImpact says what the budget allows against what the namespace runs at now (when the
// usage is known).
func (a *Reviewer) budgetImpact(ctx context.Context, b *policyv1.CapacityBudget, ns policies.Namespace, u policies.Usage, usageKnown bool, now time.Time) []Result {
	c := a.engine.Provisioning(ctx, policies.ProvisioningInput{Namespace: ns, Budget: b, Usage: u, Now: now})
	if c.Budget == nil || !c.Budget.HasLimit {
		return nil
	}
	if !usageKnown {
		return info(fmt.Sprintf("CapacityBudget %s/%s allows $%.2f/hour now (%s); what the namespace runs at is not known here",
			b.Namespace, b.Name, c.Budget.HourlyLimit, c.Budget.LimitReason))
	}
	return info(fmt.Sprintf("CapacityBudget %s/%s allows $%.2f/hour now (%s); the namespace runs at $%.2f/hour with $%.2f/hour in flight",
		b.Namespace, b.Name, c.Budget.HourlyLimit, c.Budget.LimitReason, u.HourlyCost, u.InFlightHourlyCost))
}

// selected are the names of the namespaces a selector (nil: every namespace) or a list
// picks, sorted; known is false when the namespaces are not.
func (a *Reviewer) selected(ctx context.Context, sel *metav1.LabelSelector, names []string) (out []string, known bool) {
	nss, known := a.facts.Namespaces(ctx)
	if !known {
		return nil, false
	}
	s := labels.Everything()
	if sel != nil {
		parsed, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			return nil, true
		}
		s = parsed
	}
	for _, ns := range nss {
		if (names != nil && slices.Contains(names, ns.Name)) || (names == nil && s.Matches(labels.Set(ns.Labels))) {
			out = append(out, ns.Name)
		}
	}
	sort.Strings(out)
	return out, true
}

// listed is up to ten names and how many more there are.
func listed(names []string) string {
	if len(names) > 10 {
		names = append(names[:10:10], fmt.Sprintf("and %d more", len(names)-10))
	}
	return strings.Join(names, ", ")
}

// policyImpact names the namespaces the policy selects.
func (a *Reviewer) policyImpact(ctx context.Context, p *policyv1.CapacityPolicy) []Result {
	names, known := a.selected(ctx, p.Spec.NamespaceSelector, nil)
	switch {
	case !known && p.Spec.NamespaceSelector == nil:
		return info(fmt.Sprintf("CapacityPolicy %s applies to every namespace", p.Name))
	case !known:
		return info(fmt.Sprintf("CapacityPolicy %s: the namespaces it applies to are not known here", p.Name))
	case len(names) == 0:
		return info(fmt.Sprintf("CapacityPolicy %s selects no namespace yet", p.Name))
	}
	return info(fmt.Sprintf("CapacityPolicy %s applies to %d namespaces: %s", p.Name, len(names), listed(names)))
}

func info(msg string) []Result   { return []Result{{Kind: Info, Message: msg}} }
func notice(msg string) []Result { return []Result{{Kind: Notice, Message: msg}} }

// exceptionImpact says which namespaces the exception exempts, from what, and until when.
func (a *Reviewer) exceptionImpact(ctx context.Context, ex *policyv1.CapacityException, now time.Time) []Result {
	var from []string
	for _, x := range ex.Spec.Exempt {
		s := string(x.Kind) + " " + x.Name
		if len(x.Rules) > 0 {
			s += " (" + strings.Join(x.Rules, ", ") + ")"
		}
		from = append(from, s)
	}
	what := strings.Join(from, ", ")
	if ex.Spec.ExtraHourlyCost != nil {
		what += fmt.Sprintf(", hourly limits raised by $%s/hour", *ex.Spec.ExtraHourlyCost)
	}
	until := fmt.Sprintf("until %s (%s from now)", ex.Spec.ExpiresAt.UTC().Format(time.RFC3339), ex.Spec.ExpiresAt.Sub(now).Round(time.Minute))
	var names []string
	if ex.Spec.NamespaceSelector == nil {
		names = ex.Spec.Namespaces
	}
	got, known := a.selected(ctx, ex.Spec.NamespaceSelector, names)
	switch {
	case !known && ex.Spec.NamespaceSelector != nil:
		return info(fmt.Sprintf("CapacityException %s exempts the namespaces it selects from %s %s; which they are is not known here", ex.Name, what, until))
	case !known:
		got = append([]string(nil), ex.Spec.Namespaces...)
		sort.Strings(got)
	case len(got) == 0:
		return info(fmt.Sprintf("CapacityException %s selects no namespace yet: it exempts from %s %s", ex.Name, what, until))
	}
	return info(fmt.Sprintf("CapacityException %s exempts %d namespaces from %s %s: %s", ex.Name, len(got), what, until, listed(got)))
}
