package disruption

import (
	"fmt"
	"slices"
	"strings"
)

// FeatureGates are the disruption feature gates, with their stage, as upstream declares them;
// all are off by default: SpotToSpotConsolidation, NodeRepair (repair of unhealthy nodes) and
// TerminateFirstRepair (repair terminates a node before its replacement launches).
var FeatureGates = map[string]string{"SpotToSpotConsolidation": "alpha", "NodeRepair": "alpha", "TerminateFirstRepair": "alpha"}

// ParseFeatureGates reads "Name=true,Name=false" into the options it sets; an unknown gate or
// a value that is not true or false is an error naming it.
func ParseFeatureGates(s string, opts *Options) error {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	for _, g := range strings.Split(s, ",") {
		name, value, ok := strings.Cut(strings.TrimSpace(g), "=")
		if !ok || (value != "true" && value != "false") {
			return fmt.Errorf("%q: want Name=true or Name=false", g)
		}
		on := value == "true"
		switch name {
		case "SpotToSpotConsolidation":
			opts.SpotToSpotConsolidation = on
		case "NodeRepair":
			opts.NodeRepair = on
		case "TerminateFirstRepair":
			opts.TerminateFirstRepair = on
		default:
			known := make([]string, 0, len(FeatureGates))
			for k := range FeatureGates {
				known = append(known, k)
			}
			slices.Sort(known)
			return fmt.Errorf("unknown feature gate %q (known: %s)", name, strings.Join(known, ", "))
		}
	}
	return nil
}
