// Package admission is the validating webhook's policy review: it evaluates the policy
// engine's karpenter.admission decision point for NodePools, CapacityBudgets and
// CapacityPolicies, and says in admission warnings what an object means in dollars. It reads
// the cluster through the cached client and the shared cost attribution; it never writes.
package admission

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	autoscalingv1beta1 "github.com/karpenter-policy/karpenter/api/autoscaling/v1beta1"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	karpv1alpha1 "github.com/karpenter-policy/karpenter/api/karpenter/v1alpha1"
	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	policycontrollers "github.com/karpenter-policy/karpenter/controllers/policy"
	"github.com/karpenter-policy/karpenter/policies"
)

// PolicyReview is the validating webhook's policy review (webhooks.Reviewer): it evaluates the
// karpenter.admission decision point for NodePools, CapacityBudgets and CapacityPolicies and
// says what the object means in dollars, so that a pull request synced by ArgoCD shows it.
type PolicyReview struct {
	client client.Client
	engine *policies.Engine
	cloud  cloudprovider.CloudProvider
	usage  *policycontrollers.Usage
	clock  clock.Clock
	// nodeRepair says whether node repair runs: a budget for Unhealthy limits nothing without it.
	nodeRepair bool
	// staticOff says the StaticCapacity feature gate is off: spec.replicas does nothing.
	staticOff bool
	// overlaysOff says the NodeOverlay feature gate is off: NodeOverlays change nothing.
	overlaysOff bool
	// buffersOff says the CapacityBuffer feature gate is off: CapacityBuffers keep no room.
	buffersOff bool
}

// WithCapacityBuffer tells the review whether CapacityBuffers are kept (the CapacityBuffer
// feature gate).
func (a *PolicyReview) WithCapacityBuffer(on bool) *PolicyReview {
	a.buffersOff = !on
	return a
}

// WithNodeOverlay tells the review whether NodeOverlays are applied (the NodeOverlay feature
// gate).
func (a *PolicyReview) WithNodeOverlay(on bool) *PolicyReview {
	a.overlaysOff = !on
	return a
}

// WithStaticCapacity tells the review whether static NodePools run (the StaticCapacity
// feature gate).
func (a *PolicyReview) WithStaticCapacity(on bool) *PolicyReview {
	a.staticOff = !on
	return a
}

// WithNodeRepair tells the review whether node repair runs (the NodeRepair feature gate).
func (a *PolicyReview) WithNodeRepair(on bool) *PolicyReview {
	a.nodeRepair = on
	return a
}

// NewPolicyReview returns the review.
func NewPolicyReview(c client.Client, e *policies.Engine, cloud cloudprovider.CloudProvider, usage *policycontrollers.Usage, clk clock.Clock) *PolicyReview {
	return &PolicyReview{client: c, engine: e, cloud: cloud, usage: usage, clock: clk}
}

// Review implements webhooks.Reviewer. A review that cannot read the cluster warns and lets
// the object through: admission never fails on the policy layer's own trouble.
func (a *PolicyReview) Review(ctx context.Context, operation string, obj, old client.Object) (warnings, denials []string) {
	if o, ok := obj.(*karpv1alpha1.NodeOverlay); ok {
		// No policy decision point reads NodeOverlays; admission says whether one is acted on.
		if a.overlaysOff {
			return []string{fmt.Sprintf("NodeOverlay %s: NodeOverlays are off (--feature-gates NodeOverlay=true turns them on): it changes no price or capacity", o.Name)}, nil
		}
		return nil, nil
	}
	if o, ok := obj.(*autoscalingv1beta1.CapacityBuffer); ok {
		// No policy decision point reads CapacityBuffers at admission (the provisioning one
		// attributes their room to the namespace); admission says whether one is acted on.
		if a.buffersOff {
			return []string{fmt.Sprintf("CapacityBuffer %s: CapacityBuffers are off (--feature-gates CapacityBuffer=true turns them on): it keeps no room", o.Name)}, nil
		}
		return nil, nil
	}
	in := policies.AdmissionInput{Operation: operation, Now: a.clock.Now()}
	var impact []string
	switch o := obj.(type) {
	case *karpv1.NodePool:
		in.Kind = "NodePool"
		impact = a.nodePoolImpact(ctx, o, old)
		impact = append(impact, a.unhealthyBudgets(o)...)
		impact = append(impact, a.staticReplicas(o)...)
	case *policyv1.CapacityBudget:
		in.Kind, in.Budget = "CapacityBudget", o
		ns := a.namespace(ctx, o.Namespace)
		in.Namespace = &ns
		if all, err := a.usage.ByNamespace(ctx); err == nil {
			in.Usage = all[o.Namespace]
		}
		impact = a.budgetImpact(ctx, o, in.Usage)
	case *policyv1.CapacityPolicy:
		in.Kind = "CapacityPolicy"
		impact = a.policyImpact(ctx, o)
	default:
		return nil, nil
	}
	var err error
	if in.Object, err = runtime.DefaultUnstructuredConverter.ToUnstructured(obj); err != nil {
		return []string{fmt.Sprintf("policy review skipped: %v", err)}, nil
	}
	if old != nil {
		if in.OldObject, err = runtime.DefaultUnstructuredConverter.ToUnstructured(old); err != nil {
			return []string{fmt.Sprintf("policy review skipped: %v", err)}, nil
		}
	}
	d := a.engine.Admission(ctx, in)
	for _, v := range d.Denied() {
		denials = append(denials, fmt.Sprintf("%s: %s", v.Source, v.Message))
	}
	for _, v := range d.Warned() {
		warnings = append(warnings, v.Message)
	}
	for _, v := range d.DryRun() {
		warnings = append(warnings, "dry run, would deny: "+v.Message)
	}
	for _, e := range d.Errors {
		log.FromContext(ctx).Error(e.Err, "admission policy evaluation failed", "source", e.Source.String())
		warnings = append(warnings, "policy evaluation failed: "+e.Error())
	}
	return append(warnings, impact...), denials
}

func (a *PolicyReview) namespace(ctx context.Context, name string) policies.Namespace {
	ns := &corev1.Namespace{}
	if err := a.client.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		return policies.Namespace{Name: name}
	}
	return policies.Namespace{Name: name, Labels: ns.Labels}
}

// nodePoolImpact is the most its cpu limit lets the NodePool cost per hour, at the cheapest
// and the dearest $/vCPU among its instance types' offerings.
func (a *PolicyReview) nodePoolImpact(ctx context.Context, np *karpv1.NodePool, old client.Object) []string {
	ceiling := func(p *karpv1.NodePool) (lo, hi float64, ok bool) {
		limit, has := p.Spec.Limits[corev1.ResourceCPU]
		if !has {
			return 0, 0, false
		}
		its, err := a.cloud.GetInstanceTypes(ctx, p)
		if err != nil || len(its) == 0 {
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
			return []string{fmt.Sprintf("NodePool %s has no cpu limit: only CapacityBudgets bound what its nodes cost", np.Name)}
		}
		return nil
	}
	msg := fmt.Sprintf("NodePool %s: its cpu limit allows nodes costing $%.2f-$%.2f/hour at its instance types' prices", np.Name, lo, hi)
	if prev, isNP := old.(*karpv1.NodePool); isNP && prev != nil {
		if plo, phi, pok := ceiling(prev); pok && (plo != lo || phi != hi) {
			msg += fmt.Sprintf(" (was $%.2f-$%.2f/hour)", plo, phi)
		}
	}
	return []string{msg}
}

// unhealthyBudgets warns of budgets that name Unhealthy while node repair is off: accepted (a
// gate may be turned on later) but acting on nothing until then.
func (a *PolicyReview) unhealthyBudgets(np *karpv1.NodePool) []string {
	if a.nodeRepair {
		return nil
	}
	for _, b := range np.Spec.Disruption.Budgets {
		if slices.Contains(b.Reasons, karpv1.DisruptionReasonUnhealthy) {
			return []string{fmt.Sprintf("NodePool %s: a disruption budget names Unhealthy, but node repair is off (--feature-gates NodeRepair=true): it limits nothing", np.Name)}
		}
	}
	return nil
}

// staticReplicas warns about spec.replicas while static NodePools are off (the
// StaticCapacity feature gate): accepted, as upstream's CRD accepts it, but acted on by nothing.
func (a *PolicyReview) staticReplicas(np *karpv1.NodePool) []string {
	if !a.staticOff || !np.IsStatic() {
		return nil
	}
	return []string{fmt.Sprintf("NodePool %s: spec.replicas makes it static, but static NodePools are off (--feature-gates StaticCapacity=false): no node is launched or removed for it", np.Name)}
}

// budgetImpact says what the budget allows against what the namespace runs at now.
func (a *PolicyReview) budgetImpact(ctx context.Context, b *policyv1.CapacityBudget, u policies.Usage) []string {
	c := a.engine.Provisioning(ctx, policies.ProvisioningInput{Namespace: policies.Namespace{Name: b.Namespace}, Budget: b, Usage: u, Now: a.clock.Now()})
	if c.Budget == nil || !c.Budget.HasLimit {
		return nil
	}
	return []string{fmt.Sprintf("CapacityBudget %s/%s allows $%.2f/hour now (%s); the namespace runs at $%.2f/hour with $%.2f/hour in flight",
		b.Namespace, b.Name, c.Budget.HourlyLimit, c.Budget.LimitReason, u.HourlyCost, u.InFlightHourlyCost)}
}

// policyImpact names the namespaces the policy selects.
func (a *PolicyReview) policyImpact(ctx context.Context, p *policyv1.CapacityPolicy) []string {
	sel := labels.Everything()
	if p.Spec.NamespaceSelector != nil {
		s, err := metav1.LabelSelectorAsSelector(p.Spec.NamespaceSelector)
		if err != nil {
			return nil
		}
		sel = s
	}
	var nss corev1.NamespaceList
	if err := a.client.List(ctx, &nss, client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil
	}
	names := make([]string, 0, len(nss.Items))
	for _, ns := range nss.Items {
		names = append(names, ns.Name)
	}
	sort.Strings(names)
	if len(names) > 10 {
		names = append(names[:10], fmt.Sprintf("and %d more", len(names)-10))
	}
	if len(names) == 0 {
		return []string{fmt.Sprintf("CapacityPolicy %s selects no namespace yet", p.Name)}
	}
	return []string{fmt.Sprintf("CapacityPolicy %s applies to %d namespaces: %s", p.Name, len(nss.Items), strings.Join(names, ", "))}
}
