package v1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// CapacityBudgetSpec is what a namespace may spend and run on: a dollar run-rate, a Spot share
// and the instance families its pods may land on. The platform team sets it in the namespace
// it governs.
type CapacityBudgetSpec struct {
	// Limits caps the namespace's cost.
	// +optional
	Limits *BudgetLimits `json:"limits,omitempty"`
	// Spot bounds the share of the namespace's requested vCPU that runs on Spot.
	// +optional
	Spot *SpotShare `json:"spot,omitempty"`
	// InstanceFamilies allows and denies instance families or types by glob, e.g. "m*", "g5",
	// "*metal*". Deny wins over allow; an empty allow list allows every family.
	// +optional
	InstanceFamilies *InstanceFamilies `json:"instanceFamilies,omitempty"`
	// Enforcement is what happens when a decision would break the budget.
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
	// Alerts set the AlertFiring condition, an Event and the karpenter_budget_alert_firing
	// metric when the namespace's run-rate or its forecast for the month reaches a share of the
	// limit in force.
	// +kubebuilder:validation:MaxItems:=10
	// +listType=atomic
	// +optional
	Alerts []BudgetAlert `json:"alerts,omitempty"`
	// Schedules override limits and Spot bounds during cron windows (UTC), e.g. a lower
	// hourly cost at night. When windows overlap, the first listed wins.
	// +kubebuilder:validation:MaxItems:=20
	// +optional
	Schedules []BudgetSchedule `json:"schedules,omitempty"`
}

// BudgetAlert is a threshold: a share of the limit in force.
type BudgetAlert struct {
	// Percent is the share of the limit at which the alert fires: of the hourly limit for
	// the run-rate, of the month's limit for the forecast.
	// +kubebuilder:validation:Minimum:=1
	// +kubebuilder:validation:Maximum:=1000
	// +required
	Percent int32 `json:"percent"`
}

// BudgetLimits are dollar limits on a namespace's run-rate.
// +kubebuilder:validation:XValidation:message="at least one of hourlyCost or monthlyCost is required",rule="has(self.hourlyCost) || has(self.monthlyCost)"
type BudgetLimits struct {
	// HourlyCost is the most the namespace may run at, in USD per hour, counting its pods on
	// running nodes and on NodeClaims still in flight.
	// +kubebuilder:validation:XValidation:message="hourlyCost must be greater than zero",rule="!self.matches('^0+(\\\\.0+)?$')"
	// +optional
	HourlyCost *Money `json:"hourlyCost,omitempty"`
	// MonthlyCost is the most the namespace may spend in a calendar month (UTC), in USD. It
	// becomes an hourly rate from the spend so far and the hours left in the month.
	// +kubebuilder:validation:XValidation:message="monthlyCost must be greater than zero",rule="!self.matches('^0+(\\\\.0+)?$')"
	// +optional
	MonthlyCost *Money `json:"monthlyCost,omitempty"`
}

// SpotShare bounds the Spot share of a namespace: spot vCPU requested over all vCPU requested
// by its placed pods, counted above the on-demand base.
// +kubebuilder:validation:XValidation:message="minPercent must be less than or equal to maxPercent",rule="!has(self.minPercent) || !has(self.maxPercent) || self.minPercent <= self.maxPercent"
type SpotShare struct {
	// MinPercent is the least share of vCPU above the base that must run on Spot.
	// +kubebuilder:validation:Minimum:=0
	// +kubebuilder:validation:Maximum:=100
	// +optional
	MinPercent *int32 `json:"minPercent,omitempty"`
	// MaxPercent is the largest share of vCPU that may run on Spot.
	// +kubebuilder:validation:Minimum:=0
	// +kubebuilder:validation:Maximum:=100
	// +optional
	MaxPercent *int32 `json:"maxPercent,omitempty"`
	// OnDemandBaseCPU is vCPU that always runs on-demand before the shares apply.
	// +optional
	OnDemandBaseCPU *resource.Quantity `json:"onDemandBaseCPU,omitempty"`
}

// InstanceFamilies allows and denies instance families or types by glob.
type InstanceFamilies struct {
	// Allow lists the families or types the namespace may use; empty allows all.
	// +kubebuilder:validation:MaxItems:=100
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9*?.\-]+$`
	// +listType=set
	// +optional
	Allow []string `json:"allow,omitempty"`
	// Deny lists the families or types the namespace may not use; it wins over allow.
	// +kubebuilder:validation:MaxItems:=100
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9*?.\-]+$`
	// +listType=set
	// +optional
	Deny []string `json:"deny,omitempty"`
}

// BudgetSchedule overrides a budget's limits and Spot bounds in a cron window.
type BudgetSchedule struct {
	// Schedule is when the window opens, in cron syntax (UTC), e.g. "0 18 * * mon-fri".
	// +kubebuilder:validation:Pattern:=`^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$`
	// +required
	Schedule string `json:"schedule"`
	// Duration is how long the window stays open after each time the schedule fires.
	// +kubebuilder:validation:Pattern=`^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$`
	// +kubebuilder:validation:Type="string"
	// +required
	Duration metav1.Duration `json:"duration"`
	// Limits replace the budget's limits while the window is open.
	// +optional
	Limits *BudgetLimits `json:"limits,omitempty"`
	// Spot replaces the budget's Spot bounds while the window is open.
	// +optional
	Spot *SpotShare `json:"spot,omitempty"`
}

// CapacityBudgetStatus is the namespace's spend and Spot share as the controller last saw it.
// Amounts are USD decimal strings.
type CapacityBudgetStatus struct {
	// HourlyCost is the namespace's current run-rate on running nodes, in USD per hour.
	// +optional
	HourlyCost Money `json:"hourlyCost,omitempty"`
	// InFlightHourlyCost is the run-rate reserved by NodeClaims that are launching.
	// +optional
	InFlightHourlyCost Money `json:"inFlightHourlyCost,omitempty"`
	// HourlyLimit is the hourly limit in force now: the spec's, a schedule's, or the rate the
	// monthly limit allows, whichever is lowest.
	// +optional
	HourlyLimit Money `json:"hourlyLimit,omitempty"`
	// RemainingHourlyCost is HourlyLimit less HourlyCost and InFlightHourlyCost, not below zero.
	// +optional
	RemainingHourlyCost Money `json:"remainingHourlyCost,omitempty"`
	// SpotPercent is the namespace's Spot share, e.g. "71.5": Spot vCPU requested over Spot
	// plus on-demand vCPU requested above spot.onDemandBaseCPU, in percent; 0.0 when nothing
	// runs above the base.
	// +kubebuilder:validation:Pattern=`^[0-9]+(\.[0-9]+)?$`
	// +optional
	SpotPercent string `json:"spotPercent,omitempty"`
	// MonthToDateCost is the spend so far this calendar month (UTC), accrued by the controller
	// so that a restart loses nothing.
	// +optional
	MonthToDateCost Money `json:"monthToDateCost,omitempty"`
	// AccruedAt is when MonthToDateCost was last brought up to date.
	// +optional
	AccruedAt *metav1.Time `json:"accruedAt,omitempty"`
	// ForecastMonthCost is the spend this month if the namespace runs at its current run-rate
	// (running and in flight) to the end of the month (UTC): MonthToDateCost plus the run-rate
	// times the hours left.
	// +optional
	ForecastMonthCost Money `json:"forecastMonthCost,omitempty"`
	// ForecastPercent is ForecastMonthCost as a share of the month's limit, e.g. "84.2": the
	// monthlyCost in force, or else the hourly limit in force times the month's hours.
	// +kubebuilder:validation:Pattern=`^[0-9]+(\.[0-9]+)?$`
	// +optional
	ForecastPercent string `json:"forecastPercent,omitempty"`
	// ActiveSchedule is the index of the schedule window in force, if any.
	// +optional
	ActiveSchedule *int32 `json:"activeSchedule,omitempty"`
	// BlockedPods is the number of the namespace's pods that the budget keeps pending.
	// +optional
	BlockedPods int32 `json:"blockedPods"`
	// ObservedGeneration is the metadata.generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready (the budget was evaluated), BudgetExceeded, SpotShareOutOfRange and,
	// with alerts, AlertFiring.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// CapacityBudget limits what one namespace may spend and run on.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=capacitybudgets,scope=Namespaced,categories=karpenter,shortName={cb}
// +kubebuilder:printcolumn:name="Hourly",type="string",JSONPath=".status.hourlyCost",description="current run-rate, USD/hour"
// +kubebuilder:printcolumn:name="Limit",type="string",JSONPath=".status.hourlyLimit",description="hourly limit in force, USD/hour"
// +kubebuilder:printcolumn:name="Remaining",type="string",JSONPath=".status.remainingHourlyCost",description=""
// +kubebuilder:printcolumn:name="Spot%",type="string",JSONPath=".status.spotPercent",description=""
// +kubebuilder:printcolumn:name="Exceeded",type="string",JSONPath=".status.conditions[?(@.type==\"BudgetExceeded\")].status",description="run-rate over the limit in force"
// +kubebuilder:printcolumn:name="Blocked",type="integer",JSONPath=".status.blockedPods",description="pods the budget keeps pending"
// +kubebuilder:printcolumn:name="Enforcement",type="string",JSONPath=".spec.enforcement",priority=1,description=""
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status",description=""
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description=""
// +kubebuilder:printcolumn:name="InFlight",type="string",JSONPath=".status.inFlightHourlyCost",priority=1,description=""
// +kubebuilder:printcolumn:name="MonthToDate",type="string",JSONPath=".status.monthToDateCost",priority=1,description=""
// +kubebuilder:printcolumn:name="Forecast",type="string",JSONPath=".status.forecastMonthCost",priority=1,description="spend this month at the current run-rate"
// +kubebuilder:printcolumn:name="Alert",type="string",JSONPath=".status.conditions[?(@.type==\"AlertFiring\")].status",priority=1,description=""
type CapacityBudget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitzero"`

	// +required
	Spec CapacityBudgetSpec `json:"spec"`
	// +optional
	Status CapacityBudgetStatus `json:"status,omitzero"`
}

// +kubebuilder:object:root=true

// CapacityBudgetList contains a list of CapacityBudget.
type CapacityBudgetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitzero"`
	Items           []CapacityBudget `json:"items"`
}

func init() {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(SchemeGroupVersion, &CapacityBudget{}, &CapacityBudgetList{})
		return nil
	})
}
