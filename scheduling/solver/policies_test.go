package solver

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

// PREFERENCE_POLICY=Ignore drops each kind of preference: what Respect spreads over three
// nodes or puts on a dearer type, Ignore packs onto the cheapest.
func TestIgnorePreferences(t *testing.T) {
	web := map[string]string{"app": "web"}
	for name, tc := range map[string]struct {
		pref        func(*corev1.Pod)
		respectWant int
	}{
		"preferred pod anti-affinity": {respectWant: 3, pref: func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
				Weight: 10, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: web}}}}}}
		}},
		"ScheduleAnyway spread": {respectWant: 3, pref: func(p *corev1.Pod) {
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelHostname,
				WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: &metav1.LabelSelector{MatchLabels: web}}}
		}},
		"preferred node affinity": {respectWant: 1, pref: prefer(karpv1.LabelInstanceType, "m5.4xlarge")},
	} {
		t.Run(name, func(t *testing.T) {
			in := func(ignore bool) *Input {
				ps := pods("web", 3, "500m", "512Mi", tc.pref, func(p *corev1.Pod) { p.Labels = web })
				return Policies{IgnorePreferences: ignore}.Apply(&Input{Pods: ps, NodePools: pools(nodePool("default"))})
			}
			respect, ignore := solve(t, in(false)), solve(t, in(true))
			expectPlaced(t, respect)
			expectPlaced(t, ignore)
			if len(respect.NodeClaims) != tc.respectWant {
				t.Fatalf("Respect: want %d NodeClaims, got %d", tc.respectWant, len(respect.NodeClaims))
			}
			if len(ignore.NodeClaims) != 1 || ignore.NodeClaims[0].InstanceType.Name == "m5.4xlarge" {
				t.Fatalf("Ignore: want the three pods on one NodeClaim of the cheapest type, got %d NodeClaims (%s)", len(ignore.NodeClaims), ignore.NodeClaims[0].InstanceType.Name)
			}
			if name == "preferred node affinity" && respect.NodeClaims[0].InstanceType.Name != "m5.4xlarge" {
				t.Fatalf("Respect: want the preferred type, got %s", respect.NodeClaims[0].InstanceType.Name)
			}
		})
	}
}

// MIN_VALUES_POLICY=BestEffort launches what Strict refuses, with the minValues lowered to
// what the types offer, and says so on the NodeClaim; a minValues that can be met is kept.
func TestMinValuesBestEffort(t *testing.T) {
	flexible := func(n int) *karpv1.NodePool {
		return nodePool("flex", func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements,
				karpv1.NodeSelectorRequirementWithMinValues{Key: karpv1.LabelInstanceFamily, Operator: corev1.NodeSelectorOpExists, MinValues: ptr.To(n)})
		})
	}
	bestEffort := Policies{MinValuesBestEffort: true}
	// Only m5.4xlarge has 13 vCPU: one family is left, of the 2 asked for.
	r := solve(t, bestEffort.Apply(&Input{Pods: pods("w", 1, "13", "10Gi"), NodePools: pools(flexible(2))}))
	expectPlaced(t, r)
	c := r.NodeClaims[0]
	if !c.MinValuesRelaxed {
		t.Fatal("the NodeClaim is not marked relaxed")
	}
	if got := c.Requirements[karpv1.LabelInstanceFamily].MinValues; got == nil || *got != 1 {
		t.Fatalf("minValues: want lowered to 1, got %v", got)
	}
	nc := NodeClaimFor(flexible(2), c)
	if nc.Annotations[karpv1.NodeClaimMinValuesRelaxedAnnotationKey] != "true" {
		t.Fatalf("annotations: %v", nc.Annotations)
	}
	// The NodePool's own requirement is untouched.
	if np := flexible(2); *np.Spec.Template.Spec.Requirements[1].MinValues != 2 {
		t.Fatal("the NodePool's minValues changed")
	}
	r = solve(t, bestEffort.Apply(&Input{Pods: pods("w", 1, "1", "1Gi"), NodePools: pools(flexible(3))}))
	expectPlaced(t, r)
	c = r.NodeClaims[0]
	if c.MinValuesRelaxed || *c.Requirements[karpv1.LabelInstanceFamily].MinValues != 3 {
		t.Fatalf("a minValues that can be met is kept: relaxed %t, minValues %d", c.MinValuesRelaxed, *c.Requirements[karpv1.LabelInstanceFamily].MinValues)
	}
	if a := NodeClaimFor(flexible(3), c).Annotations[karpv1.NodeClaimMinValuesRelaxedAnnotationKey]; a != "false" {
		t.Fatalf("annotation %q, want false", a)
	}
}
