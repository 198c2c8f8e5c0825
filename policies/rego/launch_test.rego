package karpenter.launch_test

import data.karpenter.launch

budget_of(ns, hourly) := {
	"namespace": ns, "name": "default",
	"spec": {"limits": {"hourlyCost": hourly}, "instanceFamilies": {"deny": ["p*"]}},
}

claim := {"nodePool": "default", "instanceType": "m6i.2xlarge", "family": "m6i", "capacityType": "spot", "zone": "us-east-1a", "pricePerHour": 0.16}

test_within_budget_launches if {
	count(launch.deny) == 0 with input as {
		"nodeClaim": claim, "now": "2026-11-16T00:00:00Z",
		"namespaces": [{"name": "team-a", "cost": 0.08, "budget": budget_of("team-a", "1.00"), "usage": {"hourlyCost": 0.5, "inFlightHourlyCost": 0.4}}],
	}
}

test_overrun_counts_in_flight if {
	launch.deny == {{"namespace": "team-a", "msg": "CapacityBudget team-a/default: hourly cost 0.90 + 0.16 would exceed 1.00 (hourlyCost 1.00)"}} with input as {
		"nodeClaim": claim, "now": "2026-11-16T00:00:00Z",
		"namespaces": [
			{"name": "team-a", "cost": 0.16, "budget": budget_of("team-a", "1.00"), "usage": {"hourlyCost": 0.5, "inFlightHourlyCost": 0.4}},
			{"name": "team-b", "cost": 0.16, "usage": {"hourlyCost": 50}},
		],
	}
}
