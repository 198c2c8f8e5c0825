package methods

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	k8spolicyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
)

// The cases of upstream's disruption suites (emptiness, drift, consolidation, budgets,
// do-not-disrupt, PodDisruptionBudgets, multi-node, Spot-to-Spot), written against these
// methods. Each table row is one cluster and what one method (or a whole pass) decides.

func withBudgets(budgets ...karpv1.Budget) func(*karpv1.NodePool) {
	return func(np *karpv1.NodePool) { np.Spec.Disruption.Budgets = budgets }
}

func budget(nodes string, reasons ...karpv1.DisruptionReason) karpv1.Budget {
	return karpv1.Budget{Nodes: nodes, Reasons: reasons}
}

func consolidateAfter(d string) func(*karpv1.NodePool) {
	return func(np *karpv1.NodePool) { np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration(d) }
}

func whenEmpty(np *karpv1.NodePool) {
	np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmpty
}

// pool is nodePool("default") with mutations.
func pool(mut ...func(*karpv1.NodePool)) []*karpv1.NodePool {
	return []*karpv1.NodePool{nodePool("default", mut...)}
}

// nodes of one type, capacity type and zone, named a, b, c...
func nodesOf(n int, itype, ct string, mut ...func(*corev1.Node)) []*corev1.Node {
	var out []*corev1.Node
	for i := range n {
		out = append(out, node(string(rune('a'+i)), itype, ct, "z-a", mut...))
	}
	return out
}

func inPool(name string) func(*corev1.Node) {
	return func(n *corev1.Node) { n.Labels[karpv1.NodePoolLabelKey] = name }
}

func annotated(kv ...string) func(*corev1.Node) {
	return func(n *corev1.Node) {
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			n.Annotations[kv[i]] = kv[i+1]
		}
	}
}

func podAnnotated(kv ...string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Annotations[kv[i]] = kv[i+1]
		}
	}
}

func daemonSetPod(p *corev1.Pod) {
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", Controller: ptr.To(true)}}
}

func appLabel(app string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Labels["app"] = app }
}

func drifted(since time.Duration) func(*karpv1.NodeClaim) {
	return func(nc *karpv1.NodeClaim) {
		nc.Status.Conditions = append(nc.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeDrifted, Status: metav1.ConditionTrue,
			Reason: "RequirementsDrifted", LastTransitionTime: metav1.NewTime(now.Add(-since))})
	}
}

// claimsFor are initialized NodeClaims for the named nodes, each mutated.
func claimsFor(names string, mut ...func(*karpv1.NodeClaim)) []*karpv1.NodeClaim {
	var out []*karpv1.NodeClaim
	for _, n := range strings.Split(names, ",") {
		out = append(out, claim(n, mut...))
	}
	return out
}

type methodCase struct {
	method Method
	w      world
	want   string // commandNames joined by " | "
}

func runMethodCases(t *testing.T, cases map[string]methodCase) {
	t.Helper()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := strings.Join(commandNames(commands(t, tc.method, tc.w.cluster())), " | ")
			if got != tc.want {
				t.Errorf("commands %q, want %q", got, tc.want)
			}
		})
	}
}

func TestEmptinessCases(t *testing.T) {
	runMethodCases(t, map[string]methodCase{
		"an empty node goes": {Emptiness{}, world{nodes: nodesOf(1, "m5.large", "on-demand")}, "delete:a"},
		"a node with a pod stays": {Emptiness{}, world{nodes: nodesOf(1, "m5.large", "on-demand"),
			pods: []*corev1.Pod{pod("web", "a", "1", "1Gi")}}, ""},
		"a node with only DaemonSet pods is empty": {Emptiness{}, world{nodes: nodesOf(1, "m5.large", "on-demand"),
			pods: []*corev1.Pod{pod("agent", "a", "100m", "64Mi", daemonSetPod)}}, "delete:a"},
		"a node with only finished pods is empty": {Emptiness{}, world{nodes: nodesOf(1, "m5.large", "on-demand"),
			pods: []*corev1.Pod{pod("job", "a", "1", "1Gi", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded })}}, "delete:a"},
		"a node with a failed pod is empty": {Emptiness{}, world{nodes: nodesOf(1, "m5.large", "on-demand"),
			pods: []*corev1.Pod{pod("job", "a", "1", "1Gi", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed })}}, "delete:a"},
		"every empty node of a pool in one command": {Emptiness{}, world{nodes: nodesOf(4, "m5.large", "on-demand")}, "delete:a,b,c,d"},
		"a budget of 2 takes two": {Emptiness{}, world{pools: pool(withBudgets(budget("2"))), nodes: nodesOf(4, "m5.large", "on-demand")},
			"delete:a,b"},
		"a budget of 50% of 4 takes two": {Emptiness{}, world{pools: pool(withBudgets(budget("50%"))), nodes: nodesOf(4, "m5.large", "on-demand")},
			"delete:a,b"},
		"a budget of 0 takes none": {Emptiness{}, world{pools: pool(withBudgets(budget("0"))), nodes: nodesOf(2, "m5.large", "on-demand")}, ""},
		"a budget of 0 for Empty only takes none": {Emptiness{}, world{pools: pool(withBudgets(budget("0", karpv1.DisruptionReasonEmpty), budget("100%"))),
			nodes: nodesOf(2, "m5.large", "on-demand")}, ""},
		"a budget of 0 for Drifted does not stop emptiness": {Emptiness{}, world{pools: pool(withBudgets(budget("0", karpv1.DisruptionReasonDrifted), budget("100%"))),
			nodes: nodesOf(2, "m5.large", "on-demand")}, "delete:a,b"},
		"a budget counts the nodes already disrupting": {Emptiness{}, world{pools: pool(withBudgets(budget("2"))),
			nodes: append(nodesOf(3, "m5.large", "on-demand"), node("x", "m5.large", "on-demand", "z-a", func(n *corev1.Node) {
				n.Spec.Taints = []corev1.Taint{karpv1.DisruptedNoScheduleTaint}
			}))}, "delete:a"},
		"a node with do-not-disrupt stays": {Emptiness{}, world{nodes: nodesOf(1, "m5.large", "on-demand", annotated(karpv1.DoNotDisruptAnnotationKey, "true"))}, ""},
		"an unmanaged node stays":          {Emptiness{}, world{nodes: nodesOf(1, "m5.large", "on-demand", unmanaged)}, ""},
		"a node consolidateAfter has not passed for stays": {Emptiness{}, world{pools: pool(consolidateAfter("1h")),
			nodes: nodesOf(1, "m5.large", "on-demand", func(n *corev1.Node) { n.CreationTimestamp = metav1.NewTime(now.Add(-time.Minute)) }),
			claims: claimsFor("a", func(nc *karpv1.NodeClaim) {
				nc.CreationTimestamp = metav1.NewTime(now.Add(-time.Minute))
				nc.Status.LastPodEventTime = metav1.NewTime(now.Add(-time.Minute))
			})}, ""},
		"a node consolidateAfter has passed for goes": {Emptiness{}, world{pools: pool(consolidateAfter("1h")),
			nodes:  nodesOf(1, "m5.large", "on-demand"),
			claims: claimsFor("a", func(nc *karpv1.NodeClaim) { nc.Status.LastPodEventTime = metav1.NewTime(now.Add(-2 * time.Hour)) })}, "delete:a"},
		"consolidateAfter Never keeps empty nodes": {Emptiness{}, world{pools: pool(consolidateAfter("Never")), nodes: nodesOf(2, "m5.large", "on-demand")}, ""},
		"WhenEmpty still removes empty nodes":      {Emptiness{}, world{pools: pool(whenEmpty), nodes: nodesOf(1, "m5.large", "on-demand")}, "delete:a"},
		"a node not initialized stays": {Emptiness{}, world{nodes: nodesOf(1, "m5.large", "on-demand"),
			claims: claimsFor("a", func(nc *karpv1.NodeClaim) { nc.Status.Conditions = nil })}, ""},
		"a node pods are nominated to stays": {Emptiness{}, world{nodes: nodesOf(1, "m5.large", "on-demand"), nominated: "a"}, ""},
		"two pools: one command each": {Emptiness{}, world{pools: []*karpv1.NodePool{nodePool("default"), nodePool("batch")},
			nodes: []*corev1.Node{node("a", "m5.large", "on-demand", "z-a"), node("b", "m5.large", "on-demand", "z-a", inPool("batch"))}},
			"delete:b | delete:a"},
		"two pools: each its own budget": {Emptiness{}, world{pools: []*karpv1.NodePool{nodePool("default", withBudgets(budget("0"))), nodePool("batch")},
			nodes: []*corev1.Node{node("a", "m5.large", "on-demand", "z-a"), node("b", "m5.large", "on-demand", "z-a", inPool("batch"))}},
			"delete:b"},
		"Spot empty nodes go too": {Emptiness{}, world{nodes: nodesOf(2, "m5.large", "spot")}, "delete:a,b"},
	})
}

func TestDriftCases(t *testing.T) {
	relabelled := func(np *karpv1.NodePool) { np.Spec.Template.Labels = map[string]string{"team": "b"} }
	runMethodCases(t, map[string]methodCase{
		"a drifted NodeClaim with pods is replaced": {Drift{}, world{nodes: nodesOf(1, "m5.xlarge", "on-demand"),
			claims: claimsFor("a", drifted(time.Hour)), pods: []*corev1.Pod{pod("web", "a", "1", "2Gi")}}, "replace:a+c5.large/spot"},
		"a drifted empty NodeClaim is deleted": {Drift{}, world{nodes: nodesOf(1, "m5.xlarge", "on-demand"),
			claims: claimsFor("a", drifted(time.Hour))}, "delete:a"},
		"a NodeClaim not drifted stays": {Drift{}, world{nodes: nodesOf(1, "m5.xlarge", "on-demand"),
			pods: []*corev1.Pod{pod("web", "a", "1", "2Gi")}}, ""},
		"a drift budget of 0 holds it": {Drift{}, world{pools: pool(withBudgets(budget("0", karpv1.DisruptionReasonDrifted), budget("100%"))),
			nodes: nodesOf(1, "m5.xlarge", "on-demand"), claims: claimsFor("a", drifted(time.Hour)), pods: []*corev1.Pod{pod("web", "a", "1", "2Gi")}}, ""},
		"an Underutilized budget of 0 does not hold drift": {Drift{}, world{pools: pool(withBudgets(budget("0", karpv1.DisruptionReasonUnderutilized), budget("100%"))),
			nodes: nodesOf(1, "m5.xlarge", "on-demand"), claims: claimsFor("a", drifted(time.Hour)), pods: []*corev1.Pod{pod("web", "a", "1", "2Gi")}}, "replace:a+c5.large/spot"},
		"drift replaces one node at a time under a budget of 1": {Drift{}, world{pools: pool(withBudgets(budget("1"))),
			nodes: nodesOf(3, "m5.xlarge", "on-demand"), claims: claimsFor("a,b,c", drifted(time.Hour)),
			pods: []*corev1.Pod{pod("w1", "a", "3", "6Gi"), pod("w2", "b", "3", "6Gi"), pod("w3", "c", "3", "6Gi")}}, "replace:a+m5.xlarge/spot"},
		"a pod with do-not-disrupt holds drift": {Drift{}, world{nodes: nodesOf(1, "m5.xlarge", "on-demand"), claims: claimsFor("a", drifted(time.Hour)),
			pods: []*corev1.Pod{pod("ledger", "a", "1", "2Gi", podAnnotated(karpv1.DoNotDisruptAnnotationKey, "true"))}}, ""},
		"a node with do-not-disrupt holds drift": {Drift{}, world{nodes: nodesOf(1, "m5.xlarge", "on-demand", annotated(karpv1.DoNotDisruptAnnotationKey, "true")),
			claims: claimsFor("a", drifted(time.Hour)), pods: []*corev1.Pod{pod("web", "a", "1", "2Gi")}}, ""},
		"a PDB that allows nothing holds drift": {Drift{}, world{nodes: nodesOf(1, "m5.xlarge", "on-demand"), claims: claimsFor("a", drifted(time.Hour)),
			pods: []*corev1.Pod{pod("db", "a", "1", "2Gi")}, pdbs: []*k8spolicyv1.PodDisruptionBudget{pdb("db", 1, "db")}}, ""},
		"the template changed: drifted without a condition": {Drift{}, world{pools: pool(relabelled), nodes: nodesOf(1, "m5.xlarge", "on-demand"),
			pods: []*corev1.Pod{pod("web", "a", "1", "2Gi")}}, "replace:a+c5.large/spot"},
		"a replacement that takes the pods a pool refuses is not launched": {Drift{}, world{pools: pool(relabelled, withRequirementsNP(karpv1.NodeSelectorRequirementWithMinValues{
			Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large"}})),
			nodes: nodesOf(1, "m5.2xlarge", "on-demand"), pods: []*corev1.Pod{pod("big", "a", "6", "12Gi")}}, ""},
		"drifted nodes go longest drifted first": {Drift{}, world{pools: pool(withBudgets(budget("1"))), nodes: nodesOf(3, "m5.large", "on-demand"),
			claims: []*karpv1.NodeClaim{claim("a", drifted(time.Minute)), claim("b", drifted(3*time.Hour)), claim("c", drifted(time.Hour))}}, "delete:b"},
	})
}

func withRequirementsNP(reqs ...karpv1.NodeSelectorRequirementWithMinValues) func(*karpv1.NodePool) {
	return func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, reqs...)
	}
}

func TestSingleNodeConsolidationCases(t *testing.T) {
	runMethodCases(t, map[string]methodCase{
		"a node whose pods fit on another is deleted": {&SingleNode{}, world{nodes: nodesOf(2, "m5.xlarge", "on-demand"),
			pods: []*corev1.Pod{pod("w1", "a", "1", "2Gi"), pod("w2", "b", "1", "2Gi")}}, "delete:a"},
		"a node too full to move stays when nothing is cheaper": {&SingleNode{}, world{nodes: nodesOf(1, "m5.large", "on-demand"),
			pods: []*corev1.Pod{pod("w1", "a", "1500m", "3Gi")}}, "replace:a+c5.large/spot"},
		"a cheaper on-demand replacement when Spot is not allowed": {&SingleNode{}, world{pools: pool(func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.Requirements[0].Values = []string{karpv1.CapacityTypeOnDemand}
		}), nodes: nodesOf(1, "m5.2xlarge", "on-demand"), pods: []*corev1.Pod{pod("w1", "a", "1", "2Gi")}}, "replace:a+c5.large/on-demand"},
		"no replacement when the cheapest is what runs": {&SingleNode{}, world{pools: pool(func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.Requirements[0].Values = []string{karpv1.CapacityTypeOnDemand}
		}), nodes: nodesOf(1, "c5.large", "on-demand"), pods: []*corev1.Pod{pod("w1", "a", "1", "2Gi")}}, ""},
		"a pod with do-not-disrupt holds its node": {&SingleNode{}, world{nodes: nodesOf(2, "m5.xlarge", "on-demand"),
			pods: []*corev1.Pod{pod("w1", "a", "1", "2Gi", podAnnotated(karpv1.DoNotDisruptAnnotationKey, "true")), pod("w2", "b", "1", "2Gi", podAnnotated(karpv1.DoNotDisruptAnnotationKey, "true"))}}, ""},
		"a PDB holds a node; the other goes": {&SingleNode{}, world{nodes: nodesOf(2, "m5.xlarge", "on-demand"),
			pods: []*corev1.Pod{pod("db", "a", "1", "2Gi"), pod("web", "b", "1", "2Gi")}, pdbs: []*k8spolicyv1.PodDisruptionBudget{pdb("db", 1, "db")}}, "delete:b"},
		"an Underutilized budget of 0 holds consolidation": {&SingleNode{}, world{pools: pool(withBudgets(budget("0", karpv1.DisruptionReasonUnderutilized), budget("100%"))),
			nodes: nodesOf(2, "m5.xlarge", "on-demand"), pods: []*corev1.Pod{pod("w1", "a", "1", "2Gi"), pod("w2", "b", "1", "2Gi")}}, ""},
		"consolidateAfter Never holds consolidation": {&SingleNode{}, world{pools: pool(consolidateAfter("Never")),
			nodes: nodesOf(2, "m5.xlarge", "on-demand"), pods: []*corev1.Pod{pod("w1", "a", "1", "2Gi"), pod("w2", "b", "1", "2Gi")}}, ""},
		"pods with required hostname anti-affinity cannot share": {&SingleNode{}, world{nodes: nodesOf(2, "m5.large", "on-demand"),
			pods: []*corev1.Pod{pod("w1", "a", "500m", "1Gi", appLabel("web"), hostnameAnti("web")), pod("w2", "b", "500m", "1Gi", appLabel("web"), hostnameAnti("web"))}},
			"replace:a+c5.large/spot"},
		"a pod bound to its zone by a volume stays in it": {&SingleNode{}, world{nodes: []*corev1.Node{node("a", "m5.xlarge", "on-demand", "z-a"), node("b", "m5.xlarge", "on-demand", "z-b")},
			pods: []*corev1.Pod{pod("w1", "a", "1", "2Gi", zoneAffinity("z-a")), pod("w2", "b", "1", "2Gi", zoneAffinity("z-b"))}},
			"replace:a+c5.large/spot"},
		"a node of an unknown type is left alone": {&SingleNode{}, world{nodes: []*corev1.Node{node("a", "x9.large", "on-demand", "z-a"), node("b", "m5.xlarge", "on-demand", "z-a")},
			pods: []*corev1.Pod{pod("w1", "a", "1", "2Gi"), pod("w2", "b", "1", "2Gi")}}, "replace:b+c5.large/spot"},
		"a replacement must be cheaper, not merely as cheap": {&SingleNode{}, world{pools: pool(func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.Requirements[0].Values = []string{karpv1.CapacityTypeOnDemand}
		}), nodes: nodesOf(1, "m5.large", "on-demand"), pods: []*corev1.Pod{pod("w1", "a", "1", "2Gi")}}, ""},
		"the pods' node selector narrows the replacement": {&SingleNode{}, world{nodes: nodesOf(1, "m5.2xlarge", "on-demand"),
			pods: []*corev1.Pod{pod("w1", "a", "1", "2Gi", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{karpv1.CapacityTypeLabelKey: "on-demand"} })}},
			"replace:a+c5.large/on-demand"},
	})
}

func onDemandOnly(np *karpv1.NodePool) {
	np.Spec.Template.Spec.Requirements[0].Values = []string{karpv1.CapacityTypeOnDemand}
}

func hostnameAnti(app string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}}}
	}
}

func zoneAffinity(zone string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}}}}}}}
	}
}

func TestMultiNodeConsolidationCases(t *testing.T) {
	runMethodCases(t, map[string]methodCase{
		"two half-empty nodes into one cheaper": {&MultiNode{}, world{nodes: nodesOf(2, "m5.xlarge", "on-demand"),
			pods: []*corev1.Pod{pod("w1", "a", "1", "2Gi"), pod("w2", "b", "1", "2Gi")}}, "replace:a,b+c5.large/spot"},
		// As upstream: the most candidates that can go at once, here all four for one new node
		// (deleting three onto the fourth would cost the same).
		"four nodes whose pods fit on one": {&MultiNode{}, world{pools: pool(onDemandOnly), nodes: nodesOf(4, "m5.xlarge", "on-demand"),
			pods: []*corev1.Pod{pod("w1", "a", "500m", "1Gi"), pod("w2", "b", "500m", "1Gi"), pod("w3", "c", "500m", "1Gi"), pod("w4", "d", "1", "2Gi")}}, "replace:a,b,c,d+m5.xlarge/on-demand"},
		"three nodes whose pods fit on a fourth that cannot go": {&MultiNode{}, world{pools: pool(onDemandOnly),
			nodes: append(nodesOf(3, "m5.xlarge", "on-demand"), node("d", "m5.xlarge", "on-demand", "z-a", annotated(karpv1.DoNotDisruptAnnotationKey, "true"))),
			pods:  []*corev1.Pod{pod("w1", "a", "500m", "1Gi"), pod("w2", "b", "500m", "1Gi"), pod("w3", "c", "500m", "1Gi"), pod("w4", "d", "1", "2Gi")}}, "delete:a,b,c"},
		"two full nodes stay": {&MultiNode{}, world{nodes: nodesOf(2, "m5.large", "spot"),
			pods: []*corev1.Pod{pod("w1", "a", "1800m", "3Gi"), pod("w2", "b", "1800m", "3Gi")}}, ""},
		"a node with do-not-disrupt is left out of the set": {&MultiNode{}, world{nodes: append(nodesOf(2, "m5.xlarge", "on-demand"),
			node("c", "m5.xlarge", "on-demand", "z-a", annotated(karpv1.DoNotDisruptAnnotationKey, "true"))),
			pods: []*corev1.Pod{pod("w1", "a", "1", "2Gi"), pod("w2", "b", "1", "2Gi"), pod("w3", "c", "1", "2Gi")}}, "delete:a,b"},
		"the budget bounds the set": {&MultiNode{}, world{pools: pool(withBudgets(budget("1"))), nodes: nodesOf(3, "m5.xlarge", "on-demand"),
			pods: []*corev1.Pod{pod("w1", "a", "1", "2Gi"), pod("w2", "b", "1", "2Gi"), pod("w3", "c", "1", "2Gi")}}, ""},
		"nodes of two pools consolidate together": {&MultiNode{}, world{pools: []*karpv1.NodePool{nodePool("default"), nodePool("batch")},
			nodes: []*corev1.Node{node("a", "m5.xlarge", "on-demand", "z-a"), node("b", "m5.xlarge", "on-demand", "z-a", inPool("batch")), node("c", "m5.xlarge", "on-demand", "z-a")},
			pods:  []*corev1.Pod{pod("w1", "a", "1", "2Gi"), pod("w2", "b", "1", "2Gi"), pod("w3", "c", "1", "2Gi")}}, "delete:a,b"},
		"WhenEmpty pools are not consolidated": {&MultiNode{}, world{pools: pool(whenEmpty), nodes: nodesOf(3, "m5.xlarge", "on-demand"),
			pods: []*corev1.Pod{pod("w1", "a", "1", "2Gi"), pod("w2", "b", "1", "2Gi"), pod("w3", "c", "1", "2Gi")}}, ""},
		"Spot nodes consolidate into on-demand only when cheaper": {&MultiNode{}, world{nodes: nodesOf(3, "m5.large", "spot"),
			pods: []*corev1.Pod{pod("w1", "a", "500m", "1Gi"), pod("w2", "b", "500m", "1Gi"), pod("w3", "c", "500m", "1Gi")}}, "delete:a,b"},
	})
}

// Spot-to-Spot consolidation (feature gate SpotToSpotConsolidation): a Spot node is replaced
// by a cheaper Spot node only when at least 15 cheaper Spot types are offered, so that the
// replacement is not the most likely to be interrupted; deletions need no such choice.
func TestSpotToSpotConsolidation(t *testing.T) {
	wide := func(n int) []*cloudprovider.InstanceType {
		out := types()
		for i := range n {
			name := fmt.Sprintf("t%d.small", i)
			od := 0.01 + 0.001*float64(i)
			it := &cloudprovider.InstanceType{Name: name, Labels: map[string]string{
				corev1.LabelInstanceTypeStable: name, karpv1.LabelInstanceFamily: fmt.Sprintf("t%d", i), corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux"},
				Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("110")}}
			for _, z := range []string{"z-a", "z-b"} {
				it.Offerings = append(it.Offerings, cloudprovider.Offering{Zone: z, CapacityType: karpv1.CapacityTypeOnDemand, Price: od, Available: true},
					cloudprovider.Offering{Zone: z, CapacityType: karpv1.CapacityTypeSpot, Price: od * 0.3, Available: true})
			}
			out = append(out, it)
		}
		return out
	}
	spotOnly := func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Requirements[0].Values = []string{karpv1.CapacityTypeSpot}
	}
	// types() has three Spot types cheaper than an m5.2xlarge's Spot price that hold the pod
	// (c5.large, m5.large, m5.xlarge); wide adds more.
	for name, tc := range map[string]struct {
		cheaper int
		gate    bool
		want    string
	}{
		"without the gate: never":            {cheaper: 20, gate: false, want: ""},
		"with the gate and 20 cheaper types": {cheaper: 20, gate: true, want: "replace:a+t0.small/spot"},
		"with the gate and 14 cheaper types": {cheaper: 14, gate: true, want: ""},
		"with the gate and exactly 15 types": {cheaper: 15, gate: true, want: "replace:a+t0.small/spot"},
	} {
		t.Run(name, func(t *testing.T) {
			w := world{pools: pool(spotOnly), nodes: nodesOf(1, "m5.2xlarge", "spot"), pods: []*corev1.Pod{pod("w1", "a", "500m", "1Gi")},
				catalog: wide(tc.cheaper - 3), opts: Options{SpotToSpotConsolidation: tc.gate}}
			got := strings.Join(commandNames(commands(t, &SingleNode{}, w.cluster())), " | ")
			if !strings.HasPrefix(got, tc.want) || (tc.want == "" && got != "") {
				t.Fatalf("commands %q, want %q", got, tc.want)
			}
			if tc.want != "" {
				cmds := commands(t, &SingleNode{}, w.cluster())
				if n := len(cmds[0].Replacements[0].InstanceTypes); n < 15 {
					t.Fatalf("the replacement offers %d Spot types, want at least 15", n)
				}
			}
		})
	}
}

// A pass tries the methods in upstream's order and returns the first that acts: emptiness,
// then drift, then multi-node, then single-node consolidation.
func TestPassOrder(t *testing.T) {
	for name, tc := range map[string]struct {
		w      world
		reason Reason
		want   string
	}{
		"an empty node before a drifted one": {w: world{nodes: nodesOf(2, "m5.xlarge", "on-demand"), claims: []*karpv1.NodeClaim{claim("a"), claim("b", drifted(time.Hour))},
			pods: []*corev1.Pod{pod("w", "b", "1", "2Gi")}}, reason: ReasonEmpty, want: "delete:a"},
		"drift before consolidation": {w: world{nodes: nodesOf(2, "m5.xlarge", "on-demand"), claims: []*karpv1.NodeClaim{claim("a", drifted(time.Hour)), claim("b")},
			pods: []*corev1.Pod{pod("w1", "a", "1", "2Gi"), pod("w2", "b", "1", "2Gi")}}, reason: ReasonDrifted, want: "delete:a"},
		"multi-node before single-node": {w: world{nodes: nodesOf(3, "m5.xlarge", "on-demand"),
			pods: []*corev1.Pod{pod("w1", "a", "1", "2Gi"), pod("w2", "b", "1", "2Gi"), pod("w3", "c", "1", "2Gi")}}, reason: ReasonUnderutilized, want: "replace:a,b,c+m5.xlarge/spot"},
		"nothing to do": {w: world{nodes: nodesOf(1, "c5.large", "spot"), pods: []*corev1.Pod{pod("w1", "a", "1500m", "3Gi")}}, want: ""},
	} {
		t.Run(name, func(t *testing.T) {
			cmds, m, err := Pass(context.Background(), tc.w.cluster(), Methods())
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Join(commandNames(cmds), " | ")
			if got != tc.want {
				t.Fatalf("commands %q, want %q", got, tc.want)
			}
			if tc.want != "" && m.Reason() != tc.reason {
				t.Fatalf("method %s, want %s", m.Reason(), tc.reason)
			}
		})
	}
}

// Every command moves every pod of its candidates somewhere that is not a candidate, and a
// replacement holds the pods moved to it.
func TestCommandsAccountForEveryPod(t *testing.T) {
	w := world{nodes: nodesOf(4, "m5.xlarge", "on-demand"), pods: []*corev1.Pod{
		pod("w1", "a", "1", "2Gi"), pod("w2", "a", "500m", "1Gi"), pod("w3", "b", "1", "2Gi"), pod("w4", "c", "2", "4Gi"), pod("w5", "d", "300m", "512Mi")}}
	for _, m := range []Method{&MultiNode{}, &SingleNode{}} {
		c := w.cluster()
		for _, cmd := range commands(t, m, c) {
			gone := map[string]bool{}
			for _, cand := range cmd.Candidates {
				gone[cand.Name()] = true
			}
			moved := map[string]string{}
			for _, mv := range cmd.Moves {
				if gone[mv.To] {
					t.Errorf("%s: pod %s moved to %s, which the command removes", m.Reason(), mv.Pod.Name, mv.To)
				}
				moved[mv.Pod.Name] = mv.To
			}
			for _, cand := range cmd.Candidates {
				for _, p := range cand.Pods {
					if _, ok := moved[p.Name]; !ok {
						t.Errorf("%s: pod %s of %s has nowhere to go", m.Reason(), p.Name, cand.Name())
					}
				}
			}
			for _, r := range cmd.Replacements {
				if len(r.Pods) == 0 {
					t.Errorf("%s: a replacement with no pods", m.Reason())
				}
			}
		}
	}
}
