package solver

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/scheduling"
)

// Preferences are honoured when they can be and relaxed one at a time when they cannot, in
// upstream's order: preferred pod affinity, preferred pod anti-affinity, preferred node
// affinity, ScheduleAnyway spreads, then PreferNoSchedule taints. A preference never stops a
// pod from being placed.

// preferTerm adds a preferred pod affinity (near) or anti-affinity term for pods labelled
// app=<app> on key.
func preferTerm(near bool, key, app string, weight int32) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		if p.Spec.Affinity == nil {
			p.Spec.Affinity = &corev1.Affinity{}
		}
		term := corev1.WeightedPodAffinityTerm{Weight: weight, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: key,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}
		a := p.Spec.Affinity
		if near {
			if a.PodAffinity == nil {
				a.PodAffinity = &corev1.PodAffinity{}
			}
			a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution, term)
			return
		}
		if a.PodAntiAffinity == nil {
			a.PodAntiAffinity = &corev1.PodAntiAffinity{}
		}
		a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution, term)
	}
}

func preferAffinity(key, app string, weight int32) func(*corev1.Pod) {
	return preferTerm(true, key, app, weight)
}

func preferApart(key, app string, weight int32) func(*corev1.Pod) {
	return preferTerm(false, key, app, weight)
}

func TestPreferencesHonouredWhenTheyCanBe(t *testing.T) {
	t.Run("preferred zone affinity to a running pod", func(t *testing.T) {
		db := node("db", "z-c", "1", "1Gi", func(n *scheduling.Node) { n.Pods = []*corev1.Pod{pod("db-0", "900m", "900Mi", labelled("db"))} })
		r := solve(t, &Input{Pods: pods("api", 3, "500m", "512Mi", labelled("api"), preferAffinity(karpv1.LabelTopologyZone, "db", 50)), NodePools: pools(nodePool("default")),
			Nodes: []*scheduling.Node{db}})
		expectPlaced(t, r)
		for _, c := range r.NodeClaims {
			if z := label(c, karpv1.LabelTopologyZone); z != "z-c" {
				t.Fatalf("an api pod in %s, want z-c beside the db", z)
			}
		}
	})
	t.Run("preferred hostname anti-affinity spreads over nodes", func(t *testing.T) {
		r := solve(t, &Input{Pods: pods("web", 3, "500m", "512Mi", labelled("web"), preferApart(corev1.LabelHostname, "web", 50)), NodePools: pools(nodePool("default"))})
		expectPlaced(t, r)
		if len(r.NodeClaims) != 3 {
			t.Fatalf("%d NodeClaims, want one per pod", len(r.NodeClaims))
		}
	})
	t.Run("preferred zone anti-affinity over three zones", func(t *testing.T) {
		r := solve(t, &Input{Pods: pods("web", 3, "500m", "512Mi", labelled("web"), preferApart(karpv1.LabelTopologyZone, "web", 50)), NodePools: pools(nodePool("default"))})
		expectPlaced(t, r)
		if got := counts(podsPer(r, nil, karpv1.LabelTopologyZone)); fmt.Sprint(got) != "[1 1 1]" {
			t.Fatalf("pods per zone %v, want one in each", got)
		}
	})
	t.Run("a ScheduleAnyway spread that can be kept is kept", func(t *testing.T) {
		s := spreadSpec{key: karpv1.LabelTopologyZone, skew: 1, anyway: true}
		r := solve(t, &Input{Pods: pods("web", 6, "500m", "512Mi", labelled("web"), s.apply), NodePools: pools(nodePool("default"))})
		expectPlaced(t, r)
		if got := counts(podsPer(r, nil, karpv1.LabelTopologyZone)); fmt.Sprint(got) != "[2 2 2]" {
			t.Fatalf("pods per zone %v, want two in each", got)
		}
	})
}

func TestPreferencesRelaxedWhenTheyCannotBe(t *testing.T) {
	t.Run("zone anti-affinity with more pods than zones", func(t *testing.T) {
		r := solve(t, &Input{Pods: pods("web", 5, "500m", "512Mi", labelled("web"), preferApart(karpv1.LabelTopologyZone, "web", 50)), NodePools: pools(nodePool("default"))})
		expectPlaced(t, r)
		if got := podsPer(r, nil, karpv1.LabelTopologyZone); len(got) != 3 {
			t.Fatalf("pods per zone %v: the first three still go one per zone", got)
		}
	})
	t.Run("affinity to nothing", func(t *testing.T) {
		r := solve(t, &Input{Pods: pods("api", 2, "500m", "512Mi", labelled("api"), preferAffinity(karpv1.LabelTopologyZone, "nothing", 10)), NodePools: pools(nodePool("default"))})
		expectPlaced(t, r)
	})
	t.Run("a ScheduleAnyway spread in one zone", func(t *testing.T) {
		s := spreadSpec{key: karpv1.LabelTopologyZone, skew: 1, anyway: true}
		np := nodePool("default", withRequirements(requirement(karpv1.LabelTopologyZone, corev1.NodeSelectorOpIn, "z-a")))
		nodes := []*scheduling.Node{nodeWithApp("nb", "z-b", "web", 2)}
		r := solve(t, &Input{Pods: pods("web", 4, "500m", "512Mi", labelled("web"), s.apply), NodePools: pools(np), Nodes: nodes})
		expectPlaced(t, r)
	})
	t.Run("a PreferNoSchedule pool when no other", func(t *testing.T) {
		r := solve(t, &Input{Pods: pods("w", 2, "500m", "512Mi"), NodePools: pools(nodePool("soft", tainted("spot", "", corev1.TaintEffectPreferNoSchedule)))})
		expectPlaced(t, r)
	})
	t.Run("every kind at once", func(t *testing.T) {
		s := spreadSpec{key: karpv1.LabelHostname, skew: 1, anyway: true}
		ps := pods("w", 4, "500m", "512Mi", labelled("w"), preferAffinity(karpv1.LabelTopologyZone, "nothing", 10), preferApart(karpv1.LabelTopologyZone, "w", 10),
			prefer(karpv1.LabelInstanceFamily, "x9"), s.apply)
		r := solve(t, &Input{Pods: ps, NodePools: pools(nodePool("soft", tainted("spot", "", corev1.TaintEffectPreferNoSchedule)))})
		expectPlaced(t, r)
	})
}

// The lighter preferences are relaxed before the heavier: with two anti-affinity
// preferences, the one kept is the heavier.
func TestHeavierPreferencesLast(t *testing.T) {
	// Four pods; zones hold at most three apart (zone anti-affinity, light) while hostname
	// anti-affinity (heavy) can always be kept: every pod on its own node.
	ps := pods("web", 4, "500m", "512Mi", labelled("web"), preferApart(karpv1.LabelTopologyZone, "web", 1), preferApart(corev1.LabelHostname, "web", 100))
	r := solve(t, &Input{Pods: ps, NodePools: pools(nodePool("default"))})
	expectPlaced(t, r)
	if len(r.NodeClaims) != 4 {
		t.Fatalf("%d NodeClaims, want 4: the heavy hostname preference holds for every pod", len(r.NodeClaims))
	}
}

// Preferences do not change what a required constraint refuses.
func TestPreferencesDoNotWidenRequirements(t *testing.T) {
	ps := pods("w", 2, "500m", "512Mi", selector(karpv1.LabelTopologyZone, "z-a"), prefer(karpv1.LabelTopologyZone, "z-b"))
	r := solve(t, &Input{Pods: ps, NodePools: pools(nodePool("default"))})
	expectPlaced(t, r)
	for _, c := range r.NodeClaims {
		if z := label(c, karpv1.LabelTopologyZone); z != "z-a" {
			t.Fatalf("zone %s, the pods require z-a", z)
		}
	}
}

// Whatever order a pod lists its preferred terms in, the lightest is relaxed first.
func TestLightestPreferenceRelaxedFirstInAnyOrder(t *testing.T) {
	for name, mods := range map[string][]func(*corev1.Pod){
		"heavy listed first": {preferApart(corev1.LabelHostname, "web", 100), preferApart(karpv1.LabelTopologyZone, "web", 1)},
		"light listed first": {preferApart(karpv1.LabelTopologyZone, "web", 1), preferApart(corev1.LabelHostname, "web", 100)},
	} {
		t.Run(name, func(t *testing.T) {
			r := solve(t, &Input{Pods: pods("web", 4, "500m", "512Mi", append([]func(*corev1.Pod){labelled("web")}, mods...)...), NodePools: pools(nodePool("default"))})
			expectPlaced(t, r)
			if len(r.NodeClaims) != 4 {
				t.Fatalf("%d NodeClaims, want 4: the heavy hostname preference holds", len(r.NodeClaims))
			}
		})
	}
}
