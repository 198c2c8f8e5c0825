package planner

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"

	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/scheduling"
	"github.com/karpenter-policy/karpenter/scheduling/solver"
)

// What a batch charges the namespaces whose budget denies past an hourly limit, as
// overBudget holds pods back and headroom retries them: a pod placed on a node with room, its
// share of the node's price; for each new NodeClaim, each namespace's pods' shares and, as
// kube-scheduler may bind any of the namespace's pods into it, the NodeClaim's idle room.

// denyLimited are the namespaces whose budget denies past an hourly limit, with what each
// commits already.
func denyLimited(namespaces map[string]*Namespace) map[string]float64 {
	out := map[string]float64{}
	for name, ns := range namespaces {
		if b := ns.Budget; b != nil && b.HasLimit && b.Enforcement == policyv1.EnforcementDeny {
			out[name] = b.Committed
		}
	}
	return out
}

// accountsOf are the budget accounts a namespace's pods are charged to: its own (keyed by
// its name) and each ClusterCapacityBudget's that selects it (teams.go).
func accountsOf(accounts map[string]*Namespace, ns string) []string {
	if a := accounts[ns]; a != nil && len(a.teams) > 0 {
		return append([]string{ns}, a.teams...)
	}
	return []string{ns}
}

// onExisting calls charge for every pod that the result places on a node with room, once per
// account of its namespace in limited, with its share of the node's price (the node's own,
// else the book's).
func onExisting(res *solver.Result, nodes []*scheduling.Node, book PriceBook, z sizes, limited map[string]float64, accounts map[string]*Namespace, charge func(account string, pod *corev1.Pod, cost float64)) {
	byName := make(map[string]*scheduling.Node, len(nodes))
	for _, n := range nodes {
		byName[n.Name] = n
	}
	// In the nodes' order: which of two pods alike is held back must not depend on map order.
	for _, name := range slices.Sorted(maps.Keys(res.Existing)) {
		pods := res.Existing[name]
		n := byName[name]
		if n == nil {
			continue
		}
		price := n.PricePerHour
		if price == 0 {
			price, _ = book.Price(n.Labels)
		}
		for _, pod := range pods {
			var cost float64
			priced := false
			for _, a := range accountsOf(accounts, pod.Namespace) {
				if _, ok := limited[a]; !ok {
					continue
				}
				if !priced {
					cost, _ = z.cost(pod, price, n.Allocatable)
					priced = true
				}
				charge(a, pod, cost)
			}
		}
	}
}

// nsShare is one namespace's part of one new NodeClaim: its pods with their shares of the
// price, their sum, and the NodeClaim's idle room once all its pods counted are placed.
type nsShare struct {
	pods       []*corev1.Pod
	costs      []float64
	cost, idle float64
}

// nsShares are, by account (accountsOf), its parts of the result's new NodeClaims, in the
// result's order, leaving out the pods in skip (held back already).
func nsShares(res *solver.Result, z sizes, skip map[*corev1.Pod]bool, accounts map[string]*Namespace) map[string][]*nsShare {
	byNS := map[string][]*nsShare{}
	for _, c := range res.NodeClaims {
		alloc := c.InstanceType.Allocatable()
		idle := c.Offering.Price
		shares := map[string]*nsShare{}
		for _, pod := range c.Pods {
			if skip[pod] {
				continue
			}
			cost, _ := z.cost(pod, c.Offering.Price, alloc)
			idle -= cost
			for _, a := range accountsOf(accounts, pod.Namespace) {
				sh, ok := shares[a]
				if !ok {
					sh = &nsShare{}
					shares[a] = sh
					byNS[a] = append(byNS[a], sh)
				}
				sh.pods, sh.costs, sh.cost = append(sh.pods, pod), append(sh.costs, cost), sh.cost+cost
			}
		}
		for _, sh := range shares {
			sh.idle = max(0, idle)
		}
	}
	return byNS
}
