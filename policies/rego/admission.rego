# CapacityBudget at the admission decision point: warnings for a budget written below what the
# namespace already runs at, so the pull request learns it before the sync.
#
# input: {"operation", "kind", "object", "oldObject", "namespace": {"name", "labels"},
# "budget": the object as a budget (see budget.rego), "usage", "now": RFC 3339}
package karpenter.admission

import data.karpenter.budget

now := time.parse_rfc3339_ns(input.now)

warn contains msg if {
	input.kind == "CapacityBudget"
	b := input.budget
	limit := budget.hourly_limit(b, now)
	budget.committed(input.usage) > limit
	msg := sprintf("%s: hourly limit %s (%s) is below the current run-rate %s; new capacity for the namespace is denied until it falls", [
		budget.name(b), budget.format2(limit), budget.limit_reason(b, now), budget.format2(budget.committed(input.usage)),
	])
}

warn contains msg if {
	input.kind == "CapacityBudget"
	b := input.budget
	not budget.spot_in_range(b, input.usage)
	msg := sprintf("%s: the namespace's Spot share above the on-demand base is %s%%, outside the new bounds [%d, %d]", [
		budget.name(b), budget.format1(budget.spot_share_above_base(b, input.usage)),
		budget.spot_bounds(b).minPercent, budget.spot_bounds(b).maxPercent,
	])
}
