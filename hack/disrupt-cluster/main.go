// Command disrupt-cluster writes a large, over-provisioned cluster for karpenterctl simulate
// --disrupt (docs/benchmarks.md): -nodes general m6i.2xlarge nodes over three zones, each
// carrying -pods-per-node pods of mixed sizes, a fifth of them zone-spread:
//
//	go run ./hack/disrupt-cluster -nodes 1000 -pods-per-node 10 > /tmp/cluster.yaml
//	bin/karpenterctl simulate --disrupt --max-commands 1 --nodepools test/workloads/disrupt/nodepools.yaml --nodes /tmp/cluster.yaml
//
// It is a benchmark helper: it writes to standard output and nothing else.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

func main() {
	nodes := flag.Int("nodes", 1000, "how many nodes")
	perNode := flag.Int("pods-per-node", 10, "pods on each node")
	flag.Parse()
	w := bufio.NewWriter(os.Stdout)
	defer func() { _ = w.Flush() }()
	write := func(o any) {
		b, err := yaml.Marshal(o)
		if err != nil {
			fmt.Fprintln(os.Stderr, "disrupt-cluster:", err)
			os.Exit(1)
		}
		fmt.Fprintf(w, "---\n%s", b)
	}
	zones := []string{"us-east-1a", "us-east-1b", "us-east-1c"}
	cpus := []string{"100m", "250m", "500m", "250m", "100m"}
	mems := []string{"256Mi", "512Mi", "1Gi", "768Mi", "128Mi"}
	spread := []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "spread"}}}}
	created := metav1.NewTime(metav1.Now().Add(-48 * 3600e9))
	for i := range *nodes {
		name := fmt.Sprintf("ip-10-%d-%d", i/250, i%250)
		write(&corev1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}, ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: created,
			Labels: map[string]string{karpv1.NodePoolLabelKey: "general", corev1.LabelInstanceTypeStable: "m6i.2xlarge", karpv1.CapacityTypeLabelKey: "on-demand",
				corev1.LabelTopologyZone: zones[i%3], corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux"}},
			Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("7910m"), corev1.ResourceMemory: resource.MustParse("30000Mi"), corev1.ResourcePods: resource.MustParse("58")}}})
		for j := range *perNode {
			k := i*(*perNode) + j
			app := "plain"
			p := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%d", k), Namespace: "shop"},
				Spec: corev1.PodSpec{NodeName: name, Containers: []corev1.Container{{Name: "c", Image: "app", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse(cpus[k%5]), corev1.ResourceMemory: resource.MustParse(mems[(k/5)%5])}}}}}}
			if k%5 == 0 {
				app = "spread"
				p.Spec.TopologySpreadConstraints = spread
			}
			p.Labels = map[string]string{"app": app}
			write(p)
		}
	}
}
