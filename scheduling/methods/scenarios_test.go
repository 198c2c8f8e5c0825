package methods

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/scheduling/solver"
)

// Consolidation scenarios of upstream's suites on mixed clusters: what a pass decides, and
// that its decision keeps every pod's constraints. Each scenario names the decision a
// platform engineer would expect and why.

func TestConsolidationScenarios(t *testing.T) {
	zoneSel := func(z string) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{corev1.LabelTopologyZone: z} }
	}
	for name, tc := range map[string]struct {
		w    world
		want string // the pass's commands; "" none
		why  string
	}{
		"one large half-empty node becomes a small one": {
			w:    world{pools: pool(onDemandOnly), nodes: nodesOf(1, "m5.4xlarge", "on-demand"), pods: []*corev1.Pod{pod("w", "a", "1", "2Gi")}},
			want: "replace:a+c5.large/on-demand", why: "16 vCPU for 1: the cheapest type holding the pod"},
		"a full node stays": {
			w:    world{pools: pool(onDemandOnly), nodes: nodesOf(1, "m5.large", "on-demand"), pods: []*corev1.Pod{pod("w", "a", "1800m", "3Gi")}},
			want: "", why: "no cheaper type holds 1.8 vCPU and 3 GiB but c5.large at the same price"},
		"two nodes' pods fit on one of them": {
			w: world{pools: pool(onDemandOnly), nodes: nodesOf(2, "m5.xlarge", "on-demand"),
				pods: []*corev1.Pod{pod("w1", "a", "1", "2Gi"), pod("w2", "b", "1", "2Gi")}},
			want: "replace:a,b+c5.large/on-demand", why: "one c5.large holds both pods for less than either m5.xlarge"},
		"zone selectors keep pods in their zones": {
			w: world{pools: pool(onDemandOnly), nodes: []*corev1.Node{node("a", "m5.xlarge", "on-demand", "z-a"), node("b", "m5.xlarge", "on-demand", "z-b")},
				pods: []*corev1.Pod{pod("w1", "a", "1", "2Gi", zoneSel("z-a")), pod("w2", "b", "1", "2Gi", zoneSel("z-b"))}},
			want: "replace:a+c5.large/on-demand", why: "neither pod may move to the other's zone: each node shrinks in its own (a first)"},
		"Spot nodes are left for on-demand only when cheaper": {
			w:    world{nodes: nodesOf(1, "m5.large", "spot"), pods: []*corev1.Pod{pod("w", "a", "1", "2Gi")}},
			want: "", why: "a Spot m5.large costs less than any on-demand type that holds the pod"},
		"empty nodes before underutilized ones": {
			w: world{pools: pool(onDemandOnly), nodes: nodesOf(3, "m5.xlarge", "on-demand"),
				pods: []*corev1.Pod{pod("w1", "a", "1", "2Gi"), pod("w2", "b", "1", "2Gi")}},
			want: "delete:c", why: "emptiness runs first"},
		"a node with pods nominated to it stays": {
			w: world{pools: pool(onDemandOnly), nodes: nodesOf(2, "m5.xlarge", "on-demand"), nominated: "b",
				pods: []*corev1.Pod{pod("w1", "a", "1", "2Gi"), pod("w2", "b", "1", "2Gi")}},
			want: "delete:a", why: "b is held by the provisioner's nomination; a's pod moves onto b"},
	} {
		t.Run(name, func(t *testing.T) {
			cmds, _, err := Pass(context.Background(), tc.w.cluster(), Methods())
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Join(commandNames(cmds), " | ")
			if tc.want == "" && got != "" || tc.want != "" && !strings.HasPrefix(got, tc.want) {
				t.Fatalf("commands %q, want %q: %s", got, tc.want, tc.why)
			}
		})
	}
}

// A cluster scaled down by half folds into about half the nodes, one pass at a time, and ends
// within 20% of what a fresh solve of the remaining pods would launch.
func TestScaleDownFoldsToAFreshSolve(t *testing.T) {
	var nodes []*corev1.Node
	var pods []*corev1.Pod
	for i := range 16 {
		name := fmt.Sprintf("n%02d", i)
		nodes = append(nodes, node(name, "m5.xlarge", "on-demand", []string{"z-a", "z-b"}[i%2]))
		// Each node was full (3 pods of 1 vCPU); the scale-down left one or two.
		for j := range 1 + i%2 {
			pods = append(pods, pod(fmt.Sprintf("%s-%d", name, j), name, "1", "2Gi"))
		}
	}
	w := world{pools: pool(onDemandOnly, withBudgets(budget("50%"))), nodes: nodes, pods: pods}
	done, after := converge(t, w.cluster())
	var price float64
	for _, n := range after.Nodes {
		price += n.PricePerHour
	}
	// What a fresh solve of the same pods on the same NodePool launches.
	var fresh []*corev1.Pod
	for _, p := range pods {
		cp := p.DeepCopy()
		cp.Spec.NodeName = ""
		fresh = append(fresh, cp)
	}
	res, err := solver.Solve(&solver.Input{Pods: fresh, NodePools: []*solver.NodePool{{NodePool: w.pools[0], InstanceTypes: types()}}})
	if err != nil {
		t.Fatal(err)
	}
	if price > res.PricePerHour()*1.2 {
		t.Fatalf("after %d commands the cluster costs $%.2f an hour, a fresh solve $%.2f: %v", len(done), price, res.PricePerHour(), done)
	}
	if len(after.Nodes) >= len(nodes) {
		t.Fatalf("%d nodes after %v, had %d", len(after.Nodes), done, len(nodes))
	}
	t.Logf("%d commands, %d -> %d nodes, $%.2f an hour", len(done), len(nodes), len(after.Nodes), price)
}

// Pods of a StatefulSet-like app with required hostname anti-affinity fold only as far as
// their anti-affinity allows: one pod a node.
func TestAntiAffinityLimitsFolding(t *testing.T) {
	var nodes []*corev1.Node
	var pods []*corev1.Pod
	for i := range 4 {
		name := fmt.Sprintf("n%d", i)
		nodes = append(nodes, node(name, "m5.2xlarge", "on-demand", "z-a"))
		pods = append(pods, pod("db-"+name, name, "500m", "1Gi", appLabel("db"), hostnameAnti("db")))
	}
	_, after := converge(t, world{pools: pool(onDemandOnly), nodes: nodes, pods: pods}.cluster())
	perNode := map[string]int{}
	for _, n := range after.Nodes {
		for _, p := range n.Pods {
			if p.Labels["app"] == "db" {
				perNode[n.Name]++
			}
		}
	}
	if len(perNode) != 4 {
		t.Fatalf("db pods on %d nodes, want 4 (one each): %v", len(perNode), perNode)
	}
	for n, k := range perNode {
		if k != 1 {
			t.Fatalf("%d db pods on %s", k, n)
		}
	}
	// Each node shrank to the cheapest type holding its db pod.
	for _, n := range after.Nodes {
		if n.Labels[corev1.LabelInstanceTypeStable] == "m5.2xlarge" {
			t.Errorf("%s still an m5.2xlarge for a 500m pod", n.Name)
		}
	}
}

// A node that only a pod's required pod affinity ties to its neighbour is consolidated with
// the neighbour's zone kept.
func TestAffinityKeepsZoneThroughConsolidation(t *testing.T) {
	near := func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey: corev1.LabelTopologyZone, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}}}}
	}
	w := world{pools: pool(onDemandOnly), nodes: []*corev1.Node{
		node("db", "m5.xlarge", "on-demand", "z-b", annotated(karpv1.DoNotDisruptAnnotationKey, "true")), node("api", "m5.2xlarge", "on-demand", "z-b")},
		pods: []*corev1.Pod{pod("db-0", "db", "1", "2Gi", appLabel("db")), pod("api-0", "api", "1", "2Gi", appLabel("api"), near)}}
	c := w.cluster()
	cmds := commands(t, &SingleNode{}, c)
	if len(cmds) != 1 {
		t.Fatalf("commands %v, want the api node consolidated", commandNames(cmds))
	}
	if z := zoneOf(c, cmds[0], "api-0"); z != "z-b" {
		t.Fatalf("api-0 moves to %q, want z-b beside the db", z)
	}
}
