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

// HoldsPods reports whether the budget can keep pods pending: it denies, and it has a dollar
// limit, always or in one of its schedules.
func (b *CapacityBudget) HoldsPods() bool {
	if b.DeletionTimestamp != nil || (b.Spec.Enforcement != "" && b.Spec.Enforcement != EnforcementDeny) {
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
