package solver

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	autoscalingv1beta1 "github.com/karpenter-policy/karpenter/api/autoscaling/v1beta1"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/scheduling"
)

// EffectiveZones reports upstream's effective zone of each pending pod: the zone its
// requirements, volumes and required topology constraints leave (the cases of upstream's
// scheduling suite, "should report zone of pods correctly" and "... for volume constraints").
func TestEffectiveZones(t *testing.T) {
	zoned := func(z string) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{karpv1.LabelTopologyZone: z} }
	}
	web := func(p *corev1.Pod) { p.Labels["app"] = "web" }
	// existing puts one pod per given zone on a node there, labelled app=web.
	existing := func(zs ...string) []*scheduling.Node {
		var out []*scheduling.Node
		for _, z := range zs {
			out = append(out, node("n-"+z+"-"+string(rune('0'+len(out))), z, "8", "8Gi", func(n *scheduling.Node) {
				n.Pods = []*corev1.Pod{pod("existing-"+z, "100m", "128Mi", web)}
			}))
		}
		return out
	}
	volumeIn := func(p *corev1.Pod, zs ...string) map[string][]corev1.NodeSelectorRequirement {
		return map[string][]corev1.NodeSelectorRequirement{PodKey(p): {{Key: karpv1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: zs}}}
	}
	preferredZone := func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
			Weight: 1, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: karpv1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"z-a"}}}}}}}}
	}
	twoTerms := func(a, b string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			term := func(z string) corev1.NodeSelectorTerm {
				return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: karpv1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{z}}}}
			}
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{term(a), term(b)}}}}
		}
	}
	flexPod, onePod, nonePod := pod("v-0", "1", "1Gi"), pod("v-1", "1", "1Gi"), pod("v-2", "1", "1Gi", zoned("z-a"))
	virtual := pod("buffer-0", "1", "1Gi")
	virtual.Annotations = map[string]string{autoscalingv1beta1.VirtualPodAnnotation: "true"}

	for _, tc := range []struct {
		name  string
		in    *Input
		wants map[string]int
	}{
		{"no zone constraint", &Input{Pods: pods("p", 2, "1", "1Gi")}, map[string]int{ZoneFlexible: 2}},
		{"a zone selector", &Input{Pods: pods("p", 3, "1", "1Gi", zoned("z-b"))}, map[string]int{"z-b": 3}},
		{"different zone selectors", &Input{Pods: []*corev1.Pod{pod("a", "1", "1Gi", zoned("z-a")), pod("b", "1", "1Gi", zoned("z-b"))}}, map[string]int{"z-a": 1, "z-b": 1}},
		{"a preferred zone only", &Input{Pods: []*corev1.Pod{pod("a", "1", "1Gi", preferredZone)}}, map[string]int{ZoneFlexible: 1}},
		{"volumes in two zones", &Input{Pods: []*corev1.Pod{flexPod}, VolumeRequirements: volumeIn(flexPod, "z-a", "z-b")}, map[string]int{ZoneFlexible: 1}},
		{"a volume in one zone", &Input{Pods: []*corev1.Pod{onePod}, VolumeRequirements: volumeIn(onePod, "z-a")}, map[string]int{"z-a": 1}},
		{"a volume in another zone than the selector", &Input{Pods: []*corev1.Pod{nonePod}, VolumeRequirements: volumeIn(nonePod, "z-b")}, map[string]int{ZoneNone: 1}},
		{"required zone affinity to a placed pod", &Input{Pods: pods("p", 1, "1", "1Gi", podAffinity(karpv1.LabelTopologyZone, map[string]string{"app": "web"})), Nodes: existing("z-a")},
			map[string]int{"z-a": 1}},
		{"required zone anti-affinity to pods in two of three zones", &Input{Pods: pods("p", 1, "1", "1Gi", web, podAntiAffinity(karpv1.LabelTopologyZone)), Nodes: existing("z-a", "z-b")},
			map[string]int{"z-c": 1}},
		{"a spread that only the third zone keeps", &Input{Pods: pods("web", 1, "1", "1Gi", spreadOn(karpv1.LabelTopologyZone, 1)), Nodes: existing("z-a", "z-b")},
			map[string]int{"z-c": 1}},
		// Its own zone holds the fewest of the zones its node affinity allows, so kube-scheduler
		// would place it there: z-a.
		{"a spread its node affinity narrows", &Input{Pods: pods("web", 1, "1", "1Gi", zoned("z-a"), spreadOn(karpv1.LabelTopologyZone, 1)), Nodes: existing("z-a", "z-a", "z-b")},
			map[string]int{"z-a": 1}},
		// Counting every zone (nodeAffinityPolicy Ignore), z-c has none: z-a is 2 over.
		{"a spread no zone keeps", &Input{Pods: pods("web", 1, "1", "1Gi", zoned("z-a"), spreadOn(karpv1.LabelTopologyZone, 1), func(p *corev1.Pod) {
			p.Spec.TopologySpreadConstraints[0].NodeAffinityPolicy = ptr.To(corev1.NodeInclusionPolicyIgnore)
		}), Nodes: existing("z-a", "z-a", "z-b")}, map[string]int{ZoneNone: 1}},
		{"two node affinity terms, one zone each", &Input{Pods: pods("p", 1, "1", "1Gi", twoTerms("z-a", "z-b"))}, map[string]int{ZoneFlexible: 1}},
		{"two node affinity terms, the same zone", &Input{Pods: pods("p", 1, "1", "1Gi", twoTerms("z-c", "z-c"))}, map[string]int{"z-c": 1}},
		{"a CapacityBuffer's virtual pod is not counted", &Input{Pods: []*corev1.Pod{virtual, pod("p", "1", "1Gi")}}, map[string]int{ZoneFlexible: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.NodePools = pools(nodePool("default"))
			tc.in.NodePools[0].InstanceTypes = testCatalog()
			got, err := EffectiveZones(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.wants) {
				t.Fatalf("got %v, want %v", got, tc.wants)
			}
		})
	}
}

// The effective zone of pods whose zone their NodePools decide: a pool in one zone makes
// every pod it alone can serve that zone's; two pools in different zones leave it flexible.
func TestEffectiveZonesByNodePool(t *testing.T) {
	inZone := func(name, zone string) *NodePool {
		return &NodePool{NodePool: nodePool(name, withRequirements(requirement(karpv1.LabelTopologyZone, corev1.NodeSelectorOpIn, zone))), InstanceTypes: testCatalog()}
	}
	for _, tc := range []struct {
		name  string
		pools []*NodePool
		pod   *corev1.Pod
		want  map[string]int
	}{
		{"no pool constraint", []*NodePool{{NodePool: nodePool("a"), InstanceTypes: testCatalog()}}, pod("p", "1", "1Gi"), map[string]int{ZoneFlexible: 1}},
		{"a required zone the pools allow", []*NodePool{inZone("a", "z-a"), inZone("b", "z-b")}, pod("p", "1", "1Gi", selector(karpv1.LabelTopologyZone, "z-b")), map[string]int{"z-b": 1}},
		{"a preferred zone is no zone", []*NodePool{inZone("a", "z-a")}, pod("p", "1", "1Gi", prefer(karpv1.LabelTopologyZone, "z-c")), map[string]int{ZoneFlexible: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := EffectiveZones(&Input{Pods: []*corev1.Pod{tc.pod}, NodePools: tc.pools})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("effective zones %v, want %v", got, tc.want)
			}
		})
	}
}

// Effective zones of a batch of several kinds of pods at once, as the metric sums them.
func TestEffectiveZonesOfABatch(t *testing.T) {
	zoned := func(z string) func(*corev1.Pod) { return selector(karpv1.LabelTopologyZone, z) }
	ps := append(pods("a", 3, "1", "1Gi", zoned("z-a")), pods("b", 2, "1", "1Gi", zoned("z-b"))...)
	ps = append(ps, pods("free", 4, "1", "1Gi")...)
	ps = append(ps, pod("nowhere", "1", "1Gi", zoned("z-a"), requireAll(expr(karpv1.LabelTopologyZone, corev1.NodeSelectorOpNotIn, "z-a"))))
	got, err := EffectiveZones(&Input{Pods: ps, NodePools: pools(nodePool("default"))})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"z-a": 3, "z-b": 2, ZoneFlexible: 4, ZoneNone: 1}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("effective zones %v, want %v", got, want)
	}
	total := 0
	for _, n := range got {
		total += n
	}
	if total != len(ps) {
		t.Fatalf("%d pods counted of %d", total, len(ps))
	}
}
