package methods

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	k8spolicyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

// Every reason a pass leaves a node alone is noted for it (the Unconsolidatable event and
// karpenterctl simulate --disrupt's report), in words a platform engineer can act on.
func TestUnconsolidatableNotes(t *testing.T) {
	recent := func(nc *karpv1.NodeClaim) { nc.Status.LastPodEventTime = metav1.NewTime(now.Add(-time.Minute)) }
	for name, tc := range map[string]struct {
		w    world
		node string
		want string
	}{
		"do-not-disrupt on the node": {w: world{nodes: nodesOf(2, "m5.xlarge", "on-demand", annotated(karpv1.DoNotDisruptAnnotationKey, "true")),
			pods: []*corev1.Pod{pod("w1", "a", "1", "2Gi"), pod("w2", "b", "1", "2Gi")}}, node: "a", want: "node has karpenter.sh/do-not-disrupt"},
		"do-not-disrupt on a pod": {w: world{nodes: nodesOf(1, "m5.xlarge", "on-demand"),
			pods: []*corev1.Pod{pod("w1", "a", "1", "2Gi", podAnnotated(karpv1.DoNotDisruptAnnotationKey, "true"))}}, node: "a", want: "pod default/w1 has karpenter.sh/do-not-disrupt"},
		"a PDB": {w: world{nodes: nodesOf(1, "m5.xlarge", "on-demand"), pods: []*corev1.Pod{pod("db", "a", "1", "2Gi")},
			pdbs: []*k8spolicyv1.PodDisruptionBudget{pdb("db", 1, "db")}}, node: "a", want: "PodDisruptionBudget default/db"},
		"pods nominated to it": {w: world{nodes: nodesOf(1, "m5.xlarge", "on-demand"), pods: []*corev1.Pod{pod("w", "a", "1", "2Gi")}, nominated: "a"},
			node: "a", want: "nominated"},
		// Not a refusal, and no note (an event each pass for every young node would be noise,
		// as upstream's consolidatable condition is no event): the pass comes back at its end.
		"consolidateAfter not passed": {w: world{pools: pool(consolidateAfter("10m")), nodes: nodesOf(1, "m5.xlarge", "on-demand"),
			pods: []*corev1.Pod{pod("w", "a", "1", "2Gi")}, claims: claimsFor("a", recent)}, node: "a", want: "-"},
		"a budget of zero": {w: world{pools: pool(withBudgets(budget("0"))), nodes: nodesOf(1, "m5.xlarge", "on-demand"),
			pods: []*corev1.Pod{pod("w", "a", "1", "2Gi")}}, node: "a", want: "budget"},
		"no cheaper replacement": {w: world{pools: pool(onDemandOnly), nodes: nodesOf(1, "c5.large", "on-demand"),
			pods: []*corev1.Pod{pod("w", "a", "1500m", "3Gi")}}, node: "a", want: ""},
	} {
		t.Run(name, func(t *testing.T) {
			c := tc.w.cluster()
			if _, _, err := Pass(context.Background(), c, Methods()); err != nil {
				t.Fatal(err)
			}
			var notes []string
			for _, u := range c.Unconsolidatable {
				if u.Node == tc.node {
					notes = append(notes, u.Reason)
				}
			}
			if tc.want == "-" {
				if len(notes) > 0 {
					t.Fatalf("notes %q, want none", notes)
				}
				if next := c.NextChange(); next.IsZero() {
					t.Fatal("no next change: the pass would not come back")
				}
				return
			}
			if len(notes) == 0 {
				t.Fatalf("no note for %s (notes: %+v)", tc.node, c.Unconsolidatable)
			}
			if tc.want != "" && !strings.Contains(strings.Join(notes, " / "), tc.want) {
				t.Fatalf("notes %q, want one saying %q", notes, tc.want)
			}
			// One note per node per pass.
			if len(notes) > 1 {
				t.Fatalf("%d notes for %s: %q", len(notes), tc.node, notes)
			}
		})
	}
}

// A pass that acts notes nothing for the nodes it acts on.
func TestNoNoteForActedOnNodes(t *testing.T) {
	w := world{pools: pool(onDemandOnly), nodes: nodesOf(2, "m5.xlarge", "on-demand"),
		pods: []*corev1.Pod{pod("w1", "a", "1", "2Gi"), pod("w2", "b", "1", "2Gi")}}
	c := w.cluster()
	cmds, _, err := Pass(context.Background(), c, Methods())
	if err != nil || len(cmds) == 0 {
		t.Fatalf("commands %v (%v)", commandNames(cmds), err)
	}
	acted := map[string]bool{}
	for _, cmd := range cmds {
		for _, cand := range cmd.Candidates {
			acted[cand.Name()] = true
		}
	}
	for _, u := range c.Unconsolidatable {
		if acted[u.Node] {
			t.Errorf("a note %q for %s, which the pass acts on", u.Reason, u.Node)
		}
	}
}

// The notes of a snapshot (blocked candidates) survive Apply for the nodes that stay.
func TestNotesSurviveApply(t *testing.T) {
	w := world{pools: pool(onDemandOnly), nodes: nodesOf(3, "m5.xlarge", "on-demand"),
		pods: []*corev1.Pod{pod("w1", "a", "1", "2Gi"), pod("w2", "b", "1", "2Gi"), pod("w3", "c", "1", "2Gi", podAnnotated(karpv1.DoNotDisruptAnnotationKey, "true"))}}
	c := w.cluster()
	cmds, _, err := Pass(context.Background(), c, Methods())
	if err != nil || len(cmds) == 0 {
		t.Fatalf("commands %v (%v)", commandNames(cmds), err)
	}
	next := c.Apply(cmds[0])
	found := false
	for _, u := range next.Unconsolidatable {
		found = found || (u.Node == "c" && strings.Contains(u.Reason, "do-not-disrupt"))
	}
	if !found {
		t.Fatalf("c's do-not-disrupt note is gone after Apply: %+v", next.Unconsolidatable)
	}
}
