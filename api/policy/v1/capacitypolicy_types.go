package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// CapacityPolicySpec adds Rego modules to the policy engine's decision points, for the
// namespaces its selector matches.
type CapacityPolicySpec struct {
	// Enforcement is what happens when the policy's deny rules fire.
	// +kubebuilder:default:=Deny
	// +optional
	Enforcement EnforcementAction `json:"enforcement,omitempty"`
	// ScopedEnforcement sets the action at some enforcement points (admission, provisioning,
	// disruption, audit, ci); a point no entry names takes enforcement. Each point may be
	// named once.
	// +kubebuilder:validation:MaxItems:=5
	// +kubebuilder:validation:XValidation:message="each enforcement point may be named in one entry only",rule="self.all(a, a.points.all(p, self.filter(b, p in b.points).size() == 1))"
	// +listType=atomic
	// +optional
	ScopedEnforcement []ScopedEnforcement `json:"scopedEnforcement,omitempty"`
	// FailurePolicy is what happens when the policy cannot be evaluated.
	// +kubebuilder:default:=Ignore
	// +optional
	FailurePolicy FailurePolicy `json:"failurePolicy,omitempty"`
	// NamespaceSelector selects the namespaces whose pods the policy applies to; empty selects all.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
	// Parameters are passed to the modules as data.parameters.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Type=object
	// +kubebuilder:validation:Schemaless
	// +optional
	Parameters *runtime.RawExtension `json:"parameters,omitempty"`
	// Modules are Rego (v1 syntax) modules; each declares one of the decision point packages
	// (karpenter.provisioning, karpenter.launch, karpenter.disruption, karpenter.admission),
	// or is a test module whose rules start with test_.
	// +kubebuilder:validation:MinItems:=1
	// +kubebuilder:validation:MaxItems:=32
	// +listType=map
	// +listMapKey=name
	// +required
	Modules []PolicyModule `json:"modules"`
}

// PolicyModule is one Rego source file.
type PolicyModule struct {
	// Name is the module's file name, used in error messages, e.g. no-gpu.rego.
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.-]+\.rego$`
	// +kubebuilder:validation:MaxLength:=253
	// +required
	Name string `json:"name"`
	// Rego is the module's source.
	// +kubebuilder:validation:MinLength:=1
	// +kubebuilder:validation:MaxLength:=262144
	// +required
	Rego string `json:"rego"`
}

// PolicyError locates a compile error in a module.
type PolicyError struct {
	// Module is the module's name.
	// +required
	Module string `json:"module"`
	// Line is the 1-based line of the error.
	// +optional
	Line int32 `json:"line,omitempty"`
	// Column is the 1-based column of the error.
	// +optional
	Column int32 `json:"column,omitempty"`
	// Message is the compiler's message.
	// +required
	Message string `json:"message"`
}

// PolicyTestResults are the outcome of the policy's test_ rules.
type PolicyTestResults struct {
	// Passed is the number of tests that passed.
	// +optional
	Passed int32 `json:"passed"`
	// Failed is the number of tests that failed or could not be evaluated.
	// +optional
	Failed int32 `json:"failed"`
	// Failures names each failed test.
	// +kubebuilder:validation:MaxItems:=50
	// +optional
	Failures []PolicyTestFailure `json:"failures,omitempty"`
}

// PolicyTestFailure names a failed test.
type PolicyTestFailure struct {
	// Name is the test rule's full name, e.g. data.karpenter.provisioning.test_denies_gpu.
	// +required
	Name string `json:"name"`
	// Message says why it failed, when known.
	// +optional
	Message string `json:"message,omitempty"`
}

// PolicyViolations counts a policy's results in the audit's reports now (OpenReports Reports
// and the ClusterReport): denied (fail results where it denies), warned (warn results) and
// dryRun (fail results where it is in DryRun: what it would refuse enforced). The reports are
// rebuilt from the cluster by the leader, so a restart or a failover counts the same.
type PolicyViolations struct {
	// +optional
	Denied int64 `json:"denied"`
	// +optional
	Warned int64 `json:"warned"`
	// +optional
	DryRun int64 `json:"dryRun"`
}

// CapacityPolicyStatus reports whether the policy compiles and its tests pass.
type CapacityPolicyStatus struct {
	// DecisionPoints are the decision points the modules join.
	// +listType=set
	// +optional
	DecisionPoints []string `json:"decisionPoints,omitempty"`
	// CompileErrors lists each compile error with its module, line and column.
	// +kubebuilder:validation:MaxItems:=50
	// +optional
	CompileErrors []PolicyError `json:"compileErrors,omitempty"`
	// Tests are the results of the modules' test_ rules.
	// +optional
	Tests *PolicyTestResults `json:"tests,omitempty"`
	// EvaluationErrors counts evaluations that failed, carried over restarts: the count status
	// held when the controller started plus those since.
	// +optional
	EvaluationErrors int64 `json:"evaluationErrors,omitempty"`
	// Violations counts the policy's results in the audit's reports.
	// +optional
	Violations *PolicyViolations `json:"violations,omitempty"`
	// ObservedGeneration is the metadata.generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Compiled, TestsPassed and Ready.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// CapacityPolicy adds Rego rules to the policy engine, for the namespaces it selects.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=capacitypolicies,scope=Cluster,categories=karpenter,shortName={cpol}
// +kubebuilder:printcolumn:name="Enforcement",type="string",JSONPath=".spec.enforcement",description=""
// +kubebuilder:printcolumn:name="FailurePolicy",type="string",JSONPath=".spec.failurePolicy",description=""
// +kubebuilder:printcolumn:name="Compiled",type="string",JSONPath=".status.conditions[?(@.type==\"Compiled\")].status",description=""
// +kubebuilder:printcolumn:name="Tests",type="string",JSONPath=".status.conditions[?(@.type==\"TestsPassed\")].status",description=""
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status",description=""
// +kubebuilder:printcolumn:name="Denied",type="integer",JSONPath=".status.violations.denied",description="deny results while enforcing"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description=""
// +kubebuilder:printcolumn:name="Warned",type="integer",JSONPath=".status.violations.warned",priority=1,description=""
// +kubebuilder:printcolumn:name="DryRun",type="integer",JSONPath=".status.violations.dryRun",priority=1,description=""
type CapacityPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitzero"`

	// +required
	Spec CapacityPolicySpec `json:"spec"`
	// +optional
	Status CapacityPolicyStatus `json:"status,omitzero"`
}

// +kubebuilder:object:root=true

// CapacityPolicyList contains a list of CapacityPolicy.
type CapacityPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitzero"`
	Items           []CapacityPolicy `json:"items"`
}

func init() {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(SchemeGroupVersion, &CapacityPolicy{}, &CapacityPolicyList{})
		return nil
	})
}
