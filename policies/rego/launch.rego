# CapacityBudget at the launch decision point: the gate each new NodeClaim passes before it is
# created, with the cost it attributes to each namespace. usage includes the NodeClaims still
# in flight and those this batch already let through, so concurrent launches cannot overrun.
#
# Instance families are not checked again here: the provisioning decision point already
# removed the types a namespace's budget refuses from every NodeClaim its pods are on, which
# covers each type the cloud provider may launch, where this gate sees only the cheapest.
#
# Every rule here must refuse a namespace only more as its cost grows: the engine evaluates a
# batch once with each namespace's cost summed over its NodeClaims, and evaluates NodeClaim by
# NodeClaim only when that finds something (Engine.LaunchBudgetsFit).
#
# input: {"nodeClaim": {"nodePool", "instanceType", "family", "capacityType", "zone",
# "pricePerHour"}, "namespaces": [{"name", "labels", "cost", "cpu", "pods", "budget", "usage"}],
# "now": RFC 3339}
package karpenter.launch

import data.karpenter.budget

now := time.parse_rfc3339_ns(input.now)

deny contains {"namespace": ns.name, "msg": msg} if {
	some ns in input.namespaces
	budget.exceeds(ns.budget, ns.usage, now, ns.cost)
	msg := budget.over_message(ns.budget, ns.usage, now, ns.cost)
}
