package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// ClusterCapacityBudgetSpec is a budget shared by every namespace its namespaceSelector
// selects (a team, a cost centre): what they may spend together and the instance families
// their pods may land on. A launch must fit each namespace's own CapacityBudget and every
// ClusterCapacityBudget that selects the namespace.
type ClusterCapacityBudgetSpec struct {
	// NamespaceSelector selects the namespaces the budget spans, by their labels. An empty
	// selector selects every namespace.
	// +required
	NamespaceSelector metav1.LabelSelector `json:"namespaceSelector"`
	// The limits, Spot bounds, instance families, enforcement, alerts and schedules of a
	// CapacityBudget, over the namespaces together.
	CapacityBudgetSpec `json:",inline"`
}

// ClusterCapacityBudgetStatus is a CapacityBudget's status over the namespaces together, and
// which namespaces those are.
type ClusterCapacityBudgetStatus struct {
	CapacityBudgetStatus `json:",inline"`
	// Namespaces are the namespaces the selector selects now, by name (the first 100).
	// +kubebuilder:validation:MaxItems:=100
	// +listType=set
	// +optional
	Namespaces []string `json:"namespaces,omitempty"`
	// NamespaceCount is how many namespaces the selector selects now.
	// +optional
	NamespaceCount int32 `json:"namespaceCount"`
}

// ClusterCapacityBudget limits what the namespaces it selects may spend together.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=clustercapacitybudgets,scope=Cluster,categories=karpenter,shortName={ccb}
// +kubebuilder:printcolumn:name="Namespaces",type="integer",JSONPath=".status.namespaceCount",description="namespaces selected"
// +kubebuilder:printcolumn:name="Hourly",type="string",JSONPath=".status.hourlyCost",description="current run-rate of the namespaces together, USD/hour"
// +kubebuilder:printcolumn:name="Limit",type="string",JSONPath=".status.hourlyLimit",description="hourly limit in force, USD/hour"
// +kubebuilder:printcolumn:name="Remaining",type="string",JSONPath=".status.remainingHourlyCost",description=""
// +kubebuilder:printcolumn:name="Exceeded",type="string",JSONPath=".status.conditions[?(@.type==\"BudgetExceeded\")].status",description="run-rate over the limit in force"
// +kubebuilder:printcolumn:name="Blocked",type="integer",JSONPath=".status.blockedPods",description="pods the budget keeps pending"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status",description=""
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description=""
// +kubebuilder:printcolumn:name="Enforcement",type="string",JSONPath=".spec.enforcement",priority=1,description=""
// +kubebuilder:printcolumn:name="InFlight",type="string",JSONPath=".status.inFlightHourlyCost",priority=1,description=""
// +kubebuilder:printcolumn:name="MonthToDate",type="string",JSONPath=".status.monthToDateCost",priority=1,description=""
// +kubebuilder:printcolumn:name="Forecast",type="string",JSONPath=".status.forecastMonthCost",priority=1,description="spend this month at the current run-rate"
// +kubebuilder:printcolumn:name="Alert",type="string",JSONPath=".status.conditions[?(@.type==\"AlertFiring\")].status",priority=1,description=""
type ClusterCapacityBudget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitzero"`

	// +required
	Spec ClusterCapacityBudgetSpec `json:"spec"`
	// +optional
	Status ClusterCapacityBudgetStatus `json:"status,omitzero"`
}

// +kubebuilder:object:root=true

// ClusterCapacityBudgetList contains a list of ClusterCapacityBudget.
type ClusterCapacityBudgetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitzero"`
	Items           []ClusterCapacityBudget `json:"items"`
}

// AsBudget is the budget as the built-in budget policies and the planner read a
// CapacityBudget: the same spec, its name, no namespace, and its status's spend this month.
// The policies name it "ClusterCapacityBudget NAME" (policies.Source with no namespace).
func (c *ClusterCapacityBudget) AsBudget() *CapacityBudget {
	spec := *c.Spec.CapacityBudgetSpec.DeepCopy()
	return &CapacityBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: SchemeGroupVersion.String(), Kind: "ClusterCapacityBudget"},
		ObjectMeta: metav1.ObjectMeta{Name: c.Name, UID: c.UID, Generation: c.Generation, ResourceVersion: c.ResourceVersion, DeletionTimestamp: c.DeletionTimestamp},
		Spec:       spec,
		Status:     *c.Status.CapacityBudgetStatus.DeepCopy(),
	}
}

func init() {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(SchemeGroupVersion, &ClusterCapacityBudget{}, &ClusterCapacityBudgetList{})
		return nil
	})
}
