package v1

// EnforcementAction says what a policy does with a violation.
// +kubebuilder:validation:Enum:={Deny,Warn,DryRun}
type EnforcementAction string

// Enforcement actions.
const (
	// EnforcementDeny blocks the decision: pods stay pending, launches and disruptions do not happen.
	EnforcementDeny EnforcementAction = "Deny"
	// EnforcementWarn lets the decision through and reports it (Events, admission warnings).
	EnforcementWarn EnforcementAction = "Warn"
	// EnforcementDryRun only records what would have been denied, in status and metrics.
	EnforcementDryRun EnforcementAction = "DryRun"
)

// EnforcementPoint is a place where a policy is enforced (docs/policies.md, "Enforcement per
// point").
// +kubebuilder:validation:Enum:={admission,provisioning,disruption,audit,ci}
type EnforcementPoint string

// Enforcement points.
const (
	// PointAdmission is the validating webhook: the karpenter.admission decision point.
	PointAdmission EnforcementPoint = "admission"
	// PointProvisioning is the provisioner: the karpenter.provisioning and karpenter.launch
	// decision points, the CapacityBudget gate.
	PointProvisioning EnforcementPoint = "provisioning"
	// PointDisruption is the disruption controller's gate: the karpenter.disruption decision point.
	PointDisruption EnforcementPoint = "disruption"
	// PointAudit is the audit of what runs.
	PointAudit EnforcementPoint = "audit"
	// PointCI is karpenterctl (validate, plan): the karpenter.admission decision point offline.
	PointCI EnforcementPoint = "ci"
)

// EnforcementPoints lists every enforcement point.
var EnforcementPoints = []EnforcementPoint{PointAdmission, PointProvisioning, PointDisruption, PointAudit, PointCI}

// ScopedEnforcement sets the action at some enforcement points, in place of spec.enforcement.
type ScopedEnforcement struct {
	// Points are the enforcement points the action applies at: admission, provisioning,
	// disruption, audit, ci.
	// +kubebuilder:validation:MinItems:=1
	// +kubebuilder:validation:MaxItems:=5
	// +listType=set
	// +required
	Points []EnforcementPoint `json:"points"`
	// Action is what a violation does at those points.
	// +required
	Action EnforcementAction `json:"action"`
}

// EnforcementAt is the action at an enforcement point: the scopedEnforcement entry that names
// the point, else enforcement, else Deny. The one rule every enforcement point reads.
func EnforcementAt(enforcement EnforcementAction, scoped []ScopedEnforcement, point EnforcementPoint) EnforcementAction {
	for _, s := range scoped {
		for _, p := range s.Points {
			if p == point && s.Action != "" {
				return s.Action
			}
		}
	}
	if enforcement == "" {
		return EnforcementDeny
	}
	return enforcement
}

// EnforcementAt is the policy's action at an enforcement point.
func (p *CapacityPolicy) EnforcementAt(point EnforcementPoint) EnforcementAction {
	return EnforcementAt(p.Spec.Enforcement, p.Spec.ScopedEnforcement, point)
}

// EnforcementAt is the budget's action at an enforcement point.
func (b *CapacityBudget) EnforcementAt(point EnforcementPoint) EnforcementAction {
	return EnforcementAt(b.Spec.Enforcement, b.Spec.ScopedEnforcement, point)
}

// FailurePolicy says what happens when a policy cannot be evaluated.
// +kubebuilder:validation:Enum:={Fail,Ignore}
type FailurePolicy string

// Failure policies.
const (
	// FailurePolicyFail treats an evaluation error as a denial.
	FailurePolicyFail FailurePolicy = "Fail"
	// FailurePolicyIgnore lets the decision through and reports the error.
	FailurePolicyIgnore FailurePolicy = "Ignore"
)

// Money is an amount in US dollars as a decimal string, e.g. "13.00". Strings, not floats,
// so that what Git holds is what the API server stores.
// +kubebuilder:validation:Pattern=`^[0-9]+(\.[0-9]+)?$`
// +kubebuilder:validation:MaxLength:=20
type Money string

// Decision points: the Rego packages that policies contribute rules to.
const (
	DecisionPointProvisioning = "karpenter.provisioning"
	DecisionPointLaunch       = "karpenter.launch"
	DecisionPointDisruption   = "karpenter.disruption"
	DecisionPointAdmission    = "karpenter.admission"
)

// DecisionPoints lists every decision point, in the order the controllers consult them.
var DecisionPoints = []string{DecisionPointProvisioning, DecisionPointLaunch, DecisionPointDisruption, DecisionPointAdmission}

// Condition types of policy objects.
const (
	ConditionTypeReady       = "Ready"
	ConditionTypeCompiled    = "Compiled"
	ConditionTypeTestsPassed = "TestsPassed"
	// ConditionTypeBudgetExceeded is True when a namespace's run-rate (running and in flight)
	// is over the hourly limit in force.
	ConditionTypeBudgetExceeded = "BudgetExceeded"
	// ConditionTypeSpotShareOutOfRange is True when a namespace's Spot share above its
	// on-demand base is outside the budget's bounds.
	ConditionTypeSpotShareOutOfRange = "SpotShareOutOfRange"
	ConditionTypeEvaluationFailed    = "EvaluationFailed"
	// ConditionTypeAlertFiring is True while a budget's run-rate or its forecast for the month
	// is at or past one of its alerts' thresholds.
	ConditionTypeAlertFiring = "AlertFiring"
)

// The CapacityBudget scheduling gate (docs/architecture.md, "CapacityBudget gate"). In a
// namespace whose CapacityBudget can hold pods back (HoldsPods), the admission webhook adds
// CapacityBudgetGate to every new pod kube-scheduler would schedule, and the provisioner
// removes it once it has placed the pod within the budget: on a node with room, or on a
// NodeClaim it launched. Without the gate, kube-scheduler binds a pod the budget holds back
// into room launched for another namespace's pods. The controller labels such namespaces
// with NamespaceGateLabel so that the webhook sees pods of those namespaces only.
const (
	CapacityBudgetGate      = "policy.karpenter.sh/capacity-budget"
	NamespaceGateLabel      = "policy.karpenter.sh/capacity-budget-gate"
	NamespaceGateLabelValue = "enabled"
)

// HoldsPods reports whether the budget can keep pods pending: it denies at the provisioning
// point, and it has a dollar limit, always or in one of its schedules. CapacityExceptions do
// not change it: a namespace stays gated while an exception lifts its limit, so that the
// pods created meanwhile are held again the moment the exception expires.
func (b *CapacityBudget) HoldsPods() bool {
	if b.DeletionTimestamp != nil || b.EnforcementAt(PointProvisioning) != EnforcementDeny {
		return false
	}
	if b.Spec.Limits != nil {
		return true
	}
	for _, s := range b.Spec.Schedules {
		if s.Limits != nil {
			return true
		}
	}
	return false
}
