package methods

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	k8spolicyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

func TestCandidates(t *testing.T) {
	daemon := func(p *corev1.Pod) { p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "agent"}} }
	for name, tc := range map[string]struct {
		w           world
		candidates  string // names, sorted
		blocked     string // name=substring of why
		podsOfFirst int
	}{
		"managed nodes are candidates; an unmanaged one is not": {w: world{nodes: []*corev1.Node{
			node("a", "m5.large", "on-demand", "z-a"), node("b", "m5.large", "on-demand", "z-a", func(n *corev1.Node) { delete(n.Labels, karpv1.NodePoolLabelKey) })}},
			candidates: "a"},
		"DaemonSet and finished pods do not count": {w: world{nodes: []*corev1.Node{node("a", "m5.large", "on-demand", "z-a")},
			pods: []*corev1.Pod{pod("ds", "a", "100m", "64Mi", daemon), pod("done", "a", "1", "1Gi", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }), pod("web", "a", "1", "1Gi")}},
			candidates: "a", podsOfFirst: 1},
		"a node with do-not-disrupt is blocked": {w: world{nodes: []*corev1.Node{node("a", "m5.large", "on-demand", "z-a", func(n *corev1.Node) {
			n.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}
		})}}, candidates: "a", blocked: "a=node has karpenter.sh/do-not-disrupt"},
		"a pod with do-not-disrupt blocks its node": {w: world{nodes: []*corev1.Node{node("a", "m5.large", "on-demand", "z-a")},
			pods: []*corev1.Pod{pod("ledger", "a", "1", "1Gi", func(p *corev1.Pod) { p.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"} })}},
			candidates: "a", blocked: "a=pod default/ledger has"},
		"a pod's do-not-disrupt duration still running blocks": {w: world{nodes: []*corev1.Node{node("a", "m5.large", "on-demand", "z-a")},
			pods: []*corev1.Pod{pod("warm", "a", "1", "1Gi", func(p *corev1.Pod) { p.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "2h"} })}},
			candidates: "a", blocked: "a=pod default/warm"},
		"a pod's do-not-disrupt duration passed does not": {w: world{nodes: []*corev1.Node{node("a", "m5.large", "on-demand", "z-a")},
			pods: []*corev1.Pod{pod("warm", "a", "1", "1Gi", func(p *corev1.Pod) { p.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "30m"} })}},
			candidates: "a"},
		"a PDB that allows no eviction blocks": {w: world{nodes: []*corev1.Node{node("a", "m5.large", "on-demand", "z-a")},
			pods: []*corev1.Pod{pod("db", "a", "1", "1Gi")}, pdbs: []*k8spolicyv1.PodDisruptionBudget{pdb("db", 1, "db")}},
			candidates: "a", blocked: "a=PodDisruptionBudget default/db"},
		"a PDB that allows the eviction does not": {w: world{nodes: []*corev1.Node{node("a", "m5.large", "on-demand", "z-a")},
			pods: []*corev1.Pod{pod("db", "a", "1", "1Gi")}, pdbs: []*k8spolicyv1.PodDisruptionBudget{pdb("db", 0, "db")}},
			candidates: "a"},
		"nodes being deleted or disrupted are not candidates": {w: world{nodes: []*corev1.Node{
			node("a", "m5.large", "on-demand", "z-a", func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{karpv1.DisruptedNoScheduleTaint} }),
			node("b", "m5.large", "on-demand", "z-a", func(n *corev1.Node) { ts := metav1.NewTime(now); n.DeletionTimestamp = &ts }),
			node("c", "m5.large", "on-demand", "z-a")}}, candidates: "c"},
		"a node the provisioner nominated pods to is blocked": {w: world{nodes: []*corev1.Node{node("a", "m5.large", "on-demand", "z-a")}, nominated: "a"},
			candidates: "a", blocked: "a=pods are nominated to it"},
		"a node of an unknown NodePool is not a candidate": {w: world{nodes: []*corev1.Node{node("a", "m5.large", "on-demand", "z-a", func(n *corev1.Node) {
			n.Labels[karpv1.NodePoolLabelKey] = "gone"
		})}}, candidates: "", blocked: "a=NodePool gone not found"},
	} {
		t.Run(name, func(t *testing.T) {
			c := tc.w.cluster()
			var got []string
			for _, cand := range c.Candidates {
				got = append(got, cand.Name())
			}
			if strings.Join(got, ",") != tc.candidates {
				t.Errorf("candidates %v, want %q", got, tc.candidates)
			}
			if tc.podsOfFirst > 0 && len(c.Candidates[0].Pods) != tc.podsOfFirst {
				t.Errorf("%d pods to reschedule, want %d", len(c.Candidates[0].Pods), tc.podsOfFirst)
			}
			var notes []string
			for _, u := range c.Unconsolidatable {
				notes = append(notes, u.Node+"="+u.Reason)
			}
			if tc.blocked == "" && len(notes) > 0 || tc.blocked != "" && (len(notes) != 1 || !strings.HasPrefix(notes[0], tc.blocked)) {
				t.Errorf("unconsolidatable %v, want %q", notes, tc.blocked)
			}
		})
	}
}

func TestMethods(t *testing.T) {
	whenEmpty := nodePool("default", func(np *karpv1.NodePool) {
		np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmpty
	})
	never := nodePool("default", func(np *karpv1.NodePool) {
		np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("Never")
	})
	noEmpty := nodePool("default", func(np *karpv1.NodePool) {
		np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "0", Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonEmpty}}, {Nodes: "100%"}}
	})
	oneEmpty := nodePool("default", func(np *karpv1.NodePool) {
		np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "1", Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonEmpty}}, {Nodes: "100%"}}
	})
	drifting := nodePool("default", func(np *karpv1.NodePool) { np.Spec.Template.Labels = map[string]string{"team": "b"} })
	driftedFor := func(d time.Duration) func(*karpv1.NodeClaim) {
		return func(nc *karpv1.NodeClaim) {
			nc.Status.Conditions = append(nc.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeDrifted, Status: metav1.ConditionTrue,
				Reason: "NodeClassDrift", LastTransitionTime: metav1.NewTime(now.Add(-d))})
		}
	}
	for name, tc := range map[string]struct {
		method Method
		w      world
		want   string // names(commands), joined by " | "
	}{
		"emptiness deletes the empty nodes of a pool in one command": {Emptiness{}, world{nodes: []*corev1.Node{
			node("a", "m5.large", "on-demand", "z-a"), node("b", "m5.large", "on-demand", "z-a"), node("c", "m5.large", "on-demand", "z-a")},
			pods: []*corev1.Pod{pod("web", "c", "1", "1Gi")}}, "delete:a,b"},
		"emptiness acts under WhenEmpty":             {Emptiness{}, world{pools: []*karpv1.NodePool{whenEmpty}, nodes: []*corev1.Node{node("a", "m5.large", "on-demand", "z-a")}}, "delete:a"},
		"emptiness waits out consolidateAfter Never": {Emptiness{}, world{pools: []*karpv1.NodePool{never}, nodes: []*corev1.Node{node("a", "m5.large", "on-demand", "z-a")}}, ""},
		// As upstream v1.15: an empty node's savings ratio is its price; by name it would be a.
		"emptiness deletes the most expensive empty node first within its budget": {Emptiness{}, world{pools: []*karpv1.NodePool{oneEmpty},
			nodes: []*corev1.Node{node("a", "m5.large", "on-demand", "z-a"), node("b", "m5.2xlarge", "on-demand", "z-a")}}, "delete:b"},
		"emptiness respects an Empty budget of 0":          {Emptiness{}, world{pools: []*karpv1.NodePool{noEmpty}, nodes: []*corev1.Node{node("a", "m5.large", "on-demand", "z-a")}}, ""},
		"drift replaces a node whose labels left its pool": {Drift{}, world{pools: []*karpv1.NodePool{drifting}, nodes: []*corev1.Node{node("a", "m5.xlarge", "on-demand", "z-a")}, pods: []*corev1.Pod{pod("web", "a", "1", "2Gi")}}, "replace:a+c5.large/spot"},
		"drift leaves nodes that match":                    {Drift{}, world{nodes: []*corev1.Node{node("a", "m5.xlarge", "on-demand", "z-a")}, pods: []*corev1.Pod{pod("web", "a", "1", "2Gi")}}, ""},
		"drift moves pods to a node with room that is up": {Drift{}, world{pools: []*karpv1.NodePool{drifting},
			nodes: []*corev1.Node{node("a", "m5.xlarge", "on-demand", "z-a"), node("u", "m5.xlarge", "on-demand", "z-a", unmanaged)}, pods: []*corev1.Pod{pod("web", "a", "1", "2Gi")}}, "delete:a"},
		"drift does not count on a node not Ready": {Drift{}, world{pools: []*karpv1.NodePool{drifting},
			nodes: []*corev1.Node{node("a", "m5.xlarge", "on-demand", "z-a"), node("u", "m5.xlarge", "on-demand", "z-a", unmanaged, notReady)}, pods: []*corev1.Pod{pod("web", "a", "1", "2Gi")}}, ""},
		// As upstream: the replacement a rolled-back command left, registered but never
		// initialized, does not take the pods of the node it was to replace.
		"drift does not count on a node not initialized": {Drift{}, world{pools: []*karpv1.NodePool{drifting},
			nodes:  []*corev1.Node{node("a", "m5.xlarge", "on-demand", "z-a"), node("b", "m5.xlarge", "on-demand", "z-a")},
			claims: []*karpv1.NodeClaim{claim("a"), claim("b", func(nc *karpv1.NodeClaim) { nc.Status.Conditions = nil })},
			pods:   []*corev1.Pod{pod("web", "a", "1", "2Gi")}}, ""},
		// As upstream: empty drifted nodes go the longest drifted first (by name it would be a).
		"drift deletes the longest drifted empty node first within its budget": {Drift{}, world{pools: []*karpv1.NodePool{nodePool("default", func(np *karpv1.NodePool) {
			np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "1"}}
		})}, nodes: []*corev1.Node{node("a", "m5.large", "on-demand", "z-a"), node("b", "m5.large", "on-demand", "z-a")},
			claims: []*karpv1.NodeClaim{claim("a", driftedFor(time.Hour)), claim("b", driftedFor(2*time.Hour))}}, "delete:b"},
		"drift deletes empty drifted nodes first": {Drift{}, world{pools: []*karpv1.NodePool{drifting}, nodes: []*corev1.Node{node("a", "m5.large", "on-demand", "z-a"), node("b", "m5.large", "on-demand", "z-a")}, pods: []*corev1.Pod{pod("web", "a", "1", "2Gi")}}, "delete:b"},
		"single-node deletes a node whose pods fit elsewhere": {&SingleNode{}, world{nodes: []*corev1.Node{node("a", "m5.xlarge", "on-demand", "z-a"), node("b", "m5.xlarge", "on-demand", "z-a")},
			pods: []*corev1.Pod{pod("web", "a", "1", "2Gi"), pod("api", "b", "2", "4Gi")}}, "delete:a"},
		// Either node's pod fits on the other; b costs twice a for the same disruption, so its
		// savings ratio is higher (cheapest to disrupt, then by name, would take a).
		"single-node tries the highest savings ratio first": {&SingleNode{}, world{nodes: []*corev1.Node{node("a", "m5.xlarge", "on-demand", "z-a"), node("b", "m5.2xlarge", "on-demand", "z-a")},
			pods: []*corev1.Pod{pod("web", "a", "1", "2Gi"), pod("api", "b", "1", "2Gi")}}, "delete:b"},
		"single-node replaces on-demand with cheaper Spot": {&SingleNode{}, world{nodes: []*corev1.Node{node("a", "m5.2xlarge", "on-demand", "z-a")},
			pods: []*corev1.Pod{pod("web", "a", "1", "2Gi")}}, "replace:a+c5.large/spot"},
		"single-node never replaces with the same type": {&SingleNode{}, world{pools: []*karpv1.NodePool{nodePool("default", func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, karpv1.NodeSelectorRequirementWithMinValues{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large"}})
		})}, nodes: []*corev1.Node{node("a", "m5.large", "on-demand", "z-a")}, pods: []*corev1.Pod{pod("web", "a", "1", "2Gi")}}, ""},
		"single-node replaces Spot only with cheaper on-demand without the feature gate": {&SingleNode{}, world{nodes: []*corev1.Node{node("a", "m5.2xlarge", "spot", "z-a")},
			pods: []*corev1.Pod{pod("web", "a", "1", "2Gi")}}, "replace:a+c5.large/on-demand"},
		"single-node leaves Spot alone when no on-demand is cheaper": {&SingleNode{}, world{nodes: []*corev1.Node{node("a", "m5.xlarge", "spot", "z-a")},
			pods: []*corev1.Pod{pod("web", "a", "1", "2Gi")}}, ""},
		"single-node replaces Spot with Spot only given 15 cheaper types": {&SingleNode{}, world{nodes: []*corev1.Node{node("a", "m5.4xlarge", "spot", "z-a")},
			pods: []*corev1.Pod{pod("web", "a", "1", "2Gi")}, opts: Options{SpotToSpotConsolidation: true}}, ""},
		"single-node needs the replacement to save the minimum": {&SingleNode{}, world{nodes: []*corev1.Node{node("a", "m5.xlarge", "spot", "z-a")},
			pods: []*corev1.Pod{pod("web", "a", "1", "2Gi")}, opts: Options{MinSavingsFraction: 0.9}}, ""},
		"single-node under WhenEmpty does nothing": {&SingleNode{}, world{pools: []*karpv1.NodePool{whenEmpty}, nodes: []*corev1.Node{node("a", "m5.xlarge", "on-demand", "z-a"), node("b", "m5.xlarge", "on-demand", "z-a")},
			pods: []*corev1.Pod{pod("web", "a", "1", "2Gi"), pod("api", "b", "2", "4Gi")}}, ""},
		"multi-node removes several nodes for one cheaper": {&MultiNode{}, world{nodes: []*corev1.Node{node("a", "m5.xlarge", "on-demand", "z-a"), node("b", "m5.xlarge", "on-demand", "z-a"), node("c", "m5.xlarge", "on-demand", "z-a")},
			pods: []*corev1.Pod{pod("w1", "a", "2", "4Gi"), pod("w2", "b", "2", "4Gi"), pod("w3", "c", "2", "4Gi")}}, "replace:a,b,c+m5.2xlarge/spot"},
		"multi-node leaves a single candidate to single-node": {&MultiNode{}, world{nodes: []*corev1.Node{node("a", "m5.xlarge", "on-demand", "z-a")},
			pods: []*corev1.Pod{pod("w1", "a", "1", "2Gi")}}, ""},
		"multi-node stays within the Underutilized budget": {&MultiNode{}, world{pools: []*karpv1.NodePool{nodePool("default", func(np *karpv1.NodePool) {
			np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "2"}}
		})}, nodes: []*corev1.Node{node("a", "m5.xlarge", "on-demand", "z-a"), node("b", "m5.xlarge", "on-demand", "z-a"), node("c", "m5.xlarge", "on-demand", "z-a")},
			pods: []*corev1.Pod{pod("w1", "a", "1", "2Gi"), pod("w2", "b", "1", "2Gi"), pod("w3", "c", "1", "2Gi")}}, "delete:a,b"},
		"multi-node respects a PDB across the command": {&MultiNode{}, world{nodes: []*corev1.Node{node("a", "m5.xlarge", "on-demand", "z-a"), node("b", "m5.xlarge", "on-demand", "z-a"), node("c", "m5.xlarge", "on-demand", "z-a")},
			pods: []*corev1.Pod{pod("w1", "a", "1", "2Gi", sameApp), pod("w2", "b", "1", "2Gi", sameApp), pod("w3", "c", "1", "2Gi", sameApp)}, pdbs: []*k8spolicyv1.PodDisruptionBudget{pdb("web", 3, "web")}}, ""},
		"multi-node goes ahead when each pod may be evicted now": {&MultiNode{}, world{nodes: []*corev1.Node{node("a", "m5.xlarge", "on-demand", "z-a"), node("b", "m5.xlarge", "on-demand", "z-a"), node("c", "m5.xlarge", "on-demand", "z-a")},
			pods: []*corev1.Pod{pod("w1", "a", "1", "2Gi", sameApp), pod("w2", "b", "1", "2Gi", sameApp), pod("w3", "c", "1", "2Gi", sameApp)}, pdbs: []*k8spolicyv1.PodDisruptionBudget{pdb("web", 2, "web")}}, "replace:a,b,c+m5.xlarge/spot"},
	} {
		t.Run(name, func(t *testing.T) {
			got := strings.Join(commandNames(commands(t, tc.method, tc.w.cluster())), " | ")
			if got != tc.want {
				t.Errorf("commands %q, want %q", got, tc.want)
			}
		})
	}
}

func sameApp(p *corev1.Pod) { p.Labels["app"] = "web" }

func unmanaged(n *corev1.Node) { delete(n.Labels, karpv1.NodePoolLabelKey) }

func notReady(n *corev1.Node) {
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}
}
