package karpenter.disruption_test

import data.karpenter.disruption

team_a := {"namespace": "team-a", "name": "default", "spec": {"limits": {"hourlyCost": "2"}, "instanceFamilies": {"allow": ["m*"]}}}

command := {
	"reason": "Drifted",
	"nodes": [{"name": "n1", "instanceType": "m5.large", "capacityType": "on-demand", "pricePerHour": 0.096}],
	"replacements": [{"instanceType": "m6i.xlarge", "family": "m6i", "capacityType": "on-demand", "pricePerHour": 0.192}],
}

test_cheaper_command_passes if {
	count(disruption.deny) == 0 with input as {
		"command": command, "now": "2026-11-16T00:00:00Z",
		"namespaces": [{"name": "team-a", "costDelta": -0.05, "budget": team_a, "usage": {"hourlyCost": 2.5}}],
	}
}

test_costlier_command_within_budget_passes if {
	count(disruption.deny) == 0 with input as {
		"command": command, "now": "2026-11-16T00:00:00Z",
		"namespaces": [{"name": "team-a", "costDelta": 0.05, "budget": team_a, "usage": {"hourlyCost": 1}}],
	}
}

test_costlier_command_over_budget_is_denied if {
	disruption.deny == {{"namespace": "team-a", "msg": "CapacityBudget team-a/default: hourly cost 1.98 + 0.05 would exceed 2.00 (hourlyCost 2) (disruption Drifted)"}} with input as {
		"command": command, "now": "2026-11-16T00:00:00Z",
		"namespaces": [{"name": "team-a", "costDelta": 0.05, "budget": team_a, "usage": {"hourlyCost": 1.98}}],
	}
}

test_replacement_on_refused_family_is_denied if {
	c := object.union(command, {"replacements": [{"instanceType": "c6i.xlarge", "family": "c6i", "capacityType": "spot", "pricePerHour": 0.07}]})
	count(disruption.deny) == 1 with input as {
		"command": c, "now": "2026-11-16T00:00:00Z",
		"namespaces": [{"name": "team-a", "costDelta": -0.02, "budget": team_a, "usage": {}}],
	}
}
