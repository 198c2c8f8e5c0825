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
