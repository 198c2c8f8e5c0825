// Package admission is the policy review of the validating webhook and of karpenterctl, one
// code path for both (docs/policies.md, "One verdict from pull request to cluster"): for
// NodePools, CapacityBudgets, CapacityPolicies and CapacityExceptions that passed validation
// it evaluates the policy engine's karpenter.admission decision point at an enforcement point
// (admission in the webhook, ci in karpenterctl), and says in warnings what an object means in
// dollars. What only a cluster knows (namespace labels, usage, the namespaces) it reads
// through Facts, which the webhook answers from the cluster and karpenterctl from its inputs;
// a rule that reads what Facts does not know is reported undecided, never passed. It does no
// I/O of its own and never writes.
package admission

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	autoscalingv1beta1 "github.com/karpenter-policy/karpenter/api/autoscaling/v1beta1"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	karpv1alpha1 "github.com/karpenter-policy/karpenter/api/karpenter/v1alpha1"
	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/policies"
)

// Facts are what a review reads that only a cluster knows. Each answer says whether it is
// known: the webhook knows them (the usage once the cluster model has synced); karpenterctl
// knows what its inputs give (--namespaces, --nodes).
type Facts interface {
	// Namespace is a namespace with its labels; known is false when its labels are unknown.
	Namespace(ctx context.Context, name string) (ns policies.Namespace, known bool)
	// Namespaces are every namespace, with labels; known is false when they are unknown.
	Namespaces(ctx context.Context) (nss []policies.Namespace, known bool)
	// Usage is what a namespace runs at (docs/architecture.md, "Cost attribution"); known is
	// false when it is unknown.
	Usage(ctx context.Context, namespace string) (u policies.Usage, known bool)
	// InstanceTypes are a NodePool's instance types; nil when unknown.
	InstanceTypes(ctx context.Context, np *karpv1.NodePool) []*cloudprovider.InstanceType
}

// ResultKind says what a result of a review is.
type ResultKind string

// Result kinds.
const (
	// Deny refuses the object at this enforcement point.
	Deny ResultKind = "deny"
	// Warn is a warn result, or a deny result of a policy that warns at this point.
	Warn ResultKind = "warn"
	// DryRun is a deny result of a policy in DryRun at this point.
	DryRun ResultKind = "dryrun"
	// Error is a policy that could not be evaluated.
	Error ResultKind = "error"
	// Notice is a warning no policy gives: a feature the object relies on is off, a NodePool
	// has no cpu limit.
	Notice ResultKind = "notice"
	// Info is what the object means in dollars, or which namespaces it governs: an admission
	// warning of the webhook's that warns of nothing.
	Info ResultKind = "info"
	// Undecided is a policy whose rules read what is not known.
	Undecided ResultKind = "undecided"
)

// Result is one finding of a review.
type Result struct {
	Kind ResultKind
	// Source is the policy object that said it; zero for Impact.
	Source policies.Source
	// Rule is the rule its result names, when it names one.
	Rule    string
	Message string
}

// Text is the result as the webhook words it in an admission warning or denial.
func (r Result) Text() string {
	switch r.Kind {
	case Deny:
		return fmt.Sprintf("%s: %s", r.Source, r.Message)
	case DryRun:
		return "dry run, would deny: " + r.Message
	case Error:
		return "policy evaluation failed: " + r.Message
	case Undecided:
		return fmt.Sprintf("policy review undecided: %s: %s", r.Source, r.Message)
	}
	return r.Message
}

// Policy names the policy object for karpenterctl's "policy NAME": a CapacityPolicy's name,
// or the kind and name of another source; "" for Notice and Info.
func (r Result) Policy() string {
	switch r.Source.Kind {
	case "":
		return ""
	case "CapacityPolicy":
		return r.Source.Name
	}
	return r.Source.String()
}

// Verdict is a review's outcome.
type Verdict struct {
	// Denials refuse the object.
	Denials []Result
	// Warnings do not: warn and dry-run results, evaluation errors, undecided rules, notices
	// and the object's cost (Info), in that order.
	Warnings []Result
	// Unknown are the inputs the review did not know (policies.Unknown*); Undecided the
	// policies whose rules read them (each also a Warnings entry of kind Undecided).
	Unknown   []string
	Undecided []policies.Undecided
	// Exemptions are what CapacityExceptions let through.
	Exemptions []policies.Exemption
}

// Reviewer reviews objects at one enforcement point.
type Reviewer struct {
	engine *policies.Engine
	facts  Facts
	now    func() time.Time
	point  policyv1.EnforcementPoint
	// nodeRepair says whether node repair runs: a budget for Unhealthy limits nothing without it.
	nodeRepair bool
	// staticOff says the StaticCapacity feature gate is off: spec.replicas does nothing.
	staticOff bool
	// overlaysOff says the NodeOverlay feature gate is off: NodeOverlays change nothing.
	overlaysOff bool
	// buffersOff says the CapacityBuffer feature gate is off: CapacityBuffers keep no room.
	buffersOff bool
}

// New returns a reviewer at the admission enforcement point; now is the clock every decision
// of the review reads (time.Now when nil).
func New(e *policies.Engine, facts Facts, now func() time.Time) *Reviewer {
	if now == nil {
		now = time.Now
	}
	return &Reviewer{engine: e, facts: facts, now: now, point: policyv1.PointAdmission}
}

// AtPoint sets the enforcement point: admission (the webhook) or ci (karpenterctl).
func (a *Reviewer) AtPoint(p policyv1.EnforcementPoint) *Reviewer {
	a.point = p
	return a
}

// WithCapacityBuffer tells the review whether CapacityBuffers are kept (the CapacityBuffer
// feature gate).
func (a *Reviewer) WithCapacityBuffer(on bool) *Reviewer {
	a.buffersOff = !on
	return a
}

// WithNodeOverlay tells the review whether NodeOverlays are applied (the NodeOverlay feature
// gate).
func (a *Reviewer) WithNodeOverlay(on bool) *Reviewer {
	a.overlaysOff = !on
	return a
}

// WithStaticCapacity tells the review whether static NodePools run (the StaticCapacity
// feature gate).
func (a *Reviewer) WithStaticCapacity(on bool) *Reviewer {
	a.staticOff = !on
	return a
}

// WithNodeRepair tells the review whether node repair runs (the NodeRepair feature gate).
func (a *Reviewer) WithNodeRepair(on bool) *Reviewer {
	a.nodeRepair = on
	return a
}

// OperationUnknown is the operation of a review that cannot tell whether the object exists
// in the cluster (karpenterctl validate): rules that read input.operation or input.oldObject
// are undecided.
const OperationUnknown = ""

// Review reviews an object: operation is CREATE or UPDATE (old is the object before), or
// OperationUnknown. Kinds no decision point reads get only the warnings of features that are
// off.
func (a *Reviewer) Review(ctx context.Context, operation string, obj, old runtime.Object) Verdict {
	var v Verdict
	notice := func(m string) { v.Warnings = append(v.Warnings, Result{Kind: Notice, Message: m}) }
	switch o := obj.(type) {
	case *karpv1alpha1.NodeOverlay:
		// No policy decision point reads NodeOverlays; admission says whether one is acted on.
		if a.overlaysOff {
			notice(fmt.Sprintf("NodeOverlay %s: NodeOverlays are off (--feature-gates NodeOverlay=true turns them on): it changes no price or capacity", o.Name))
		}
		return v
	case *autoscalingv1beta1.CapacityBuffer:
		// No policy decision point reads CapacityBuffers at admission (the provisioning one
		// attributes their room to the namespace); admission says whether one is acted on.
		if a.buffersOff {
			notice(fmt.Sprintf("CapacityBuffer %s: CapacityBuffers are off (--feature-gates CapacityBuffer=true turns them on): it keeps no room", o.Name))
		}
		return v
	}
	now := a.now()
	in := policies.AdmissionInput{Operation: operation, Now: now, Point: a.point}
	if operation == OperationUnknown {
		in.Operation = "CREATE"
		v.Unknown = append(v.Unknown, policies.UnknownOperation, policies.UnknownOldObject)
	}
	var msgs []Result
	switch o := obj.(type) {
	case *karpv1.NodePool:
		in.Kind = "NodePool"
		msgs = a.nodePoolImpact(ctx, o, old)
		msgs = append(msgs, a.unhealthyBudgets(o)...)
		msgs = append(msgs, a.staticReplicas(o)...)
	case *policyv1.CapacityBudget:
		in.Kind, in.Budget = "CapacityBudget", o
		ns, known := a.facts.Namespace(ctx, o.Namespace)
		if !known {
			v.Unknown = append(v.Unknown, policies.UnknownNamespaceLabels)
		}
		in.Namespace = &ns
		usage, usageKnown := a.facts.Usage(ctx, o.Namespace)
		if !usageKnown {
			v.Unknown = append(v.Unknown, policies.UnknownUsage)
		}
		in.Usage = usage
		msgs = a.budgetImpact(ctx, o, ns, usage, usageKnown, now)
	case *policyv1.ClusterCapacityBudget:
		// Cluster-scoped: the CapacityPolicies' admission rules read it as they read a
		// CapacityPolicy, with no namespace.
		in.Kind = "ClusterCapacityBudget"
	case *policyv1.CapacityPolicy:
		in.Kind = "CapacityPolicy"
		msgs = a.policyImpact(ctx, o)
	case *policyv1.CapacityException:
		in.Kind = "CapacityException"
		msgs = a.exceptionImpact(ctx, o, now)
	default:
		return v
	}
	var err error
	if in.Object, err = runtime.DefaultUnstructuredConverter.ToUnstructured(obj); err != nil {
		notice(fmt.Sprintf("policy review skipped: %v", err))
		return v
	}
	if old != nil && operation != OperationUnknown {
		if in.OldObject, err = runtime.DefaultUnstructuredConverter.ToUnstructured(old); err != nil {
			notice(fmt.Sprintf("policy review skipped: %v", err))
			return v
		}
	}
	in.Unknown = v.Unknown
	d := a.engine.Admission(ctx, in)
	for _, x := range d.Denied() {
		v.Denials = append(v.Denials, Result{Kind: Deny, Source: x.Source, Rule: x.Rule, Message: x.Message})
	}
	for _, x := range d.Warned() {
		v.Warnings = append(v.Warnings, Result{Kind: Warn, Source: x.Source, Rule: x.Rule, Message: x.Message})
	}
	for _, x := range d.DryRun() {
		v.Warnings = append(v.Warnings, Result{Kind: DryRun, Source: x.Source, Rule: x.Rule, Message: x.Message})
	}
	for _, e := range d.Errors {
		v.Warnings = append(v.Warnings, Result{Kind: Error, Source: e.Source, Message: e.Error()})
	}
	for _, u := range d.Undecided {
		v.Warnings = append(v.Warnings, Result{Kind: Undecided, Source: u.Source, Message: u.Says()})
	}
	v.Undecided = d.Undecided
	v.Exemptions = d.Exemptions
	v.Warnings = append(v.Warnings, msgs...)
	return v
}
