package test

// SpotShareCase is one namespace's usage under one budget's Spot bounds, with the one answer
// every consumer of the Spot share must give (docs/policies.md, "Spot share"): the Go
// definition, the Rego library, the planner's assignment, the budget's status, condition and
// metric, and karpenterctl simulate.
type SpotShareCase struct {
	Name                           string
	MinPercent, MaxPercent         float64
	OnDemandBaseCPU                float64
	SpotCPU, OnDemandCPU           float64
	Percent                        float64
	Counted, Below, Above, InRange bool
}

// SpotShareCases are the cases; each consumer's test runs them all.
var SpotShareCases = []SpotShareCase{
	{Name: "no base: share of all vCPU", MaxPercent: 100, SpotCPU: 6, OnDemandCPU: 4, Percent: 60, Counted: true, InRange: true},
	{Name: "base taken off the on-demand vCPU", MinPercent: 50, MaxPercent: 100, OnDemandBaseCPU: 4, SpotCPU: 6, OnDemandCPU: 8, Percent: 60, Counted: true, InRange: true},
	{Name: "below the minimum", MinPercent: 60, MaxPercent: 100, OnDemandBaseCPU: 4, SpotCPU: 5, OnDemandCPU: 8, Percent: 500.0 / 9, Counted: true, Below: true},
	{Name: "above the maximum", MaxPercent: 50, SpotCPU: 9, OnDemandCPU: 5, Percent: 900.0 / 14, Counted: true, Above: true},
	{Name: "everything within the base: not counted, in range", MinPercent: 80, MaxPercent: 100, OnDemandBaseCPU: 4, OnDemandCPU: 3, Counted: false, InRange: true},
	{Name: "nothing runs", MinPercent: 20, MaxPercent: 80, Counted: false, InRange: true},
	{Name: "at the maximum exactly", MaxPercent: 75, SpotCPU: 3, OnDemandCPU: 1, Percent: 75, Counted: true, InRange: true},
	{Name: "within the tolerance of the minimum", MinPercent: 50, MaxPercent: 100, SpotCPU: 0.49995, OnDemandCPU: 0.50005, Percent: 49.995, Counted: true, InRange: true},
	{Name: "just past the tolerance of the minimum", MinPercent: 50, MaxPercent: 100, SpotCPU: 0.4998, OnDemandCPU: 0.5002, Percent: 49.98, Counted: true, Below: true},
	{Name: "all Spot above the base", MinPercent: 100, MaxPercent: 100, OnDemandBaseCPU: 2, SpotCPU: 8, OnDemandCPU: 2, Percent: 100, Counted: true, InRange: true},
}
