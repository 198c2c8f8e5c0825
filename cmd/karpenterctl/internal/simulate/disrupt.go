package simulate

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	k8spolicyv1 "k8s.io/api/policy/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/scheduling/methods"
	"github.com/karpenter-policy/karpenter/scheduling/planner"
	"github.com/karpenter-policy/karpenter/scheduling/snapshot"
	"github.com/karpenter-policy/karpenter/scheduling/solver"
)

// DisruptInput is a cluster for karpenterctl simulate --disrupt: the nodes with their pods,
// PodDisruptionBudgets and NodeClaims, the NodePools, optionally pending workloads (placed
// first, as the provisioner would) and policies.
type DisruptInput struct {
	Input
	PDBs       []*k8spolicyv1.PodDisruptionBudget
	NodeClaims []*karpv1.NodeClaim
	Now        time.Time
	// MaxCommands stops after that many commands; 0 runs until no method acts.
	MaxCommands int
	Options     methods.Options
}

// DisruptionReport is what disruption passes would do to the cluster, command by command.
type DisruptionReport struct {
	Commands         []CommandReport          `json:"commands"`
	Unconsolidatable []UnconsolidatableReport `json:"unconsolidatable"`
	Totals           DisruptionTotals         `json:"totals"`
}

// CommandReport is one command, with the cluster's $/hour before and after it.
type CommandReport struct {
	Reason             string              `json:"reason"`
	Decision           string              `json:"decision"`
	Nodes              []string            `json:"nodes"`
	Replacements       []ReplacementReport `json:"replacements"`
	Moves              []MoveReport        `json:"moves"`
	PricePerHourBefore float64             `json:"pricePerHourBefore"`
	PricePerHourAfter  float64             `json:"pricePerHourAfter"`
}

// ReplacementReport is a node a command launches; names are unique across the run.
type ReplacementReport struct {
	Name          string   `json:"name"`
	NodePool      string   `json:"nodePool"`
	InstanceType  string   `json:"instanceType"`
	InstanceTypes []string `json:"instanceTypes"`
	CapacityType  string   `json:"capacityType"`
	Zone          string   `json:"zone"`
	PricePerHour  float64  `json:"pricePerHour"`
}

// MoveReport is where a pod of a command's nodes goes.
type MoveReport struct {
	Pod string `json:"pod"`
	To  string `json:"to"`
}

// UnconsolidatableReport is a node disruption left alone, and why.
type UnconsolidatableReport struct {
	Node   string `json:"node"`
	Reason string `json:"reason"`
}

// DisruptionTotals compare the cluster before the first command and after the last.
type DisruptionTotals struct {
	PricePerHourBefore float64 `json:"pricePerHourBefore"`
	PricePerHourAfter  float64 `json:"pricePerHourAfter"`
	NodesBefore        int     `json:"nodesBefore"`
	NodesAfter         int     `json:"nodesAfter"`
}

// Disrupt places the pending workloads (when given), then runs disruption passes on the
// simulated cluster, each command applied before the next pass, until no method acts or
// MaxCommands commands were taken. The report's other fields are the placement of the
// pending workloads.
func Disrupt(ctx context.Context, in *DisruptInput) (*Report, error) {
	// The cluster as it runs, and with the workloads' pods pending on it.
	running, err := in.objects(false)
	if err != nil {
		return nil, err
	}
	running.NodeClaims, running.PDBs = in.NodeClaims, in.PDBs
	runningSnap := in.snapshot(running, in.Now)
	c := methods.NewCluster(runningSnap, in.Options)
	r := &Report{NodeClaims: []NodeClaim{}, ExistingNodes: []ExistingNode{}, Unschedulable: []Pending{}, Nodes: pricedNodes(runningSnap)}
	withPending, err := in.objects(true)
	if err != nil {
		return nil, err
	}
	withPending.NodeClaims, withPending.PDBs = in.NodeClaims, in.PDBs
	if pending := in.snapshot(withPending, in.Now); len(pending.Pods) > 0 {
		if c, r, err = placePending(ctx, c, in, pending); err != nil {
			return nil, err
		}
	}
	gate := func(c *methods.Cluster) {
		if in.Planner != nil {
			c.Check = methods.NewPolicyCheck(in.Planner, c)
		}
	}
	gate(c)
	d := &DisruptionReport{Commands: []CommandReport{}, Unconsolidatable: []UnconsolidatableReport{},
		Totals: DisruptionTotals{PricePerHourBefore: round(c.PricePerHour()), NodesBefore: len(c.Nodes)}}
	replacements := 0
	all := methods.Methods()
	// Expired NodeClaims go first, as the expiration controller deletes them whatever a
	// pass would do; then the passes.
	expired, err := c.Expirations(ctx)
	if err != nil {
		return nil, err
	}
	for done := false; !done; {
		cmds := expired
		expired = nil
		if len(cmds) == 0 {
			if cmds, _, err = methods.Pass(ctx, c, all); err != nil {
				return nil, err
			}
		}
		if len(cmds) == 0 {
			break
		}
		for _, cmd := range cmds {
			before := c.PricePerHour()
			if len(cmd.Refill) > 0 {
				// Terminate-first: the refill the provisioner launches once the node is gone
				// is shown as the command's replacements.
				applied := *cmd
				applied.Replacements, applied.Refill = cmd.Refill, nil
				cmd = &applied
			}
			renameReplacements(cmd, &replacements)
			next := c.Apply(cmd)
			d.Commands = append(d.Commands, commandReport(cmd, before, next.PricePerHour()))
			if c = next; in.MaxCommands > 0 && len(d.Commands) >= in.MaxCommands {
				done = true
				break
			}
			gate(c)
		}
	}
	for _, u := range c.Unconsolidatable {
		d.Unconsolidatable = append(d.Unconsolidatable, UnconsolidatableReport{Node: u.Node, Reason: u.Reason})
	}
	sort.Slice(d.Unconsolidatable, func(i, j int) bool { return NaturalLess(d.Unconsolidatable[i].Node, d.Unconsolidatable[j].Node) })
	d.Totals.PricePerHourAfter, d.Totals.NodesAfter = round(c.PricePerHour()), len(c.Nodes)
	r.Disruption = d
	return r, nil
}

// placePending solves the pending pods onto the cluster as the provisioner would and applies
// the placements, so that disruption weighs the cluster with them running.
func placePending(ctx context.Context, c *methods.Cluster, in *DisruptInput, pending *snapshot.Snapshot) (*methods.Cluster, *Report, error) {
	res, _, err := planner.Decide(ctx, in.Planner, pending.SolverInput(), nil)
	if err != nil {
		return nil, nil, err
	}
	placed := &methods.Command{Replacements: res.NodeClaims}
	for _, name := range sortedNames(res.Existing) {
		for _, p := range res.Existing[name] {
			placed.Moves = append(placed.Moves, methods.Move{Pod: p, To: name})
		}
	}
	for _, nc := range res.NodeClaims {
		nc.Hostname = "provisioned-" + nc.Hostname
		for _, p := range nc.Pods {
			placed.Moves = append(placed.Moves, methods.Move{Pod: p, To: nc.Hostname})
		}
	}
	r := report(res)
	r.Unschedulable = sortedPending(r.Unschedulable)
	return c.Apply(placed), r, nil
}

// renameReplacements names a command's replacements replacement-N, unique across the run,
// and points the moves at the new names.
func renameReplacements(cmd *methods.Command, n *int) {
	names := map[string]string{}
	for _, r := range cmd.Replacements {
		name := fmt.Sprintf("replacement-%d", *n)
		*n++
		names[r.Hostname], r.Hostname = name, name
	}
	for i, m := range cmd.Moves {
		if name, ok := names[m.To]; ok {
			cmd.Moves[i].To = name
		}
	}
}

func commandReport(cmd *methods.Command, before, after float64) CommandReport {
	cr := CommandReport{Reason: string(cmd.Reason), Decision: string(cmd.Decision), Nodes: []string{}, Replacements: []ReplacementReport{},
		Moves: []MoveReport{}, PricePerHourBefore: round(before), PricePerHourAfter: round(after)}
	if cmd.TerminateFirst != "" {
		cr.Decision = methods.TerminateFirstDecision
	}
	for _, cand := range cmd.Candidates {
		cr.Nodes = append(cr.Nodes, cand.Name())
	}
	sort.Slice(cr.Nodes, func(i, j int) bool { return NaturalLess(cr.Nodes[i], cr.Nodes[j]) })
	for _, r := range cmd.Replacements {
		rr := ReplacementReport{Name: r.Hostname, NodePool: r.NodePool, InstanceType: r.InstanceType.Name, CapacityType: r.Offering.CapacityType,
			Zone: r.Offering.Zone, PricePerHour: round(r.Offering.Price)}
		for _, it := range r.InstanceTypes {
			rr.InstanceTypes = append(rr.InstanceTypes, it.Name)
		}
		cr.Replacements = append(cr.Replacements, rr)
	}
	for _, m := range cmd.Moves {
		cr.Moves = append(cr.Moves, MoveReport{Pod: solver.PodKey(m.Pod), To: m.To})
	}
	sort.Slice(cr.Moves, func(i, j int) bool { return NaturalLess(cr.Moves[i].Pod, cr.Moves[j].Pod) })
	return cr
}

func sortedNames(m map[string][]*corev1.Pod) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
