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

// One disruption pass (the methods alone, no API server) on an over-provisioned cluster of
// 1000 m6i.2xlarge nodes with 10 pods each, a fifth of them zone-spread, on the kwok
// provider's catalog; the same shape as hack/disrupt-cluster.
//
//	go test ./scheduling/methods -run='^$' -bench=Pass -benchmem
func BenchmarkPass1000Nodes(b *testing.B) {
	types := catalog.Embedded().ForProvider()
	np := nodePool("general", func(np *karpv1.NodePool) { np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "30%"}} })
	np.Spec.Template.Spec.Requirements = nil
	zones := []string{"us-east-1a", "us-east-1b", "us-east-1c"}
	cpus := []string{"100m", "250m", "500m", "250m", "100m"}
	mems := []string{"256Mi", "512Mi", "1Gi", "768Mi", "128Mi"}
	var nodes []*corev1.Node
	var pods []*corev1.Pod
	for i := range 1000 {
		n := node(fmt.Sprintf("n-%d", i), "m6i.2xlarge", "on-demand", zones[i%3])
		n.Labels[karpv1.NodePoolLabelKey] = "general"
		n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("7910m"), corev1.ResourceMemory: resource.MustParse("30000Mi"), corev1.ResourcePods: resource.MustParse("58")}
		nodes = append(nodes, n)
		for j := range 10 {
			k := i*10 + j
			p := pod(fmt.Sprintf("app-%d", k), n.Name, cpus[k%5], mems[(k/5)%5])
			p.Labels["app"] = "plain"
			if k%5 == 0 {
				p.Labels["app"] = "spread"
				p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone,
					WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "spread"}}}}
			}
			pods = append(pods, p)
		}
	}
	objs := &snapshot.Objects{Nodes: nodes, Pods: pods, NodePools: []*karpv1.NodePool{np}}
	env := snapshot.Env{Now: now, InstanceTypes: func(*karpv1.NodePool) ([]*cloudprovider.InstanceType, error) { return types, nil }}
	var cmds []*Command
	b.ResetTimer()
	for b.Loop() {
		c := NewCluster(snapshot.Build(objs, env), Options{})
		var err error
		if cmds, _, err = Pass(context.Background(), c, Methods()); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if len(cmds) == 0 {
		b.Fatal("no command")
	}
	saved := 0.0
	for _, cmd := range cmds {
		saved += cmd.Savings()
	}
	b.ReportMetric(saved, "$/hour-saved")
	b.ReportMetric(float64(len(cmds[0].Candidates)), "nodes")
}
