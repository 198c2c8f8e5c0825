package methods

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
)

// Static drift as upstream decides it: the NodePool template's hash (same hash version)
// changed since the NodeClaim was launched, or the node's labels no longer meet the
// NodePool's requirements and template labels; a hash of another version, or no hash, does
// not drift by the hash.
func TestStaticDrift(t *testing.T) {
	base := func(mut ...func(*karpv1.NodePool)) *karpv1.NodePool { return nodePool("default", mut...) }
	launched := func(np *karpv1.NodePool, version string) *karpv1.NodeClaim {
		return &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "a", Annotations: map[string]string{
			karpv1.NodePoolHashAnnotationKey: np.Hash(), karpv1.NodePoolHashVersionAnnotationKey: version}}}
	}
	labels := map[string]string{corev1.LabelInstanceTypeStable: "m5.large", karpv1.CapacityTypeLabelKey: "on-demand", corev1.LabelTopologyZone: "z-a",
		corev1.LabelArchStable: "amd64", "team": "a"}
	withTeam := func(np *karpv1.NodePool) { np.Spec.Template.Labels = map[string]string{"team": "a"} }
	for name, tc := range map[string]struct {
		launchedFrom *karpv1.NodePool
		version      string
		now          *karpv1.NodePool
		labels       map[string]string
		want         string
	}{
		"nothing changed":          {launchedFrom: base(withTeam), now: base(withTeam), want: ""},
		"a template label changed": {launchedFrom: base(withTeam), now: base(func(np *karpv1.NodePool) { np.Spec.Template.Labels = map[string]string{"team": "b"} }), want: "NodePoolDrifted"},
		"a taint added": {launchedFrom: base(withTeam), now: base(withTeam, func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "x", Effect: corev1.TaintEffectNoSchedule}}
		}), want: "NodePoolDrifted"},
		"an annotation added":                  {launchedFrom: base(withTeam), now: base(withTeam, func(np *karpv1.NodePool) { np.Spec.Template.Annotations = map[string]string{"a": "b"} }), want: "NodePoolDrifted"},
		"the node class changed":               {launchedFrom: base(withTeam), now: base(withTeam, func(np *karpv1.NodePool) { np.Spec.Template.Spec.NodeClassRef.Name = "other" }), want: "NodePoolDrifted"},
		"the weight changed: not the template": {launchedFrom: base(withTeam), now: base(withTeam, func(np *karpv1.NodePool) { w := int32(5); np.Spec.Weight = &w }), want: ""},
		"the limits changed: not the template": {launchedFrom: base(withTeam), now: base(withTeam, func(np *karpv1.NodePool) { np.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: *cpu("10")} }), want: ""},
		"budgets changed: not the template": {launchedFrom: base(withTeam), now: base(withTeam, func(np *karpv1.NodePool) {
			np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "1"}}
		}), want: ""},
		"another hash version: not by the hash": {launchedFrom: base(withTeam), version: "v0", now: base(func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "x", Effect: corev1.TaintEffectNoSchedule}}
		}), want: ""},
		"requirements that no longer allow the zone": {launchedFrom: base(withTeam), now: base(withTeam, withRequirementsNP(karpv1.NodeSelectorRequirementWithMinValues{
			Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"z-b"}})), want: "RequirementsDrifted"},
		"requirements that still allow the zone": {launchedFrom: base(withTeam), now: base(withTeam, withRequirementsNP(karpv1.NodeSelectorRequirementWithMinValues{
			Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"z-a", "z-b"}})), want: ""},
		"requirements that no longer allow on-demand": {launchedFrom: base(withTeam), now: base(withTeam, func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.Requirements[0].Values = []string{karpv1.CapacityTypeSpot}
		}), want: "RequirementsDrifted"},
		"a node without a NodeClaim whose labels fit":        {now: base(withTeam), want: ""},
		"a node without a NodeClaim whose labels do not fit": {now: base(func(np *karpv1.NodePool) { np.Spec.Template.Labels = map[string]string{"team": "b"} }), want: "RequirementsDrifted"},
	} {
		t.Run(name, func(t *testing.T) {
			var nc *karpv1.NodeClaim
			if tc.launchedFrom != nil {
				v := tc.version
				if v == "" {
					v = karpv1.NodePoolHashVersion
				}
				nc = launched(tc.launchedFrom, v)
			}
			l := tc.labels
			if l == nil {
				l = labels
			}
			if got := StaticDrift(l, nc, tc.now); got != tc.want {
				t.Fatalf("drift %q, want %q", got, tc.want)
			}
		})
	}
}

func TestInstanceTypeNotFoundByLabel(t *testing.T) {
	its := []*cloudprovider.InstanceType{{Name: "m5.large"}, {Name: "c5.large"}}
	for _, tc := range []struct {
		label string
		want  bool
	}{{"m5.large", false}, {"r5.large", true}, {"", false}} {
		l := map[string]string{}
		if tc.label != "" {
			l[corev1.LabelInstanceTypeStable] = tc.label
		}
		if got := InstanceTypeNotFound(l, its); got != tc.want {
			t.Errorf("%q: %v, want %v", tc.label, got, tc.want)
		}
	}
}

// Drift through the cluster: a node launched from an older template is a drifted candidate
// since its creation, and drift replaces it.
func TestDriftFromTheTemplateHash(t *testing.T) {
	old := nodePool("default")
	now := nodePool("default", func(np *karpv1.NodePool) { np.Spec.Template.Annotations = map[string]string{"rev": "2"} })
	w := world{pools: []*karpv1.NodePool{now}, nodes: nodesOf(1, "m5.xlarge", "on-demand"), pods: []*corev1.Pod{pod("w", "a", "1", "2Gi")},
		claims: claimsFor("a", func(nc *karpv1.NodeClaim) {
			nc.Annotations = map[string]string{karpv1.NodePoolHashAnnotationKey: old.Hash(), karpv1.NodePoolHashVersionAnnotationKey: karpv1.NodePoolHashVersion}
		})}
	c := w.cluster()
	if len(c.Candidates) != 1 || c.Candidates[0].DriftReason != "NodePoolDrifted" || c.Candidates[0].DriftedSince.IsZero() {
		t.Fatalf("candidate %+v, want drifted by the NodePool's hash", c.Candidates)
	}
	if got := commandNames(commands(t, Drift{}, c)); len(got) != 1 || got[0] != "replace:a+c5.large/spot" {
		t.Fatalf("commands %v, want a replacement", got)
	}
}

func cpu(s string) *resource.Quantity { q := resource.MustParse(s); return &q }
