// Package cloudprovider defines what the controllers need from a cloud: launch and delete
// instances for NodeClaims, describe the instance types a NodePool may use with their
// offerings and prices, and tell when an instance has drifted from its configuration.
// Providers (kwok, aws) implement CloudProvider in sub-packages; the controllers and the solver
// depend on this package only, never on a provider.
package cloudprovider

import (
	"context"
	"errors"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

// CloudProvider launches and manages the instances behind NodeClaims.
type CloudProvider interface {
	// Create launches an instance for the NodeClaim and returns the NodeClaim as launched:
	// status.providerID, capacity and allocatable set, and labels for the chosen instance
	// type, zone and capacity type.
	Create(ctx context.Context, nodeClaim *karpv1.NodeClaim) (*karpv1.NodeClaim, error)
	// Delete terminates the NodeClaim's instance. It returns a NodeClaimNotFoundError once the
	// instance is gone.
	Delete(ctx context.Context, nodeClaim *karpv1.NodeClaim) error
	// Get returns the NodeClaim for an instance, by provider ID.
	Get(ctx context.Context, providerID string) (*karpv1.NodeClaim, error)
	// List returns a NodeClaim for every instance this provider launched, for garbage collection.
	List(ctx context.Context) ([]*karpv1.NodeClaim, error)
	// GetInstanceTypes returns the instance types the NodePool's node class allows, with
	// their offerings.
	GetInstanceTypes(ctx context.Context, nodePool *karpv1.NodePool) ([]*InstanceType, error)
	// IsDrifted returns why the NodeClaim's instance no longer matches its node class, or "".
	IsDrifted(ctx context.Context, nodeClaim *karpv1.NodeClaim) (DriftReason, error)
	// RepairPolicies are the node conditions that make the NodePool's nodes unhealthy, each
	// once it has held for its toleration: node repair replaces such a node.
	RepairPolicies(ctx context.Context, nodePool *karpv1.NodePool) ([]RepairPolicy, error)
	// Name is the provider's name, e.g. "kwok" or "aws".
	Name() string
	// GetSupportedNodeClasses returns an empty object of each node class kind it serves.
	GetSupportedNodeClasses() []NodeClass
}

// NodeClass is an API object a provider configures its instances from (KWOKNodeClass,
// EC2NodeClass). It has the method set of controller-runtime's client.Object, so controllers
// watch and read it as one, without this package, and so the solver that imports it, pulling
// in controller-runtime and client-go.
type NodeClass interface {
	metav1.Object
	runtime.Object
}

// InterruptionNoticeAnnotation is the annotation a provider puts on a Node whose instance the
// cloud will reclaim (a Spot interruption), with the deadline as RFC 3339; the interruption
// controller then deletes the node's NodeClaim at once, so its pods drain and are provisioned
// elsewhere before the instance is gone.
const InterruptionNoticeAnnotation = "karpenter.sh/interruption-deadline"

// CapacityReporter is implemented by providers that can be told an offering has no capacity
// now (its Spot instances are being interrupted): they leave it out of GetInstanceTypes for a
// while, so that new capacity goes elsewhere.
type CapacityReporter interface {
	MarkUnavailable(instanceType, zone, capacityType string)
}

// ReservationReporter is implemented by providers that can be told a capacity reservation is
// taking its instances back (an interruptible reservation interrupted): they leave its
// offerings out for a while, so that new capacity goes elsewhere.
type ReservationReporter interface {
	MarkReservationUnavailable(reservationID string)
}

// LaunchOverlays gives a NodePool's instance types as the decisions saw them, NodeOverlays
// applied (docs/architecture.md, "NodeOverlays"): a provider that takes it launches the
// offering the solver chose, at the prices the solver compared, not at its own.
type LaunchOverlays func(nodePool string, its []*InstanceType) []*InstanceType

// DriftReason says why an instance drifted, e.g. "AMIDrift"; empty means not drifted.
type DriftReason string

// InstanceType is a kind of instance with the offerings (zone and capacity type) it is sold in.
type InstanceType struct {
	// Name is the instance type's name, e.g. m5.large.
	Name string
	// Labels are the single-valued labels a node of this type gets: architecture, OS,
	// instance family, category, generation, size, cpu, memory, GPU, and the like.
	Labels map[string]string
	// Capacity is the full capacity of a node of this type.
	Capacity corev1.ResourceList
	// Overhead is what the kubelet, the system and eviction thresholds reserve.
	Overhead corev1.ResourceList
	// Offerings are where and how the type can be bought.
	Offerings Offerings
	// PriceOverlaid and CapacityOverlaid say that a NodeOverlay changed the price of some
	// offering, or added to the capacity (scheduling/overlay): a NodeClaim that may launch as
	// such a type is annotated so.
	PriceOverlaid, CapacityOverlaid bool
}

// Allocatable is Capacity less Overhead, floored at zero.
func (it *InstanceType) Allocatable() corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, q := range it.Capacity {
		a := q.DeepCopy()
		if o, ok := it.Overhead[name]; ok {
			a.Sub(o)
		}
		if a.Sign() < 0 {
			a.Set(0)
		}
		out[name] = a
	}
	return out
}

// Offering is one way to buy an instance type: a zone and a capacity type, at a price.
type Offering struct {
	Zone         string
	CapacityType string
	// Price is in USD per hour.
	Price float64
	// Available is false while the cloud reports no capacity for this offering.
	Available bool
	// ReservationID names the capacity reservation a reserved offering launches into, and
	// ReservationCapacity is how many more instances it can take now; both are set only for
	// CapacityType reserved (docs/architecture.md, "Reserved capacity"). The solver hands out
	// no more NodeClaims to a reservation in one decision than its capacity.
	ReservationID       string
	ReservationCapacity int
}

// Offerings is a list of offerings with helpers.
type Offerings []Offering

// Available returns the available offerings.
func (ofs Offerings) Available() Offerings {
	var out Offerings
	for _, o := range ofs {
		if o.Available {
			out = append(out, o)
		}
	}
	return out
}

// Cheapest returns the cheapest offering and true, or false when there is none; ties go as
// CompareOfferings orders them.
func (ofs Offerings) Cheapest() (Offering, bool) {
	if len(ofs) == 0 {
		return Offering{}, false
	}
	best := ofs[0]
	for _, o := range ofs[1:] {
		if CompareOfferings("", o, "", best) < 0 {
			best = o
		}
	}
	return best, true
}

// CompareOfferings is the one price rule (docs/architecture.md, "One price rule"): offering a
// of instance type typeA before offering b of typeB when a is cheaper, ties by instance type
// name, then zone, capacity type and capacity reservation, so that every caller that asks
// for the cheapest (the solver, disruption, the cluster state, the policy attribution and the
// providers' launches) picks the same one. Negative when a comes first, zero when the two are
// the same offering.
func CompareOfferings(typeA string, a Offering, typeB string, b Offering) int {
	switch {
	case a.Price != b.Price:
		if a.Price < b.Price {
			return -1
		}
		return 1
	case typeA != typeB:
		return strings.Compare(typeA, typeB)
	case a.Zone != b.Zone:
		return strings.Compare(a.Zone, b.Zone)
	case a.CapacityType != b.CapacityType:
		return strings.Compare(a.CapacityType, b.CapacityType)
	}
	return strings.Compare(a.ReservationID, b.ReservationID)
}

// NoticeKind is what a cloud's notice about an instance says.
type NoticeKind string

// Notice kinds (docs/aws.md, "Interruption").
const (
	// NoticeSpotInterruption: the cloud reclaims the Spot instance at Deadline.
	NoticeSpotInterruption NoticeKind = "SpotInterruption"
	// NoticeRebalance: the Spot instance is at elevated risk of interruption; an Event only.
	NoticeRebalance NoticeKind = "RebalanceRecommendation"
	// NoticeStateChange: the instance is stopping, stopped, shutting down or terminated.
	NoticeStateChange NoticeKind = "StateChange"
	// NoticeScheduledChange: the cloud will retire or maintain the instance (AWS Health).
	NoticeScheduledChange NoticeKind = "ScheduledChange"
	// NoticeCapacityReservationInterruption: EC2 reclaims an instance of an interruptible
	// capacity reservation (its owner takes the capacity back).
	NoticeCapacityReservationInterruption NoticeKind = "CapacityReservationInterruption"
	// NoticeNoOp: a notice that asks nothing (an instance starting, another service's event).
	NoticeNoOp NoticeKind = "NoOp"

	// The kinds a provider's health checks report (HealthChecker), named as upstream's AWS
	// provider names the categories of EC2's status checks.

	// NoticeInstanceStatus: the instance's own status check has failed (it is unreachable);
	// its node is removed without a graceful drain.
	NoticeInstanceStatus NoticeKind = "InstanceStatus"
	// NoticeSystemStatus: the status check of the instance's host has failed; removed as
	// NoticeInstanceStatus.
	NoticeSystemStatus NoticeKind = "SystemStatus"
	// NoticeEventStatus: the cloud has scheduled an event for the instance (retirement,
	// maintenance, a reboot or stop); its node is drained and removed.
	NoticeEventStatus NoticeKind = "EventStatus"
)

// Forceful is whether the notice's instance is already broken: its node is removed without
// waiting for a graceful drain (the NodeClaim's termination timestamp is now).
func (n Notice) Forceful() bool {
	return n.Kind == NoticeInstanceStatus || n.Kind == NoticeSystemStatus
}

// HealthChecker is implemented by providers that poll their instances' health checks (the
// AWS provider's DescribeInstanceStatus).
type HealthChecker interface {
	// UnhealthyInstances returns a notice for each instance and each of its failing checks
	// (NoticeInstanceStatus, NoticeSystemStatus, NoticeEventStatus), Sent when it began to
	// fail. A check fails once it has failed long enough for the provider to be sure.
	UnhealthyInstances(ctx context.Context) ([]Notice, error)
}

// Notice is one message of a provider's interruption queue about some instances.
type Notice struct {
	Kind        NoticeKind
	InstanceIDs []string
	// State is the new state of a StateChange.
	State string
	// Deadline is when the instance goes, when the notice says.
	Deadline time.Time
	// Sent is when the cloud issued the notice (the event's time), when known.
	Sent time.Time
	// Handle identifies the message to NoticeQueue.Done; Err says it could not be read.
	Handle string
	Err    error
}

// MessageType is the notice's kind as upstream's AWS provider names it in its metrics
// (message_type, and the reason of karpenter_nodeclaims_disrupted_total): spot_interrupted,
// rebalance_recommendation, scheduled_change, instance_stopped, instance_terminated,
// capacity_reservation_interrupted, instance_status, system_status, event_status; no_op for a
// notice that asks nothing.
func (n Notice) MessageType() string {
	switch n.Kind {
	case NoticeSpotInterruption:
		return "spot_interrupted"
	case NoticeRebalance:
		return "rebalance_recommendation"
	case NoticeScheduledChange:
		return "scheduled_change"
	case NoticeStateChange:
		if n.State == "stopping" || n.State == "stopped" {
			return "instance_stopped"
		}
		return "instance_terminated"
	case NoticeCapacityReservationInterruption:
		return "capacity_reservation_interrupted"
	case NoticeInstanceStatus:
		return "instance_status"
	case NoticeSystemStatus:
		return "system_status"
	case NoticeEventStatus:
		return "event_status"
	}
	return "no_op"
}

// NoticeQueue is a provider's queue of interruption notices (the AWS provider's SQS queue).
type NoticeQueue interface {
	// Receive waits a while for notices and returns those that came (possibly none).
	Receive(ctx context.Context) ([]Notice, error)
	// Done removes a notice from the queue once acted on (or found unreadable).
	Done(ctx context.Context, n Notice) error
}

// RepairPolicy is a node condition that makes a node unhealthy: node repair acts on a node
// whose condition of that type has had that status for TolerationDuration, by Action.
type RepairPolicy struct {
	ConditionType      corev1.NodeConditionType
	ConditionStatus    corev1.ConditionStatus
	TolerationDuration time.Duration
	// Action is what repair does; "" is RepairReplace. RepairReboot needs a provider that is a
	// Rebooter; of another, it replaces.
	Action RepairAction
	// RebootDrain bounds the drain before a reboot (0: reboot without draining); nil: the
	// NodeClaim's terminationGracePeriod, else DefaultRebootDrain.
	RebootDrain *time.Duration
	// TerminationGracePeriod bounds the drain when repair replaces the node, as upstream's:
	// nil, the NodeClaim's own terminationGracePeriod (a node whose pods block their eviction,
	// with none, is not repaired); 0, forceful (its pods are deleted at once); otherwise the
	// lesser of this and the NodeClaim's. The bound counts from the node's deletion.
	TerminationGracePeriod *time.Duration
}

// RepairAction is what node repair does to an unhealthy node.
type RepairAction string

const (
	// RepairReplace replaces the node (the replacement first, unless TerminateFirstRepair).
	RepairReplace RepairAction = "Replace"
	// RepairReboot reboots the node in place, and replaces it when rebooting did not help
	// (RebootsBeforeReplacement reboots within a day, or a reboot that failed).
	RepairReboot RepairAction = "Reboot"
)

// DefaultRebootDrain bounds the drain before a reboot when neither the repair policy nor the
// NodeClaim does: an unhealthy node is not left waiting on a PodDisruptionBudget for ever; the
// pods still there when it runs out stay on the node through the reboot.
const DefaultRebootDrain = 10 * time.Minute

// Rebooter is a CloudProvider that can restart a NodeClaim's instance in place. Reboot
// returns once the provider accepted the request (operationID is the same for every retry of
// one reboot, for providers that can make it idempotent); the new boot is seen on the Node's
// status.nodeInfo.bootID. A reboot that retrying cannot make succeed returns an error that
// IsRebootRefused recognises.
type Rebooter interface {
	Reboot(ctx context.Context, nodeClaim *karpv1.NodeClaim, operationID string) error
}

// RebootRefusedError is a reboot the provider refused for good (no such instance, no
// permission): the reboot fails at once and repair replaces the node.
type RebootRefusedError struct{ Err error }

func (e *RebootRefusedError) Error() string { return "reboot refused: " + e.Err.Error() }
func (e *RebootRefusedError) Unwrap() error { return e.Err }

// IsRebootRefused reports whether err is, or wraps, a RebootRefusedError.
func IsRebootRefused(err error) bool {
	var r *RebootRefusedError
	return errors.As(err, &r)
}
