package v1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// CapacityReservation is an EC2 On-Demand Capacity Reservation or capacity block an
// EC2NodeClass selected; nodes launched into it have capacity type reserved.
type CapacityReservation struct {
	// AvailabilityZone is the zone the reservation is in.
	// +required
	AvailabilityZone string `json:"availabilityZone"`
	// EndTime is when the reservation expires and its capacity is released.
	// +optional
	EndTime *metav1.Time `json:"endTime,omitempty"`
	// ID is the reservation's id.
	// +kubebuilder:validation:Pattern:="^cr-[0-9a-z]+$"
	// +required
	ID string `json:"id"`
	// InstanceMatchCriteria says which launches the reservation takes: open (any matching
	// launch) or targeted (only launches that name it).
	// +kubebuilder:validation:Enum:={open,targeted}
	// +required
	InstanceMatchCriteria string `json:"instanceMatchCriteria"`
	// InstanceType is the instance type the reservation is for.
	// +required
	InstanceType string `json:"instanceType"`
	// OwnerID is the AWS account that owns the reservation.
	// +kubebuilder:validation:Pattern:="^[0-9]{12}$"
	// +required
	OwnerID string `json:"ownerID"`
	// ReservationType is default (an On-Demand Capacity Reservation) or capacity-block.
	// +kubebuilder:validation:Enum:={default,capacity-block}
	// +kubebuilder:default=default
	// +optional
	ReservationType CapacityReservationType `json:"reservationType"`
	// Interruptible says whether EC2 may reclaim the reservation's capacity.
	// +optional
	Interruptible bool `json:"interruptible"`
	// State is active, or expiring once a capacity block is within EC2's reclaim window.
	// +kubebuilder:validation:Enum:={active,expiring}
	// +kubebuilder:default=active
	// +optional
	State CapacityReservationState `json:"state"`
}

// CapacityReservationType is the kind of a capacity reservation.
type CapacityReservationType string

// CapacityReservationState is whether a reservation can still take launches.
type CapacityReservationState string

// Capacity reservation types and states.
const (
	CapacityReservationTypeDefault       CapacityReservationType  = "default"
	CapacityReservationTypeCapacityBlock CapacityReservationType  = "capacity-block"
	CapacityReservationStateActive       CapacityReservationState = "active"
	CapacityReservationStateExpiring     CapacityReservationState = "expiring"
)
