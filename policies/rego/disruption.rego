# CapacityBudget at the disruption decision point: the gate each disruption command passes
# (consolidation, drift, expiration) before its candidates are tainted. A command that moves a
# namespace's pods onto replacements may not push the namespace over its hourly limit, nor
# onto instance types its budget refuses.
#
# input: {"command": {"reason", "nodes": [{"name", "instanceType", "capacityType",
# "pricePerHour"}], "replacements": [{"instanceType", "family", "capacityType",
# "pricePerHour"}]}, "namespaces": [{"name", "labels", "costDelta", "budget", "usage"}],
# "now": RFC 3339}
package karpenter.disruption

import data.karpenter.budget

now := time.parse_rfc3339_ns(input.now)

deny contains {"namespace": ns.name, "msg": msg} if {
	some ns in input.namespaces
	ns.costDelta > 0
	budget.exceeds(ns.budget, ns.usage, now, ns.costDelta)
	msg := sprintf("%s (disruption %s)", [budget.over_message(ns.budget, ns.usage, now, ns.costDelta), input.command.reason])
}

deny contains {"namespace": ns.name, "msg": msg} if {
	some ns in input.namespaces
	some r in input.command.replacements
	msg := sprintf("%s (disruption %s)", [budget.type_refusal(ns.budget, {"name": r.instanceType, "family": r.family}), input.command.reason])
}
