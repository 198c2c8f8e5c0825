package methods

import (
	"context"
	"fmt"
	"math"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/scheduling/snapshot"
)

// RepairUnhealthyThreshold is the share of a NodePool's nodes that may be unhealthy at once
// before repair stops for the pool, rounded up: a correlated failure (a bad image, a zone's
// network) is not fixed by replacing every node, as upstream.
const RepairUnhealthyThreshold = 0.20

// A Reboot repair policy reboots a node at most RebootsBeforeReplacement times within
// RebootHistoryWindow; unhealthy again after that, the node is replaced, as upstream.
const (
	RebootsBeforeReplacement = 2
	RebootHistoryWindow      = 24 * time.Hour
)

// Unhealthy is a node that matches one of its NodePool's repair policies.
type Unhealthy struct {
	*Candidate
	// Object is the node itself (its annotations, conditions).
	Object *corev1.Node
	// Condition is the matching condition, and EligibleAt when its toleration runs out;
	// Policy the repair policy it matched.
	Condition  corev1.NodeCondition
	EligibleAt time.Time
	Policy     cloudprovider.RepairPolicy
	// NotReady is true when the node counted in Cluster.NotReady; InFlight when a command
	// on it is in flight (Cluster.InFlight): repair leaves it alone.
	NotReady, InFlight bool
}

// RepairNote is why repair left an unhealthy node alone: Event is NodeRepairBlocked (the
// pool's breaker) or DisruptionBlocked (do-not-repair, a budget, pods that cannot move).
type RepairNote struct {
	Node, NodePool string
	NodeClaim      *karpv1.NodeClaim
	Event, Message string
}

// unhealthy matches a node's conditions against its NodePool's repair policies: the first
// condition some policy names with its status, with the policy and when its toleration ends.
// The toleration counts from the condition's transition, or from the end of the node's last
// reboot if later: a condition that a reboot did not clear gets its toleration again.
func unhealthy(n *corev1.Node, nc *karpv1.NodeClaim, policies []cloudprovider.RepairPolicy) (corev1.NodeCondition, cloudprovider.RepairPolicy, time.Time, bool) {
	var rebooted time.Time
	if nc != nil {
		if cond := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeRebooting); cond != nil && cond.Status == metav1.ConditionFalse {
			rebooted = cond.LastTransitionTime.Time
		}
	}
	for _, c := range n.Status.Conditions {
		for _, p := range policies {
			if c.Type == p.ConditionType && c.Status == p.ConditionStatus {
				since := c.LastTransitionTime.Time
				if rebooted.After(since) {
					since = rebooted
				}
				return c, p, since.Add(p.TolerationDuration), true
			}
		}
	}
	return corev1.NodeCondition{}, cloudprovider.RepairPolicy{}, time.Time{}, false
}

// collectUnhealthy finds the unhealthy nodes among the snapshot's managed, initialized nodes
// not being deleted or disrupted (Ready or not: NotReady is what repair is for).
func (c *Cluster) collectUnhealthy(snap *snapshot.Snapshot) {
	for _, n := range snap.StateNodes {
		np := c.NodePools[n.NodePool]
		if n.InFlight || n.Node == nil || np == nil || len(np.RepairPolicies) == 0 || n.Deleting || n.Disrupted || n.Rebooting || !n.Initialized || n.Sched == nil {
			continue
		}
		cond, policy, at, ok := unhealthy(n.Node, n.NodeClaim, np.RepairPolicies)
		if !ok {
			continue
		}
		c.Unhealthy = append(c.Unhealthy, &Unhealthy{Candidate: newCandidate(c, n, np), Object: n.Node, Condition: cond, Policy: policy, EligibleAt: at,
			NotReady: !n.Ready})
	}
}

// Repair replaces unhealthy nodes (the NodeRepair feature gate): a node whose condition has
// matched one of its NodePool's repair policies for the policy's toleration. As upstream it
// is a disruption method with the reason Unhealthy: the NodePool's budgets for that reason
// apply (nodes that are merely NotReady do not count against them), the replacement joins
// before the node goes (TerminateFirstRepair: a node whose capacity reservation slot is the
// only room for its pods goes first; a static pool's node always does), karpenter.sh/do-not-disrupt
// does not hold it but karpenter.sh/do-not-repair does, and neither PDBs nor pods'
// do-not-disrupt keep repair from starting: the drain is bounded instead (drainBound), and a
// node whose blocking pods nothing bounds is left alone with a DisruptionBlocked event. A
// policy whose action is Reboot, on a provider that reboots in place, reboots the node instead
// (DecisionReboot, within the same budgets): up to RebootsBeforeReplacement times within
// RebootHistoryWindow, then it is replaced. While more than RepairUnhealthyThreshold of a
// NodePool's nodes are unhealthy, repair leaves the pool alone. One command per pass, the node unhealthy longest first.
type Repair struct{}

// Reason implements Method.
func (Repair) Reason() Reason { return ReasonUnhealthy }

// Consolidation implements Method.
func (Repair) Consolidation() string { return "" }

// Qualifies implements Method: repair's candidates are Cluster.Unhealthy, not Candidates.
func (Repair) Qualifies(*Cluster, *Candidate) bool { return false }

// Commands implements Method.
func (Repair) Commands(ctx context.Context, c *Cluster, _ []*Candidate, budgets *Budgets) ([]*Command, error) {
	if !c.Options.NodeRepair {
		return nil, nil
	}
	var eligible []*Unhealthy
	for _, u := range c.Unhealthy {
		if !c.Now.Before(u.EligibleAt) && !c.removed[u.Name()] && !u.InFlight {
			eligible = append(eligible, u)
		}
	}
	sort.SliceStable(eligible, func(i, j int) bool {
		if !eligible[i].EligibleAt.Equal(eligible[j].EligibleAt) {
			return eligible[i].EligibleAt.Before(eligible[j].EligibleAt)
		}
		return eligible[i].Name() < eligible[j].Name()
	})
	tripped := c.repairBreakers()
	for _, u := range eligible {
		pool := u.NodePool.Name
		note := func(event, msg string) {
			c.RepairNotes = append(c.RepairNotes, RepairNote{Node: u.Name(), NodeClaim: u.NodeClaim, NodePool: pool, Event: event, Message: msg})
		}
		if msg, ok := tripped[pool]; ok {
			note("NodeRepairBlocked", msg)
			continue
		}
		if doNotRepair(u) {
			note("DisruptionBlocked", fmt.Sprintf("repair is blocked through the %q annotation", karpv1.DoNotRepairAnnotationKey))
			continue
		}
		bound := drainBound(u)
		if bound == nil && (u.NodeClaim == nil || u.NodeClaim.Spec.TerminationGracePeriod == nil) {
			// Nothing bounds the drain, so pods that refuse eviction would hold the node forever.
			if why := podBlocker(u.Candidate, c.pdbs, c.Now); why != "" {
				note("DisruptionBlocked", "repair requires a termination grace period to bypass blocking pods ("+why+")")
				continue
			}
		}
		if budgets.Allowed(pool, ReasonUnhealthy) == 0 {
			note("DisruptionBlocked", "the NodePool's budget for Unhealthy allows no more disruptions now")
			continue
		}
		cands := []*Candidate{u.Candidate}
		var cmd *Command
		if c.reboots(u) {
			cmd = &Command{Reason: ReasonUnhealthy, Decision: DecisionReboot, Candidates: cands, Condition: string(u.Condition.Type),
				RebootDrain: u.Policy.RebootDrain}
			budgets.Take(pool, 1)
			return []*Command{cmd}, nil
		}
		if u.NodePool.IsStatic() {
			// A static NodePool's controller keeps its size: it replaces the node once it goes.
			cmd = &Command{Reason: ReasonUnhealthy, Decision: DecisionDelete, Candidates: cands}
		} else {
			sim, err := c.simulate(cands, replacementRule{})
			if err != nil {
				return nil, err
			}
			if sim.unschedulable != "" && c.Options.TerminateFirstRepair {
				// As drift's under TerminateFirstDrift: a node whose reservation slot is the
				// only room for its pods goes first.
				if cmd, _, err = c.terminateFirst(ReasonUnhealthy, u.Candidate, sim.unschedulable); err != nil {
					return nil, err
				}
			}
			switch {
			case cmd != nil:
			case sim.unschedulable != "":
				note("DisruptionBlocked", sim.unschedulable)
				continue
			default:
				cmd = c.command(ReasonUnhealthy, cands, sim)
			}
		}
		cmd.Forceful = true
		cmd.DrainBound = bound
		cmd.Condition = string(u.Condition.Type)
		if !c.admit(ctx, cmd) {
			continue
		}
		budgets.Take(pool, 1)
		return []*Command{cmd}, nil
	}
	return nil, nil
}

// drainBound is how long repair lets the node's drain run, as upstream's: nil when the repair
// policy sets no bound (the NodeClaim's own terminationGracePeriod applies); else the lesser of
// the policy's and the NodeClaim's (0: forceful, the pods are deleted at once).
func drainBound(u *Unhealthy) *time.Duration {
	if u.Policy.TerminationGracePeriod == nil {
		return nil
	}
	bound := max(0, *u.Policy.TerminationGracePeriod)
	if u.NodeClaim != nil && u.NodeClaim.Spec.TerminationGracePeriod != nil {
		bound = min(bound, u.NodeClaim.Spec.TerminationGracePeriod.Duration)
	}
	return &bound
}

// podBlocker says which of the candidate's pods refuse eviction now (do-not-disrupt, a
// PodDisruptionBudget), "" when none does. The node's own do-not-disrupt does not count:
// repair does not heed it.
func podBlocker(cand *Candidate, pdbs *pdbLimits, now time.Time) string {
	for _, p := range cand.Pods {
		if doNotDisrupt(p, now) {
			return fmt.Sprintf("pod %s/%s has %s", p.Namespace, p.Name, karpv1.DoNotDisruptAnnotationKey)
		}
	}
	if pdbs != nil {
		if pdb := pdbs.blocking(cand.Pods); pdb != "" {
			return "PodDisruptionBudget " + pdb + " allows no eviction of its pods now"
		}
	}
	return ""
}

// reboots reports whether repair reboots the node rather than replacing it: its policy says
// Reboot, the provider can, and it has not been rebooted RebootsBeforeReplacement times within
// RebootHistoryWindow.
func (c *Cluster) reboots(u *Unhealthy) bool {
	if u.Policy.Action != cloudprovider.RepairReboot || !c.Options.CanReboot || u.NodeClaim == nil {
		return false
	}
	return c.Options.Reboots == nil || c.Options.Reboots(u.NodeClaim) < RebootsBeforeReplacement
}

// repairBreakers are the NodePools with more than RepairUnhealthyThreshold of their nodes
// unhealthy (toleration or not), with what to say.
func (c *Cluster) repairBreakers() map[string]string {
	count := map[string]int{}
	for _, u := range c.Unhealthy {
		count[u.NodePool.Name]++
	}
	out := map[string]string{}
	for pool, n := range count {
		total := c.PoolSizes[pool]
		if limit := int(math.Ceil(RepairUnhealthyThreshold * float64(total))); n > limit {
			out[pool] = fmt.Sprintf("more than %.0f%% of nodes in NodePool %s are unhealthy (%d of %d): repair is paused for the pool",
				RepairUnhealthyThreshold*100, pool, n, total)
		}
	}
	return out
}

// doNotRepair reports whether the node or its NodeClaim vetoes repair.
func doNotRepair(u *Unhealthy) bool {
	if u.NodeClaim != nil && u.NodeClaim.Annotations[karpv1.DoNotRepairAnnotationKey] == "true" {
		return true
	}
	return u.Object.Annotations[karpv1.DoNotRepairAnnotationKey] == "true"
}
