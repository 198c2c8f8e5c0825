package karpenter.budget_test

import data.karpenter.budget

# 2026-11-16T00:00:00Z: 15 days into November, 360 hours left.
mid_november := time.parse_rfc3339_ns("2026-11-16T00:00:00Z")

team_a := {
	"namespace": "team-a", "name": "default",
	"spec": {
		"limits": {"hourlyCost": "13.00", "monthlyCost": "8000"},
		"spot": {"minPercent": 60, "maxPercent": 100, "onDemandBaseCPU": "4"},
		"instanceFamilies": {"allow": ["c*", "m*", "r*"], "deny": ["*metal*"]},
		"schedules": [{"schedule": "0 18 * * mon-fri", "duration": "14h", "limits": {"hourlyCost": "5.00"}}],
	},
	"status": {"monthToDateCost": "4400"},
}

test_name if budget.name(team_a) == "CapacityBudget team-a/default"

test_money if {
	budget.money("") == 0
	budget.money("12.5") == 12.5
}

test_month_end_crosses_the_year if {
	budget.month_end(time.parse_rfc3339_ns("2026-12-31T23:00:00Z")) == time.parse_rfc3339_ns("2027-01-01T00:00:00Z")
	budget.month_end(mid_november) == time.parse_rfc3339_ns("2026-12-01T00:00:00Z")
}

test_hours_left if budget.hours_left(mid_november) == 360

test_hours_left_never_zero if budget.hours_left(time.parse_rfc3339_ns("2026-11-30T23:59:59.999Z")) == 1 / 60

test_monthly_rate_from_spend_so_far if {
	# (8000 - 4400) / 360 = 10
	budget.monthly_rate(team_a, mid_november) == 10
}

test_monthly_rate_not_below_zero if {
	b := json.patch(team_a, [{"op": "replace", "path": "/status/monthToDateCost", "value": "9000"}])
	budget.monthly_rate(b, mid_november) == 0
}

test_lowest_limit_wins if {
	budget.hourly_limit(team_a, mid_november) == 10
	budget.limit_reason(team_a, mid_november) == "monthlyCost 8000 with 4400.00 spent and 360h left"
}

test_hourly_limit_alone if {
	b := json.patch(team_a, [{"op": "remove", "path": "/spec/limits/monthlyCost"}])
	budget.hourly_limit(b, mid_november) == 13
	budget.limit_reason(b, mid_november) == "hourlyCost 13.00"
}

test_monthly_limit_alone if {
	b := json.patch(team_a, [{"op": "remove", "path": "/spec/limits/hourlyCost"}])
	budget.hourly_limit(b, mid_november) == 10
	budget.limit_reason(b, mid_november) == "monthlyCost 8000 with 4400.00 spent and 360h left"
}

test_no_limits_no_hourly_limit if {
	b := json.patch(team_a, [{"op": "remove", "path": "/spec/limits"}])
	not budget.hourly_limit(b, mid_november)
}

test_no_status_means_nothing_spent if {
	b := json.patch(team_a, [{"op": "remove", "path": "/status"}])
	budget.month_to_date(b) == 0
}

test_open_window_replaces_limits if {
	b := object.union(team_a, {"activeSchedule": 0})
	budget.limits(b) == {"hourlyCost": "5.00"}
	budget.hourly_limit(b, mid_november) == 5
}

test_window_without_limits_keeps_the_spec if {
	b := object.union(json.patch(team_a, [{"op": "remove", "path": "/spec/schedules/0/limits"}]), {"activeSchedule": 0})
	budget.limits(b) == team_a.spec.limits
}

test_open_window_replaces_spot if {
	b := object.union(json.patch(team_a, [{"op": "add", "path": "/spec/schedules/0/spot", "value": {"maxPercent": 0}}]), {"activeSchedule": 0})
	budget.spot_bounds(b) == {"minPercent": 0, "maxPercent": 0, "onDemandBaseCPU": 0}
}

test_remaining_counts_in_flight if {
	budget.remaining(team_a, {"hourlyCost": 6, "inFlightHourlyCost": 1.5}, mid_november) == 2.5
	budget.remaining(team_a, {"hourlyCost": 6, "inFlightHourlyCost": 1.5, "idleHourlyCost": 0.5}, mid_november) == 2
	budget.remaining(team_a, {"hourlyCost": 11}, mid_november) == 0
}

test_exceeds if {
	budget.exceeds(team_a, {"hourlyCost": 9.5, "inFlightHourlyCost": 0}, mid_november, 0.6)
	not budget.exceeds(team_a, {"hourlyCost": 9.5, "inFlightHourlyCost": 0}, mid_november, 0.5)
}

test_over_message if {
	budget.over_message(json.patch(team_a, [{"op": "remove", "path": "/spec/limits/monthlyCost"}]), {"hourlyCost": 12, "inFlightHourlyCost": 0.4}, mid_november, 0.8) == "CapacityBudget team-a/default: hourly cost 12.40 + 0.80 would exceed 13.00 (hourlyCost 13.00)"
}

test_spot_bounds_defaults if {
	b := json.patch(team_a, [{"op": "remove", "path": "/spec/spot"}])
	budget.spot_bounds(b) == {"minPercent": 0, "maxPercent": 100, "onDemandBaseCPU": 0}
}

test_spot_share_above_base if {
	# 4 on-demand vCPU are the base; 6 spot of 6 + 4 above it.
	budget.spot_share_above_base(team_a, {"spotCPU": 6, "onDemandCPU": 8}) == 60
	budget.spot_in_range(team_a, {"spotCPU": 6, "onDemandCPU": 8})
	not budget.spot_in_range(team_a, {"spotCPU": 5, "onDemandCPU": 8})
}

test_spot_share_above_max if {
	b := json.patch(team_a, [{"op": "replace", "path": "/spec/spot/maxPercent", "value": 80}])
	not budget.spot_in_range(b, {"spotCPU": 9, "onDemandCPU": 5})
}

test_nothing_above_base_is_in_range if {
	not budget.spot_share_above_base(team_a, {"spotCPU": 0, "onDemandCPU": 3})
	budget.spot_in_range(team_a, {"spotCPU": 0, "onDemandCPU": 3})
}

test_base_cpu_in_millicores if {
	b := json.patch(team_a, [{"op": "replace", "path": "/spec/spot/onDemandBaseCPU", "value": "1500m"}])
	budget.base_cpu(b) == 1.5
}

test_family_deny_wins if {
	budget.type_refusal(team_a, {"name": "m5.metal", "family": "m5"}) == `CapacityBudget team-a/default: instance type m5.metal (family m5) matches instanceFamilies.deny "*metal*"`
}

test_family_not_allowed if {
	budget.type_refusal(team_a, {"name": "p4d.24xlarge", "family": "p4d"}) == `CapacityBudget team-a/default: instance type p4d.24xlarge (family p4d) is not in instanceFamilies.allow ["c*", "m*", "r*"]`
}

test_family_allowed if not budget.type_refusal(team_a, {"name": "m6i.large", "family": "m6i"})

test_type_pattern if {
	b := json.patch(team_a, [{"op": "replace", "path": "/spec/instanceFamilies", "value": {"deny": ["c5.large"]}}])
	budget.type_refusal(b, {"name": "c5.large", "family": "c5"})
	not budget.type_refusal(b, {"name": "c5.xlarge", "family": "c5"})
}

test_no_family_rules_allow_all if {
	b := json.patch(team_a, [{"op": "remove", "path": "/spec/instanceFamilies"}])
	not budget.type_refusal(b, {"name": "p4d.24xlarge", "family": "p4d"})
}
