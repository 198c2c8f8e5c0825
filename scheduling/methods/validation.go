package methods

import (
	"context"
	"fmt"
	"slices"
)

// Validate re-checks a command, computed from an earlier snapshot, against a fresh one
// (upstream waits 15 s between the two, so that the cluster settles): "" when it still
// holds, else why it must be dropped. It fails when a candidate is gone, changed (other pods,
// blocked by do-not-disrupt or a PDB, no longer qualifying), had a pod nominated to it (the
// provisioner counts on its room), when the budgets no longer allow the command, or when
// simulating again needs a different shape (another decision or number of replacements) or
// no longer works. nominated reports whether pods are nominated to a node.
func Validate(ctx context.Context, cmd *Command, fresh *Cluster, m Method, nominated func(node string) bool) string {
	byName := map[string]*Candidate{}
	for _, c := range fresh.Candidates {
		byName[c.Name()] = c
	}
	cands := make([]*Candidate, 0, len(cmd.Candidates))
	perPool := map[string]int{}
	for _, old := range cmd.Candidates {
		c := byName[old.Name()]
		switch {
		case c == nil:
			return fmt.Sprintf("node %s is no longer a candidate", old.Name())
		case c.Blocked != "":
			return fmt.Sprintf("node %s: %s", c.Name(), c.Blocked)
		case !samePods(old, c):
			return fmt.Sprintf("node %s: its pods changed", c.Name())
		case nominated != nil && nominated(c.Name()):
			return fmt.Sprintf("node %s: pods were nominated to it", c.Name())
		case !m.Qualifies(fresh, c):
			return fmt.Sprintf("node %s no longer qualifies for %s", c.Name(), cmd.Reason)
		}
		cands = append(cands, c)
		perPool[c.NodePoolName()]++
	}
	budgets := NewBudgets(fresh)
	for pool, n := range perPool {
		if budgets.Allowed(pool, cmd.Reason) < n {
			return fmt.Sprintf("NodePool %s's budget allows %d %s disruptions now, the command needs %d", pool, budgets.Allowed(pool, cmd.Reason), cmd.Reason, n)
		}
	}
	var again *Command
	var why string
	var err error
	switch {
	case cmd.Reason == ReasonUnderutilized:
		again, why, _, err = fresh.consolidateScored(cands, cmd.ConsolidationType, cmd.Narrowed)
	case cmd.Decision == DecisionDelete:
		// An empty node must still be empty: samePods checked it.
		return ""
	default:
		again, why, err = fresh.replacing(cmd.Reason, cands, replacementRule{}.narrowed(cmd.Narrowed))
	}
	switch {
	case err != nil:
		return err.Error()
	case again == nil:
		return "simulating again: " + why
	case again.Decision != cmd.Decision || len(again.Replacements) != len(cmd.Replacements):
		return fmt.Sprintf("simulating again needs %s with %d replacements, not %s with %d", again.Decision, len(again.Replacements), cmd.Decision, len(cmd.Replacements))
	}
	if fresh.Check != nil {
		if why := fresh.Check.Check(ctx, fresh, again); why != "" {
			return "denied by policy: " + why
		}
	}
	return ""
}

func samePods(a, b *Candidate) bool {
	keys := func(c *Candidate) []string {
		out := make([]string, 0, len(c.Pods))
		for _, p := range c.Pods {
			out = append(out, p.Namespace+"/"+p.Name)
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(keys(a), keys(b))
}
