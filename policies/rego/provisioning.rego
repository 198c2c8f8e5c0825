# CapacityBudget at the provisioning decision point: evaluated once per (namespace, NodePool)
# per batch, it turns the namespace's budget into constraints for the solver.
#
# input: {"namespace": {"name", "labels"}, "nodePool": {"name"}, "instanceTypes": [{"name",
# "family", ...}], "budget": budget (see budget.rego), "usage": usage, "now": RFC 3339}
#
# Outputs, read by the engine from every module at this decision point:
#   deny                 the namespace launches nothing on this NodePool
#   warn                 reported, nothing is blocked
#   deny_instance_types  {"name", "msg"}: the namespace's pods may not use these types
#   deny_capacity_types  {"capacityType", "msg"}
#   price_ceiling        {"pricePerHour", "msg"}: no new node of the namespace costs more
#   capacity_budget      the budget in force: hourly limit, remaining, Spot bounds
# deny and warn entries are strings or {"msg", "namespace"} objects.
package karpenter.provisioning

import data.karpenter.budget

now := time.parse_rfc3339_ns(input.now)

deny contains {"namespace": b.namespace, "msg": msg} if {
	b := input.budget
	budget.remaining(b, input.usage, now) <= 0
	msg := sprintf("%s: hourly cost %s has reached the limit %s (%s)", [
		budget.name(b), budget.format2(budget.committed(input.usage)),
		budget.format2(budget.hourly_limit(b, now)), budget.limit_reason(b, now),
	])
}

deny_instance_types contains {"name": it.name, "msg": msg} if {
	some it in input.instanceTypes
	msg := budget.type_refusal(input.budget, it)
}

deny_capacity_types contains {"capacityType": "spot", "msg": msg} if {
	b := input.budget
	budget.spot_bounds(b).maxPercent == 0
	msg := sprintf("%s: spot.maxPercent is 0", [budget.name(b)])
}

deny_capacity_types contains {"capacityType": "on-demand", "msg": msg} if {
	b := input.budget
	budget.spot_bounds(b).minPercent == 100
	budget.base_cpu(b) == 0
	msg := sprintf("%s: spot.minPercent is 100 with no on-demand base", [budget.name(b)])
}

warn contains {"namespace": b.namespace, "msg": msg} if {
	b := input.budget
	not budget.spot_in_range(b, input.usage)
	bounds := budget.spot_bounds(b)
	msg := sprintf("%s: Spot share above the on-demand base is %s%%, outside [%d, %d]", [
		budget.name(b), budget.format1(budget.spot_share_above_base(b, input.usage)),
		bounds.minPercent, bounds.maxPercent,
	])
}

capacity_budget := object.union(
	{"name": budget.name(input.budget), "spot": budget.spot_bounds(input.budget)},
	limit_in_force,
)

limit_in_force := {
	"hourlyLimit": budget.hourly_limit(input.budget, now),
	"remaining": budget.remaining(input.budget, input.usage, now),
	"committed": budget.committed(input.usage),
	"limitReason": budget.limit_reason(input.budget, now),
} if {
	budget.hourly_limit(input.budget, now)
} else := {}
