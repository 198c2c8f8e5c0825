package methods

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/scheduling/solver"
)

// The rules a consolidation replacement follows: cheaper by at least the minimum saving,
// never the candidate's own type, Spot only as the feature gate allows, one node (a cover of
// several smaller nodes is tried again as one), and every type it may launch cheaper than
// what it replaces.

func TestReplacementRules(t *testing.T) {
	for name, tc := range map[string]struct {
		w    world
		want string
	}{
		"no minimum saving: any cheaper type": {w: world{pools: pool(onDemandOnly), nodes: nodesOf(1, "m5.xlarge", "on-demand"),
			pods: []*corev1.Pod{pod("w", "a", "1", "2Gi")}}, want: "replace:a+c5.large/on-demand"},
		"a minimum of 10% is met by halving": {w: world{pools: pool(onDemandOnly), nodes: nodesOf(1, "m5.xlarge", "on-demand"),
			pods: []*corev1.Pod{pod("w", "a", "1", "2Gi")}, opts: Options{MinSavingsFraction: 0.1}}, want: "replace:a+c5.large/on-demand"},
		"a minimum of 60% is not": {w: world{pools: pool(onDemandOnly), nodes: nodesOf(1, "m5.xlarge", "on-demand"),
			pods: []*corev1.Pod{pod("w", "a", "1", "2Gi")}, opts: Options{MinSavingsFraction: 0.6}}, want: ""},
		"the same type is never a replacement": {w: world{pools: pool(onDemandOnly, withRequirementsNP(karpv1.NodeSelectorRequirementWithMinValues{
			Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.xlarge"}})), nodes: nodesOf(1, "m5.xlarge", "on-demand"),
			pods: []*corev1.Pod{pod("w", "a", "1", "2Gi")}}, want: ""},
		"a type of the same price is no replacement": {w: world{pools: pool(onDemandOnly, withRequirementsNP(karpv1.NodeSelectorRequirementWithMinValues{
			Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large", "c5.large"}})), nodes: nodesOf(1, "m5.large", "on-demand"),
			pods: []*corev1.Pod{pod("w", "a", "1", "2Gi")}}, want: ""},
		"on-demand to Spot": {w: world{nodes: nodesOf(1, "m5.xlarge", "on-demand"), pods: []*corev1.Pod{pod("w", "a", "1", "2Gi")}}, want: "replace:a+c5.large/spot"},
		"Spot to on-demand only when cheaper": {w: world{nodes: nodesOf(1, "m5.4xlarge", "spot"), pods: []*corev1.Pod{pod("w", "a", "1", "2Gi")}},
			want: "replace:a+c5.large/on-demand"},
	} {
		t.Run(name, func(t *testing.T) {
			c := tc.w.cluster()
			cmds := commands(t, &SingleNode{}, c)
			got := strings.Join(commandNames(cmds), " | ")
			if got != tc.want {
				t.Fatalf("commands %q, want %q", got, tc.want)
			}
			for _, cmd := range cmds {
				before := cmd.PriceBefore()
				for _, r := range cmd.Replacements {
					for _, it := range r.InstanceTypes {
						if it.Name == cmd.Candidates[0].InstanceType.Name {
							t.Errorf("the replacement may launch %s, the candidate's own type", it.Name)
						}
						if o, ok := cheapestAvailable(it, r); ok && o.Price >= before*(1-c.Options.MinSavingsFraction) {
							t.Errorf("the replacement may launch %s at $%.3f against $%.3f", it.Name, o.Price, before)
						}
					}
				}
			}
		})
	}
}

// cheapestAvailable is a type's cheapest available offering the replacement's requirements
// allow.
func cheapestAvailable(it *cloudprovider.InstanceType, r *solver.NodeClaim) (cloudprovider.Offering, bool) {
	allows := func(key, value string) bool {
		req, ok := r.Requirements[key]
		return !ok || req.Has(value)
	}
	var best cloudprovider.Offering
	found := false
	for _, o := range it.Offerings {
		if !o.Available || !allows(karpv1.CapacityTypeLabelKey, o.CapacityType) || !allows(corev1.LabelTopologyZone, o.Zone) {
			continue
		}
		if !found || o.Price < best.Price {
			best, found = o, true
		}
	}
	return best, found
}

// A consolidation whose cheapest cover takes several small nodes is tried again as one node:
// multi-node consolidation launches at most one.
func TestOneReplacementNode(t *testing.T) {
	// Three m5.2xlarge, each with a 3-cpu pod: the cheapest cover is three m5.xlarge ($0.60)
	// but one node must hold all 9 cpu (an m5.4xlarge, $0.80, against $1.20).
	var pods []*corev1.Pod
	for _, n := range []string{"a", "b", "c"} {
		pods = append(pods, pod("w"+n, n, "3", "4Gi"))
	}
	w := world{pools: pool(onDemandOnly), nodes: nodesOf(3, "m5.2xlarge", "on-demand"), pods: pods}
	cmds := commands(t, &MultiNode{}, w.cluster())
	if len(cmds) != 1 {
		t.Fatalf("commands %v", commandNames(cmds))
	}
	if n := len(cmds[0].Replacements); n > 1 {
		t.Fatalf("%d replacements for one command", n)
	}
	if got := commandNames(cmds)[0]; got != "replace:a,b,c+m5.4xlarge/on-demand" {
		t.Fatalf("command %s, want the three onto one m5.4xlarge", got)
	}
}

// Over many random single-node clusters, a replacement is always cheaper than its candidate by
// the minimum saving, and never its own type.
func TestReplacementRulesOnManyShapes(t *testing.T) {
	shapes := []struct{ cpu, mem string }{{"100m", "128Mi"}, {"500m", "1Gi"}, {"1", "2Gi"}, {"1500m", "3Gi"}, {"3", "6Gi"}, {"6", "12Gi"}}
	checked := 0
	for _, itype := range []string{"m5.large", "m5.xlarge", "m5.2xlarge", "m5.4xlarge", "c5.large"} {
		for _, ct := range []string{"on-demand", "spot"} {
			for _, sh := range shapes {
				for _, frac := range []float64{0, 0.25} {
					w := world{nodes: nodesOf(1, itype, ct), pods: []*corev1.Pod{pod("w", "a", sh.cpu, sh.mem)}, opts: Options{MinSavingsFraction: frac}}
					c := w.cluster()
					for _, cmd := range commands(t, &SingleNode{}, c) {
						checked++
						cand := cmd.Candidates[0]
						for _, r := range cmd.Replacements {
							if r.Offering.Price >= cand.PricePerHour*(1-frac) {
								t.Errorf("%s %s with %s/%s (min %.0f%%): replacement %s at $%.3f against $%.3f", itype, ct, sh.cpu, sh.mem, frac*100, r.InstanceType.Name, r.Offering.Price, cand.PricePerHour)
							}
							if r.InstanceType.Name == itype {
								t.Errorf("%s replaced by its own type", itype)
							}
							if ct == karpv1.CapacityTypeSpot && r.Offering.CapacityType == karpv1.CapacityTypeSpot {
								t.Errorf("%s Spot replaced by Spot without the feature gate", itype)
							}
						}
					}
				}
			}
		}
	}
	if checked < 10 {
		t.Fatalf("only %d commands checked", checked)
	}
	t.Logf("%d commands checked", checked)
}
