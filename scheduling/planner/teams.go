package planner

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/policies"
	"github.com/karpenter-policy/karpenter/scheduling/solver"
)

// A ClusterCapacityBudget is an account the pods of every namespace it selects are charged
// to, besides their namespace's own (docs/architecture.md, "ClusterCapacityBudget"): its
// usage is its namespaces' together, so is its in-flight reservation, and the trimming, the
// refill and the launch gate hold pods back against it as against a namespace's budget, the
// namespaces' own budgets first. Its instance families constrain each namespace it selects.

// ClusterBudget is a ClusterCapacityBudget as the planner reads it.
type ClusterBudget struct {
	// Budget is the budget as the policies read it (policyv1.ClusterCapacityBudget.AsBudget).
	Budget   *policyv1.CapacityBudget
	Selector labels.Selector
}

// ClusterBudgets are the ClusterCapacityBudgets the planner reads: those being deleted
// govern nothing, and one whose selector does not parse (admission refuses it) is left out.
func ClusterBudgets(list []*policyv1.ClusterCapacityBudget) []*ClusterBudget {
	out := make([]*ClusterBudget, 0, len(list))
	for _, c := range list {
		if c.DeletionTimestamp != nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(&c.Spec.NamespaceSelector)
		if err != nil {
			continue
		}
		out = append(out, &ClusterBudget{Budget: c.AsBudget(), Selector: sel})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Budget.Name < out[j].Budget.Name })
	return out
}

// teamPrefix keys a ClusterCapacityBudget's account; namespaces' names cannot hold a slash.
const teamPrefix = "ClusterCapacityBudget/"

func isTeam(account string) bool { return strings.HasPrefix(account, teamPrefix) }

// TeamKey is the account key of the ClusterCapacityBudget name.
func TeamKey(name string) string { return teamPrefix + name }

// teamsOf are the accounts of the ClusterCapacityBudgets that select the namespace.
func (p *Planner) teamsOf(ns string) []string {
	var out []string
	set := labels.Set(p.Namespaces[ns].Labels)
	for _, cb := range p.ClusterBudgets {
		if cb.Selector.Matches(set) {
			out = append(out, TeamKey(cb.Budget.Name))
		}
	}
	return out
}

// HoldsPods reports whether a budget can keep the namespace's pods pending: its own, or a
// ClusterCapacityBudget that selects it (policyv1.CapacityBudget.HoldsPods).
func (p *Planner) HoldsPods(ns string) bool {
	if b := p.Budgets[ns]; b != nil && b.HoldsPods() {
		return true
	}
	set := labels.Set(p.Namespaces[ns].Labels)
	for _, cb := range p.ClusterBudgets {
		if cb.Budget.HoldsPods() && cb.Selector.Matches(set) {
			return true
		}
	}
	return false
}

// openTeams makes the account of every ClusterCapacityBudget that selects a namespace with
// pending pods: its members (every namespace it selects now) and their usage together. It
// returns the accounts the trimming charges: the namespaces and those.
func (p *Planner) openTeams(before map[string]policies.Usage, out *Outcome) map[string]*Namespace {
	accounts := make(map[string]*Namespace, len(out.Namespaces))
	maps.Copy(accounts, out.Namespaces)
	if len(p.ClusterBudgets) == 0 {
		return accounts
	}
	byKey := map[string]*ClusterBudget{}
	for _, cb := range p.ClusterBudgets {
		byKey[TeamKey(cb.Budget.Name)] = cb
	}
	for _, name := range slices.Sorted(maps.Keys(out.Namespaces)) {
		ns := out.Namespaces[name]
		ns.teams = p.teamsOf(name)
		for _, key := range ns.teams {
			if out.Teams[key] != nil {
				continue
			}
			if out.Teams == nil {
				out.Teams = map[string]*Namespace{}
			}
			t := &Namespace{cluster: byKey[key]}
			for member := range p.Namespaces {
				if byKey[key].Selector.Matches(labels.Set(p.Namespaces[member].Labels)) {
					t.Members = append(t.Members, member)
				}
			}
			// Summed in order: a sum in map order differs in its last bits from run to run.
			sort.Strings(t.Members)
			for _, member := range t.Members {
				t.Before = t.Before.Add(before[member])
			}
			out.Teams[key] = t
			accounts[key] = t
		}
	}
	return accounts
}

// evaluateTeams evaluates each open ClusterCapacityBudget on each NodePool, with its
// namespaces' usage together, and constrains every member namespace with pending pods by
// it: instance types it refuses, and a Deny when its limit is reached.
func (p *Planner) evaluateTeams(ctx context.Context, in *solver.Input, types map[string]*policies.InstanceTypes, cons map[nsPool]*policies.Constraints, out *Outcome) {
	for _, key := range slices.Sorted(maps.Keys(out.Teams)) {
		t := out.Teams[key]
		for _, np := range in.NodePools {
			c := p.Engine.Provisioning(ctx, policies.ProvisioningInput{NodePool: np.NodePool.Name, InstanceTypes: types[np.NodePool.Name],
				Budget: t.cluster.Budget, Usage: t.Before, Now: p.Now})
			out.Warnings = append(out.Warnings, c.Warned()...)
			out.DryRun = append(out.DryRun, c.DryRun()...)
			out.Errors = append(out.Errors, c.Errors...)
			if t.Budget == nil && c.Budget != nil {
				t.Budget = c.Budget
			}
			for name, ns := range out.Namespaces {
				if !slices.Contains(ns.teams, key) {
					continue
				}
				nc := cons[nsPool{name, np.NodePool.Name}]
				if nc == nil {
					continue
				}
				for it, v := range c.DeniedInstanceTypes {
					if _, ok := nc.DeniedInstanceTypes[it]; !ok {
						v.Namespace = name
						nc.DeniedInstanceTypes[it] = v
					}
				}
				for ct, v := range c.DeniedCapacityTypes {
					if _, ok := nc.DeniedCapacityTypes[ct]; !ok {
						v.Namespace = name
						nc.DeniedCapacityTypes[ct] = v
					}
				}
				for _, v := range c.Denied() {
					v.Namespace = name
					nc.Violations = append(nc.Violations, v)
				}
			}
		}
	}
}

// teamOver checks a NodeClaim against the ClusterCapacityBudgets of its pods' namespaces,
// with what the batch let through before it (launched, by account): each is charged its
// member pods' shares and the NodeClaim's idle room, on top of what it commits. A Deny budget
// the NodeClaim would take past its limit is returned; Warn and DryRun ones are recorded.
func (p *Planner) teamOver(c *solver.NodeClaim, launched map[string]float64, out *Outcome, z sizes) (map[string]float64, *policies.Violation) {
	if len(out.Teams) == 0 {
		return nil, nil
	}
	alloc := c.InstanceType.Allocatable()
	idle := c.Offering.Price
	costs := map[string]float64{}
	for _, pod := range c.Pods {
		cost, _ := z.cost(pod, c.Offering.Price, alloc)
		idle -= cost
		if ns := out.Namespaces[pod.Namespace]; ns != nil {
			for _, key := range ns.teams {
				costs[key] += cost
			}
		}
	}
	for key := range costs {
		costs[key] += max(0, idle)
	}
	for _, key := range slices.Sorted(maps.Keys(costs)) {
		b := out.Teams[key].Budget
		if b == nil || !b.HasLimit {
			continue
		}
		committed := b.Committed + launched[key]
		if committed+costs[key] <= b.HourlyLimit+budgetTolerance {
			continue
		}
		v := policies.Violation{Source: b.Source, Enforcement: b.Enforcement,
			Message: fmt.Sprintf("%s: hourly cost %.2f + %.2f would exceed %.2f (%s)", b.Source, committed, costs[key], b.HourlyLimit, b.LimitReason)}
		switch b.Enforcement {
		case policyv1.EnforcementDeny:
			return costs, &v
		case policyv1.EnforcementWarn:
			out.Warnings = append(out.Warnings, v)
		default:
			out.DryRun = append(out.DryRun, v)
		}
	}
	return costs, nil
}

// accountTeams sums the batch's placements of each open ClusterCapacityBudget's namespaces.
func accountTeams(out *Outcome) {
	for _, name := range slices.Sorted(maps.Keys(out.Namespaces)) {
		ns := out.Namespaces[name]
		for _, key := range ns.teams {
			t := out.Teams[key]
			if t == nil {
				continue
			}
			t.Added = t.Added.Add(ns.Added)
			for _, b := range ns.Blocked {
				if t.Budget != nil && b.Violation.Source == t.Budget.Source {
					t.Blocked = append(t.Blocked, b)
				}
			}
		}
	}
}
