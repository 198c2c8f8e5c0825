package methods

// WithFeatureGates sets the options upstream's feature gates turn on (the gates are parsed by
// cmd/karpenter/options, which knows every gate): SpotToSpotConsolidation, NodeRepair (repair
// of unhealthy nodes), TerminateFirstRepair and TerminateFirstDrift (repair and drift
// terminate a reserved node first when only its reservation slot can take its pods). A gate
// not named is off.
func (o Options) WithFeatureGates(gates map[string]bool) Options {
	o.SpotToSpotConsolidation = gates["SpotToSpotConsolidation"]
	o.NodeRepair = gates["NodeRepair"]
	o.TerminateFirstRepair = gates["TerminateFirstRepair"]
	o.TerminateFirstDrift = gates["TerminateFirstDrift"]
	return o
}
