package methods

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/scheduling"
	"github.com/karpenter-policy/karpenter/scheduling/snapshot"
	"github.com/karpenter-policy/karpenter/scheduling/solver"
)

// Reason is why a command disrupts its nodes.
type Reason string

// The reasons, in the order Pass tries their methods (consolidation last).
const (
	ReasonEmpty         Reason = "Empty"
	ReasonDrifted       Reason = "Drifted"
	ReasonExpired       Reason = "Expired"
	ReasonUnderutilized Reason = "Underutilized"
	// ReasonUnhealthy is node repair's (Repair).
	ReasonUnhealthy Reason = "Unhealthy"
)

// Decision is what a command does with its candidates.
type Decision string

// The decisions.
const (
	// DecisionDelete removes the candidates; their pods fit on the remaining nodes.
	DecisionDelete Decision = "delete"
	// DecisionReplace launches the replacements first, then removes the candidates.
	DecisionReplace Decision = "replace"
	// DecisionReboot reboots the candidate in place (node repair, a Reboot repair policy):
	// nothing is removed or launched; controllers/nodeclaim/reboot carries it out.
	DecisionReboot Decision = "reboot"
)

// Method is one way of disrupting nodes (emptiness, drift, expiration, multi-node and
// single-node consolidation). It is pure: it reads the cluster and the simulator, never a
// client.
type Method interface {
	// Reason is the reason of the commands it returns.
	Reason() Reason
	// Qualifies reports whether a candidate is one the method may disrupt at all.
	Qualifies(c *Cluster, cand *Candidate) bool
	// Commands are what the method would do with the qualifying candidates, within budgets.
	// More than one command acts on disjoint candidates (emptiness: one per NodePool).
	Commands(ctx context.Context, c *Cluster, candidates []*Candidate, budgets *Budgets) ([]*Command, error)
	// Consolidation reports whether the method is a consolidation (its commands must save
	// money), for metrics and events.
	Consolidation() string
}

// Candidate is a managed, initialized node a method may disrupt.
type Candidate struct {
	Node *scheduling.Node
	// NodeClaim is the node's NodeClaim, when known.
	NodeClaim *karpv1.NodeClaim
	NodePool  *karpv1.NodePool
	// InstanceType is the node's type in its NodePool's catalog; nil when unknown (the node
	// cannot be priced: consolidation leaves it alone).
	InstanceType *cloudprovider.InstanceType
	CapacityType string
	PricePerHour float64
	// Pods are the pods that must be rescheduled if the node goes: not DaemonSet, mirror,
	// finished or terminating pods.
	Pods []*corev1.Pod
	// CreatedAt is the node's creation time; LastPodEvent when a pod last came or went (zero:
	// unknown, consolidateAfter taken as passed).
	CreatedAt    time.Time
	LastPodEvent time.Time
	// DriftedSince is when the node drifted, zero when it did not; DriftReason says why.
	DriftedSince time.Time
	DriftReason  string
	// DisruptionCost breaks ties between consolidation candidates of equal savings ratio
	// (bySavings), the lower first: the pods' eviction costs weighted by how much of the
	// node's lifetime remains.
	DisruptionCost float64
	// Blocked says why graceful disruption must wait (do-not-disrupt, a PDB); "" when it
	// need not. Expiration goes ahead regardless.
	Blocked string
}

// Name is the candidate's node name.
func (c *Candidate) Name() string { return c.Node.Name }

// NodePoolName is the candidate's NodePool.
func (c *Candidate) NodePoolName() string { return c.NodePool.Name }

// Command is one disruption decision: the candidates to remove, the replacements to launch
// first, and where every pod of the candidates goes.
type Command struct {
	Reason       Reason
	Decision     Decision
	Candidates   []*Candidate
	Replacements []*solver.NodeClaim
	// Moves name, for every pod of the candidates, the remaining node or the replacement
	// (by its Hostname) the simulation put it on.
	Moves []Move
	// ConsolidationType is "empty", "single" or "multi" for consolidation, "" otherwise.
	ConsolidationType string
	// Forceful commands start without waiting for PDBs or do-not-disrupt (repair); DrainBound
	// then bounds their candidates' drain (nil: the NodeClaims' terminationGracePeriod; 0:
	// their pods are deleted at once). Condition names the node condition repair acts on.
	Forceful   bool
	DrainBound *time.Duration
	Condition  string
	// RebootDrain bounds the drain of a reboot (DecisionReboot) when its repair policy does;
	// nil: the NodeClaim's terminationGracePeriod, else cloudprovider.DefaultRebootDrain.
	RebootDrain *time.Duration
	// Narrowed is how the policy gate had its replacements narrowed before it let the
	// command through (firstCommand); validation simulates again with the same narrowing.
	Narrowed Narrowing
	// TerminateFirst, on a delete command, says why its candidates go before anything
	// replaces them (TerminateFirstNoReservedCapacity, TerminateFirstStaticAtLimit): upstream's
	// terminate-first decision. "" for every other command.
	TerminateFirst string
	// Refill, on a terminate-first command, is what the provisioner is expected to launch for
	// the candidates' pods once they are pending (the simulation's NodeClaims, into the freed
	// reservation slot). Nothing launches it with the command: it prices the command, and
	// karpenterctl simulate applies it to show the cluster after.
	Refill []*solver.NodeClaim
}

// Why a terminate-first command could not launch its replacements first (upstream's
// terminate_first_reason label), and the decision label such a command is counted under.
const (
	// TerminateFirstDecision is upstream's decision label of a terminate-first command.
	TerminateFirstDecision = "terminate-first"
	// TerminateFirstNoReservedCapacity: the pods fit nowhere but in the capacity reservation
	// slot the candidate holds.
	TerminateFirstNoReservedCapacity = "no-reserved-capacity"
	// TerminateFirstStaticAtLimit: a static NodePool at its limits.nodes cannot launch the
	// replacement beside the node.
	TerminateFirstStaticAtLimit = "static-at-limit"
)

// Move is where a candidate's pod goes.
type Move struct {
	Pod *corev1.Pod
	To  string
}

// PriceBefore is what the candidates cost per hour.
func (cmd *Command) PriceBefore() float64 {
	total := 0.0
	for _, c := range cmd.Candidates {
		total += c.PricePerHour
	}
	return total
}

// PriceAfter is what the replacements (a terminate-first command's refill) cost per hour.
func (cmd *Command) PriceAfter() float64 {
	total := 0.0
	for _, r := range append(cmd.Replacements[:len(cmd.Replacements):len(cmd.Replacements)], cmd.Refill...) {
		total += r.Offering.Price
	}
	return total
}

// Savings is what the command saves per hour (negative: it costs more, as drift may).
func (cmd *Command) Savings() float64 { return cmd.PriceBefore() - cmd.PriceAfter() }

// Unconsolidatable is a node consolidation leaves alone, with why, for the
// Unconsolidatable event and simulate's report.
type Unconsolidatable struct {
	Node   string
	Reason string
}

// NodePoolState is a NodePool with what disruption needs of it.
type NodePoolState struct {
	NodePool      *karpv1.NodePool
	InstanceTypes []*cloudprovider.InstanceType
	// DaemonSetOverhead is what the DaemonSets on its nodes request, for replacements.
	DaemonSetOverhead corev1.ResourceList
	// RepairPolicies are the conditions that make its nodes unhealthy (node repair).
	RepairPolicies []cloudprovider.RepairPolicy
}

// Cluster is the snapshot methods decide from.
type Cluster struct {
	// Nodes are every node that offers room, managed or not, and every in-flight NodeClaim,
	// with the pods bound or nominated to them (the snapshot's).
	Nodes []*scheduling.Node
	// Candidates are the managed, initialized nodes, with what disruption knows of them;
	// Unconsolidatable says why the others are not candidates.
	Candidates       []*Candidate
	Unconsolidatable []Unconsolidatable
	NodePools        map[string]*NodePoolState
	// Disrupting counts, by NodePool, the nodes being disrupted or NotReady now.
	Disrupting map[string]int
	// PoolSizes counts each NodePool's nodes, for percentage budgets.
	PoolSizes map[string]int
	// NotReady counts, by NodePool, the nodes NotReady and not otherwise disrupting: they
	// count against every budget but Unhealthy's (repair is what they wait for).
	NotReady map[string]int
	// Unhealthy are the nodes that match a repair policy; RepairNotes say why repair left
	// some alone in the last pass.
	Unhealthy   []*Unhealthy
	RepairNotes []RepairNote
	// Scores are the consolidation moves of the last pass that reached scoring (balanced.go).
	Scores  []MoveScore
	Now     time.Time
	Options Options
	// Requests caches the pods' requests for every simulation of the pass.
	Requests *scheduling.PodRequestCache
	// Check, when set, is consulted for every command before it is returned (policycheck.go).
	Check CommandCheck
	// pdbs are the PodDisruptionBudgets' allowances.
	pdbs *pdbLimits
	// blockedNotes are the Unconsolidatable entries of the snapshot itself (not of a pass).
	blockedNotes []Unconsolidatable
	// held are the candidates held after a rolled-back command, until when (Hold).
	held map[string]time.Time
	// balances are the NodePools' totals for the Balanced score, computed on first use.
	balances map[string]poolBalance
	// snap is the snapshot it was built from.
	snap *snapshot.Snapshot
	// nsLabels are the snapshot's namespaces' labels, computed on first use.
	nsLabels map[string]map[string]string
	// catalog keeps the nodes the simulations prepared (nodeCatalog); waitingNodes are the
	// nodes with their waiting pods (withWaiting).
	catalog      *solver.Catalog
	waitingNodes map[string]*scheduling.Node
	// waiting are the pending pods and the pods of deleting nodes where the solver first puts
	// them, by node, computed on first use (simulation.go).
	waiting map[string][]*corev1.Pod
	placed  bool
	// free is each node's room less its pods and those waiting for it, computed on first use
	// (prefilter.go); nodes do not change within a Cluster.
	free map[string]corev1.ResourceList
	// removed and applied are the nodes earlier commands took away and added, when a
	// simulation of several passes (Apply) runs on one snapshot.
	removed, applied map[string]bool
	// uninitialized are the Nodes that are not yet places a command may count on: in-flight
	// NodeClaims and nodes not Initialized or not Ready (simulation.go).
	uninitialized map[string]bool
}

// PricePerHour is what the cluster's priced nodes cost per hour.
func (c *Cluster) PricePerHour() float64 {
	total := 0.0
	for _, n := range c.Nodes {
		total += n.PricePerHour
	}
	return total
}

// Options tune the methods.
type Options struct {
	// SpotToSpotConsolidation lets single-node consolidation replace a Spot node with a
	// cheaper Spot node (feature gate SpotToSpotConsolidation).
	SpotToSpotConsolidation bool
	// Scheduling are the scheduling policies every simulation solves under, as the
	// provisioner does.
	Scheduling solver.Policies
	// MinSavingsFraction is the least fraction of a candidate's price a replacement must save
	// (0: any saving), to stop churn.
	MinSavingsFraction float64
	// MultiNodeTimeout and SingleNodeTimeout bound the consolidation searches; 0 is a minute.
	MultiNodeTimeout, SingleNodeTimeout time.Duration
	// NodeRepair turns node repair on (feature gate NodeRepair); TerminateFirstRepair lets it
	// delete a reserved node first when its pods fit nowhere but in the reservation slot it
	// holds (feature gate TerminateFirstRepair).
	NodeRepair, TerminateFirstRepair bool
	// TerminateFirstDrift lets drift delete a reserved node first when its pods fit nowhere
	// but in the reservation slot it holds (feature gate TerminateFirstDrift).
	TerminateFirstDrift bool
	// RepairPolicies give a NodePool's repair policies (the cloud provider's); nil: none.
	RepairPolicies func(*karpv1.NodePool) []cloudprovider.RepairPolicy
	// CanReboot is set when the cloud provider reboots in place (cloudprovider.Rebooter):
	// Reboot repair policies reboot rather than replace.
	CanReboot bool
	// Reboots is how many reboots repair committed for the NodeClaim within
	// RebootHistoryWindow; nil: none.
	Reboots func(*karpv1.NodeClaim) int
	// Evaluated, when set, is told how long each method a pass ran took to decide (the
	// controller's karpenter_voluntary_disruption_decision_evaluation_duration_seconds).
	Evaluated func(m Method, took time.Duration)
	// Solved, when set, is told how long each simulation's solve took (the controller's
	// karpenter_scheduler_scheduling_duration_seconds{controller="disruption"}, as upstream's).
	Solved func(took time.Duration)
}

// NodePoolOf is the state of a candidate's NodePool.
func (c *Cluster) NodePoolOf(cand *Candidate) *NodePoolState { return c.NodePools[cand.NodePool.Name] }

// pods are the pods of the command's candidates.
func (cmd *Command) pods() []*corev1.Pod {
	var out []*corev1.Pod
	for _, c := range cmd.Candidates {
		out = append(out, c.Pods...)
	}
	return out
}
