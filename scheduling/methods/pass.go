package methods

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/scheduling"
	"github.com/karpenter-policy/karpenter/scheduling/solver"
)

// Methods are the methods in the order a pass tries them: repair (with the NodeRepair gate),
// emptiness, drift, multi-node then single-node consolidation. Expiration is not a method:
// controllers/nodeclaim/expiration deletes expired NodeClaims, as upstream's does.
func Methods() []Method {
	return []Method{Repair{}, Emptiness{}, Drift{}, &MultiNode{}, &SingleNode{}}
}

// Pass runs the methods in order on the cluster and returns the commands of the first that
// finds any, with that method; none when no method acts. Budgets are computed once for the
// pass and taken from as commands are decided.
func Pass(ctx context.Context, c *Cluster, methods []Method) ([]*Command, Method, error) {
	budgets := NewBudgets(c)
	for _, m := range methods {
		var cands []*Candidate
		for _, cand := range c.Candidates {
			if m.Qualifies(c, cand) {
				cands = append(cands, cand)
			}
		}
		if len(cands) == 0 && (m.Reason() != ReasonUnhealthy || len(c.Unhealthy) == 0) {
			continue
		}
		start := time.Now()
		cmds, err := m.Commands(ctx, c, cands, budgets)
		if c.Options.Evaluated != nil {
			c.Options.Evaluated(m, time.Since(start))
		}
		if err != nil {
			return nil, m, fmt.Errorf("%s: %w", m.Reason(), err)
		}
		if len(cmds) > 0 {
			return cmds, m, nil
		}
	}
	return nil, nil, nil
}

// Apply is the cluster once the command is done, for a simulation of several passes: the
// candidates gone, their pods on the nodes the command moved them to, and its replacements
// there as nodes (named by their Hostname), candidates themselves for later passes. The
// cluster it is called on is left as it was only in its Nodes' and Candidates' slices; pods
// are copied when they move.
func (c *Cluster) Apply(cmd *Command) *Cluster {
	gone := map[string]bool{}
	for _, cand := range cmd.Candidates {
		gone[cand.Name()] = true
	}
	moved := map[string][]*corev1.Pod{}
	for _, m := range cmd.Moves {
		p := m.Pod.DeepCopy()
		p.Spec.NodeName = m.To
		moved[m.To] = append(moved[m.To], p)
	}
	next := *c
	next.Nodes, next.Candidates, next.Unconsolidatable, next.Scores = nil, nil, nil, nil
	next.PoolSizes, next.Disrupting = copyCounts(c.PoolSizes), copyCounts(c.Disrupting)
	next.balances, next.placed, next.waiting, next.free, next.waitingNodes = nil, false, nil, nil, nil
	next.removed, next.applied = copySet(c.removed), copySet(c.applied)
	for name := range gone {
		if next.applied[name] {
			delete(next.applied, name)
		} else {
			next.removed[name] = true
		}
	}
	for _, u := range c.blockedNotes {
		if !gone[u.Node] {
			next.Unconsolidatable = append(next.Unconsolidatable, u)
		}
	}
	next.blockedNotes = append([]Unconsolidatable(nil), next.Unconsolidatable...)
	byName := map[string]*Candidate{}
	for _, cand := range c.Candidates {
		byName[cand.Name()] = cand
	}
	for _, n := range c.Nodes {
		if gone[n.Name] {
			continue
		}
		if len(moved[n.Name]) > 0 {
			cp := *n
			cp.Pods = append(append([]*corev1.Pod(nil), n.Pods...), moved[n.Name]...)
			n = &cp
		}
		next.Nodes = append(next.Nodes, n)
		if cand := byName[n.Name]; cand != nil {
			cc := *cand
			cc.Node = n
			if len(moved[n.Name]) > 0 {
				cc.Pods = append(append([]*corev1.Pod(nil), cand.Pods...), moved[n.Name]...)
				cc.DisruptionCost = disruptionCost(&cc, c.Now)
			}
			next.Candidates = append(next.Candidates, &cc)
		}
	}
	for _, cand := range cmd.Candidates {
		next.PoolSizes[cand.NodePoolName()]--
	}
	for _, r := range cmd.Replacements {
		next.applied[r.Hostname] = true
		cand := c.replacementNode(r, moved[r.Hostname])
		next.Nodes = append(next.Nodes, cand.Node)
		next.Candidates = append(next.Candidates, cand)
		next.PoolSizes[r.NodePool]++
	}
	return &next
}

// replacementNode is a replacement as the node it becomes: its type's labels and allocatable,
// its offering's zone and capacity type, its NodePool's labels and taints.
func (c *Cluster) replacementNode(r *solver.NodeClaim, pods []*corev1.Pod) *Candidate {
	np := c.NodePools[r.NodePool]
	l := map[string]string{}
	for k, v := range r.InstanceType.Labels {
		l[k] = v
	}
	for k, v := range np.NodePool.Spec.Template.Labels {
		l[k] = v
	}
	l[karpv1.NodePoolLabelKey], l[corev1.LabelInstanceTypeStable] = r.NodePool, r.InstanceType.Name
	l[karpv1.CapacityTypeLabelKey], l[corev1.LabelTopologyZone] = r.Offering.CapacityType, r.Offering.Zone
	l[corev1.LabelHostname] = r.Hostname
	n := &scheduling.Node{Name: r.Hostname, Labels: l, Taints: np.NodePool.Spec.Template.Spec.Taints,
		Allocatable: r.InstanceType.Allocatable(), Pods: pods, PricePerHour: r.Offering.Price}
	cand := &Candidate{Node: n, NodePool: np.NodePool, InstanceType: r.InstanceType, CapacityType: r.Offering.CapacityType,
		PricePerHour: r.Offering.Price, Pods: pods, CreatedAt: c.Now}
	cand.DisruptionCost = disruptionCost(cand, c.Now)
	return cand
}

func copyCounts(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func copySet(m map[string]bool) map[string]bool {
	out := make(map[string]bool, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
