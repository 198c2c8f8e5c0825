package disruption

import (
	"fmt"
	"strings"
)

// FeatureGates are the disruption feature gates, with their stage, as upstream declares them:
// SpotToSpotConsolidation (alpha, off by default).
var FeatureGates = map[string]string{"SpotToSpotConsolidation": "alpha"}

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
		if _, known := FeatureGates[name]; !known {
			return fmt.Errorf("unknown feature gate %q (known: SpotToSpotConsolidation)", name)
		}
		opts.SpotToSpotConsolidation = value == "true"
	}
	return nil
}
