package karpenter.provisioning_test

import data.karpenter.provisioning

team_a := {
	"namespace": "team-a", "name": "default",
	"spec": {
		"limits": {"hourlyCost": "13.00"},
		"spot": {"minPercent": 60, "maxPercent": 100, "onDemandBaseCPU": "4"},
		"instanceFamilies": {"allow": ["c*", "m*"], "deny": ["*metal*"]},
	},
}

base_input := {
	"namespace": {"name": "team-a", "labels": {}},
	"nodePool": {"name": "default"},
	"instanceTypes": [
		{"name": "m6i.large", "family": "m6i"},
		{"name": "m5.metal", "family": "m5"},
		{"name": "r6i.large", "family": "r6i"},
	],
	"budget": team_a,
	"usage": {"hourlyCost": 6, "inFlightHourlyCost": 1, "spotCPU": 12, "onDemandCPU": 4},
	"now": "2026-11-16T00:00:00Z",
}

test_refused_types if {
	{t.name | some t in provisioning.deny_instance_types} == {"m5.metal", "r6i.large"} with input as base_input
}

test_budget_in_force if {
	provisioning.capacity_budget == {
		"name": "CapacityBudget team-a/default",
		"hourlyLimit": 13, "remaining": 6, "committed": 7, "limitReason": "hourlyCost 13.00",
		"spot": {"minPercent": 60, "maxPercent": 100, "onDemandBaseCPU": 4},
	} with input as base_input
}

test_budget_without_limits if {
	b := json.patch(team_a, [{"op": "remove", "path": "/spec/limits"}])
	c := provisioning.capacity_budget with input as json.patch(base_input, [{"op": "replace", "path": "/budget", "value": b}])
	not c.hourlyLimit
	c.spot.minPercent == 60
}

test_nothing_denied_within_budget if {
	count(provisioning.deny) == 0 with input as base_input
	count(provisioning.warn) == 0 with input as base_input
	count(provisioning.deny_capacity_types) == 0 with input as base_input
}

test_limit_reached_denies_the_namespace if {
	inp := object.union(base_input, {"usage": {"hourlyCost": 12.5, "inFlightHourlyCost": 0.5, "spotCPU": 12, "onDemandCPU": 4}})
	provisioning.deny == {{"namespace": "team-a", "msg": "CapacityBudget team-a/default: hourly cost 13.00 has reached the limit 13.00 (hourlyCost 13.00)"}} with input as inp
}

test_no_spot_when_max_is_zero if {
	b := json.patch(team_a, [{"op": "replace", "path": "/spec/spot", "value": {"maxPercent": 0}}])
	provisioning.deny_capacity_types == {{"capacityType": "spot", "msg": "CapacityBudget team-a/default: spot.maxPercent is 0"}} with input as json.patch(base_input, [{"op": "replace", "path": "/budget", "value": b}])
}

test_only_spot_when_min_is_all_without_base if {
	b := json.patch(team_a, [{"op": "replace", "path": "/spec/spot", "value": {"minPercent": 100}}])
	{c.capacityType | some c in provisioning.deny_capacity_types} == {"on-demand"} with input as json.patch(base_input, [{"op": "replace", "path": "/budget", "value": b}])
}

test_spot_share_out_of_range_warns if {
	inp := object.union(base_input, {"usage": {"hourlyCost": 1, "spotCPU": 2, "onDemandCPU": 8}})
	provisioning.warn == {{"namespace": "team-a", "msg": "CapacityBudget team-a/default: Spot share above the on-demand base is 33.3%, outside [60, 100]"}} with input as inp
}
