package methods

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/cloudprovider/catalog"
	"github.com/karpenter-policy/karpenter/scheduling/snapshot"
)

// Passes over an over-provisioned cluster on the kwok provider's catalog (the shape of
// BenchmarkPass1000Nodes, smaller): every consolidation command lowers the cost, no pass
// takes more than its budget, no pod is lost, and the zone spread holds at the end.
func TestPassesOnACatalogCluster(t *testing.T) {
	types := catalog.Embedded().ForProvider()
	np := nodePool("general", func(np *karpv1.NodePool) { np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "30%"}} })
	np.Spec.Template.Spec.Requirements = nil
	zones := []string{"us-east-1a", "us-east-1b", "us-east-1c"}
	var nodes []*corev1.Node
	var pods []*corev1.Pod
	for i := range 60 {
		n := node(fmt.Sprintf("n-%02d", i), "m6i.2xlarge", "on-demand", zones[i%3])
		n.Labels[karpv1.NodePoolLabelKey] = "general"
		n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("7910m"), corev1.ResourceMemory: resource.MustParse("30000Mi"), corev1.ResourcePods: resource.MustParse("58")}
		nodes = append(nodes, n)
		for j := range 5 {
			k := i*5 + j
			p := pod(fmt.Sprintf("app-%d", k), n.Name, []string{"100m", "250m", "500m"}[k%3], []string{"256Mi", "512Mi", "1Gi"}[(k/3)%3])
			p.Labels["app"] = "plain"
			if k%5 == 0 {
				p.Labels["app"] = "spread"
				p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone,
					WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "spread"}}}}
			}
			pods = append(pods, p)
		}
	}
	env := snapshot.Env{Now: now, InstanceTypes: func(*karpv1.NodePool) ([]*cloudprovider.InstanceType, error) { return types, nil }}
	c := NewCluster(snapshot.Build(&snapshot.Objects{Nodes: nodes, Pods: pods, NodePools: []*karpv1.NodePool{np}}, env), Options{})
	total := countPods(c)
	price := func(c *Cluster) float64 {
		sum := 0.0
		for _, n := range c.Nodes {
			sum += n.PricePerHour
		}
		return sum
	}
	before := price(c)
	start := before
	for pass := range 40 {
		cmds, m, err := Pass(context.Background(), c, Methods())
		if err != nil {
			t.Fatal(err)
		}
		if len(cmds) == 0 {
			break
		}
		disrupted, size := 0, c.PoolSizes["general"]
		for _, cmd := range cmds {
			disrupted += len(cmd.Candidates)
			c = c.Apply(cmd)
		}
		// Each pass applies its commands at once here, so it may take 30% of the pool.
		if limit := (30*size + 99) / 100; disrupted > limit {
			t.Fatalf("pass %d: %d of %d nodes disrupted, the budget is 30%% (%d)", pass, disrupted, size, limit)
		}
		after := price(c)
		if m.Consolidation() != "" && after >= before {
			t.Fatalf("pass %d (%s): $%.2f -> $%.2f", pass, m.Reason(), before, after)
		}
		before = after
		if got := countPods(c); got != total {
			t.Fatalf("pass %d: %d pods, had %d", pass, got, total)
		}
	}
	perZone := map[string]int{}
	for _, n := range c.Nodes {
		for _, p := range n.Pods {
			if p.Labels["app"] == "spread" {
				perZone[n.Labels[corev1.LabelTopologyZone]]++
			}
		}
	}
	lo, hi := -1, 0
	for _, z := range zones {
		if lo < 0 || perZone[z] < lo {
			lo = perZone[z]
		}
		hi = max(hi, perZone[z])
	}
	if hi-lo > 1 {
		t.Fatalf("the spread pods end %v over the zones", perZone)
	}
	if before > start*0.5 {
		t.Fatalf("$%.2f -> $%.2f an hour: an over-provisioned cluster should at least halve", start, before)
	}
	t.Logf("$%.2f -> $%.2f an hour, %d nodes left", start, before, len(c.Nodes))
}
