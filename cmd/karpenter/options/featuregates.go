package options

import (
	"fmt"
	"strings"
)

// Gate is one of upstream Karpenter's feature gates (v1.15), with its default here and
// upstream's, and whether this manager builds what it turns on. Turning on a gate that is not built is an
// error saying so, not a setting silently ignored (docs/upstream.md, "Settings").
type Gate struct {
	Name string
	// Default is the gate's value here when FEATURE_GATES does not name it; Upstream is
	// upstream's. They differ for StaticCapacity only: static NodePools were built here
	// before the gate, and an upstream FEATURE_GATES string that says StaticCapacity=false
	// still turns them off.
	Default, Upstream bool
	Stage             string
	// Built is false for a gate whose feature this manager does not have yet; Missing says
	// what is missing.
	Built   bool
	Missing string
}

// Gates are upstream's feature gates, in upstream's order. A string of them, upstream's
// default included, starts the manager as long as it turns on only gates that are built.
var Gates = []Gate{
	{Name: "NodeRepair", Default: false, Upstream: false, Stage: "alpha", Built: true},
	{Name: "ReservedCapacity", Default: true, Upstream: true, Stage: "beta", Built: true},
	{Name: "SpotToSpotConsolidation", Default: false, Upstream: false, Stage: "alpha", Built: true},
	{Name: "NodeOverlay", Default: false, Upstream: false, Stage: "alpha", Built: true},
	{Name: "StaticCapacity", Default: true, Upstream: false, Stage: "alpha", Built: true},
	{Name: "CapacityBuffer", Default: false, Upstream: false, Stage: "alpha", Built: true},
	{Name: "TerminateFirstDrift", Default: false, Upstream: false, Stage: "alpha", Built: true},
	{Name: "TerminateFirstRepair", Default: false, Upstream: false, Stage: "alpha", Built: true},
	{Name: "PodDeletionCostManagement", Default: false, Upstream: false, Stage: "alpha", Missing: "setting controller.kubernetes.io/pod-deletion-cost is not built yet"},
}

// FeatureGates are the gates' values, by name; a name not in Gates is never set.
type FeatureGates map[string]bool

// UpstreamFeatureGates is upstream's default FEATURE_GATES string (its chart's).
func UpstreamFeatureGates() string {
	parts := make([]string, 0, len(Gates))
	for _, g := range Gates {
		parts = append(parts, fmt.Sprintf("%s=%t", g.Name, g.Upstream))
	}
	return strings.Join(parts, ",")
}

// ParseFeatureGates reads "Name=true,Name=false" on top of the defaults here. An unknown
// gate, a value that is not a boolean, or a gate turned on that is not built is an error that
// names it; a gate repeated takes its last value, as upstream's parser does.
func ParseFeatureGates(s string) (FeatureGates, error) {
	out := FeatureGates{}
	byName := map[string]Gate{}
	names := make([]string, 0, len(Gates))
	for _, g := range Gates {
		out[g.Name], byName[g.Name] = g.Default, g
		names = append(names, g.Name)
	}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, value, ok := strings.Cut(part, "=")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if _, known := byName[name]; !known {
			return nil, fmt.Errorf("unknown feature gate %q (known: %s)", name, strings.Join(names, ", "))
		}
		switch v := strings.ToLower(value); {
		case !ok:
			return nil, fmt.Errorf("feature gate %q: want %s=true or %s=false", part, name, name)
		case v == "true":
			out[name] = true
		case v == "false":
			out[name] = false
		default:
			return nil, fmt.Errorf("feature gate %s=%q: the value must be true or false", name, value)
		}
	}
	for _, g := range Gates {
		if out[g.Name] && !g.Built {
			return nil, fmt.Errorf("feature gate %s=true: %s in this release; leave it false", g.Name, g.Missing)
		}
	}
	return out, nil
}
