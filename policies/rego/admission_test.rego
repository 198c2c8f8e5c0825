package karpenter.admission_test

import data.karpenter.admission

budget := {"namespace": "team-a", "name": "default", "spec": {"limits": {"hourlyCost": "5.00"}, "spot": {"minPercent": 50}}}

test_limit_below_run_rate_warns if {
	admission.warn == {"CapacityBudget team-a/default: hourly limit 5.00 (hourlyCost 5.00) is below the current run-rate 7.20; new capacity for the namespace is denied until it falls"} with input as {
		"kind": "CapacityBudget", "budget": budget, "now": "2026-11-16T00:00:00Z",
		"usage": {"hourlyCost": 7, "inFlightHourlyCost": 0.2, "spotCPU": 10, "onDemandCPU": 0},
	}
}

test_spot_bounds_the_namespace_is_outside_warn if {
	admission.warn == {"CapacityBudget team-a/default: the namespace's Spot share above the on-demand base is 20.0%, outside the new bounds [50, 100]"} with input as {
		"kind": "CapacityBudget", "budget": budget, "now": "2026-11-16T00:00:00Z",
		"usage": {"hourlyCost": 1, "spotCPU": 2, "onDemandCPU": 8},
	}
}

test_budget_the_namespace_fits_is_quiet if {
	count(admission.warn) == 0 with input as {
		"kind": "CapacityBudget", "budget": budget, "now": "2026-11-16T00:00:00Z",
		"usage": {"hourlyCost": 1, "spotCPU": 8, "onDemandCPU": 2},
	}
}

test_other_kinds_are_quiet if {
	count(admission.warn) == 0 with input as {"kind": "NodePool", "now": "2026-11-16T00:00:00Z", "usage": {"hourlyCost": 70}, "budget": budget}
}
