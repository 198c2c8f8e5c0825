package solver

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/scheduling"
)

// What a pod asks of a node, as kube-scheduler counts it, decides the type: every resource
// name (ephemeral storage, hugepages, extended resources), init containers and sidecars,
// pod-level resources and overhead; and a type must have every resource a pod asks for.

func requests(kv ...string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		for i := 0; i+1 < len(kv); i += 2 {
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
	}
}

// storageCatalog is testCatalog with ephemeral storage and hugepages on some types.
func storageCatalog() []*cloudprovider.InstanceType {
	return []*cloudprovider.InstanceType{
		itype("c5.large", "amd64", 2, 4, 0.085, "ephemeral-storage", "20Gi"),
		itype("m5.large", "amd64", 2, 8, 0.096, "ephemeral-storage", "50Gi"),
		itype("m5d.large", "amd64", 2, 8, 0.113, "ephemeral-storage", "75Gi"),
		itype("m5.xlarge", "amd64", 4, 16, 0.192, "ephemeral-storage", "50Gi", "hugepages-2Mi", "1Gi"),
		itype("r5.large", "amd64", 2, 16, 0.126, "ephemeral-storage", "50Gi"),
	}
}

func TestRequestsDecideTheType(t *testing.T) {
	for name, tc := range map[string]struct {
		pod     *corev1.Pod
		want    string
		because string
	}{
		"ephemeral storage the smallest has":  {pod: pod("p", "1", "1Gi", requests("ephemeral-storage", "10Gi")), want: "c5.large"},
		"ephemeral storage beyond the small":  {pod: pod("p", "1", "1Gi", requests("ephemeral-storage", "40Gi")), want: "m5.large"},
		"ephemeral storage only the d has":    {pod: pod("p", "1", "1Gi", requests("ephemeral-storage", "60Gi")), want: "m5d.large"},
		"ephemeral storage nothing has":       {pod: pod("p", "1", "1Gi", requests("ephemeral-storage", "100Gi")), because: "ephemeral-storage"},
		"hugepages only one type has":         {pod: pod("p", "500m", "512Mi", requests("hugepages-2Mi", "512Mi")), want: "m5.xlarge"},
		"hugepages beyond every type":         {pod: pod("p", "500m", "512Mi", requests("hugepages-2Mi", "2Gi")), because: "hugepages-2Mi"},
		"an extended resource nobody has":     {pod: pod("p", "500m", "512Mi", requests("example.com/fpga", "1")), because: "example.com/fpga"},
		"memory decides over cpu":             {pod: pod("p", "500m", "12Gi"), want: "r5.large"},
		"cpu decides over memory":             {pod: pod("p", "3", "1Gi"), want: "m5.xlarge"},
		"a pod of nothing on the cheapest":    {pod: pod("p", "0", "0"), want: "c5.large"},
		"exactly the allocatable of the type": {pod: pod("p", "2", "4Gi"), want: "c5.large"},
		"a millicore over the allocatable":    {pod: pod("p", "2001m", "1Gi"), want: "m5.xlarge"},
		"pod-level resources replace the containers'": {pod: pod("p", "100m", "128Mi", func(p *corev1.Pod) {
			p.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3"), corev1.ResourceMemory: resource.MustParse("1Gi")}}
		}), want: "m5.xlarge"},
		"overhead adds to the containers": {pod: pod("p", "1500m", "1Gi", func(p *corev1.Pod) {
			p.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("600m")}
		}), want: "m5.xlarge"},
		"two containers add up": {pod: pod("p", "1", "1Gi", func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "side", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("1500m"), corev1.ResourceMemory: resource.MustParse("1Gi")}}})
		}), want: "m5.xlarge"},
		"an init container larger than the rest": {pod: pod("p", "500m", "512Mi", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceMemory: resource.MustParse("10Gi")}}}}
		}), want: "r5.large"},
		"a sidecar counts with every init container after it": {pod: pod("p", "500m", "512Mi", func(p *corev1.Pod) {
			always := corev1.ContainerRestartPolicyAlways
			p.Spec.InitContainers = []corev1.Container{
				{Name: "mesh", RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}},
				{Name: "migrate", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")}}},
			}
		}), want: "m5.xlarge"},
	} {
		t.Run(name, func(t *testing.T) {
			r := solve(t, &Input{Pods: []*corev1.Pod{tc.pod}, NodePools: []*NodePool{{NodePool: nodePool("default"), InstanceTypes: storageCatalog()}}})
			if tc.because != "" {
				expectUnschedulable(t, r, tc.because)
				return
			}
			expectPlaced(t, r)
			if got := r.NodeClaims[0].InstanceType.Name; got != tc.want {
				t.Fatalf("type %s, want %s", got, tc.want)
			}
			// The NodeClaim's requests are what the pod asks, as scheduling counts them.
			want := scheduling.PodRequests(tc.pod)
			for res, q := range want {
				if got := r.NodeClaims[0].Requests[res]; got.Cmp(q) != 0 {
					t.Errorf("NodeClaim requests %s %s, the pod asks %s", res, got.String(), q.String())
				}
			}
		})
	}
}

// Several pods' requests add up on a NodeClaim per resource: ephemeral storage can be what
// makes the second pod take a node of its own.
func TestRequestsAddUpPerResource(t *testing.T) {
	ps := pods("w", 2, "500m", "512Mi", requests("ephemeral-storage", "30Gi"))
	r := solve(t, &Input{Pods: ps, NodePools: []*NodePool{{NodePool: nodePool("default"), InstanceTypes: storageCatalog()}}})
	expectPlaced(t, r)
	for _, c := range r.NodeClaims {
		alloc := c.InstanceType.Allocatable()
		want := c.Requests[corev1.ResourceEphemeralStorage]
		if have := alloc[corev1.ResourceEphemeralStorage]; have.Cmp(want) < 0 {
			t.Fatalf("%s holds %s of ephemeral storage, its pods ask %s", c.InstanceType.Name, have.String(), want.String())
		}
	}
	// 60Gi together: an m5d.large ($0.113) or two nodes of 50Gi ($0.096 each): one m5d.
	if len(r.NodeClaims) != 1 || r.NodeClaims[0].InstanceType.Name != "m5d.large" {
		var names []string
		for _, c := range r.NodeClaims {
			names = append(names, c.InstanceType.Name)
		}
		t.Fatalf("types %s, want one m5d.large", strings.Join(names, ","))
	}
}

// Existing nodes are held to every resource too.
func TestExistingNodesHoldEveryResource(t *testing.T) {
	n := node("n1", "z-a", "8", "32Gi", func(n *scheduling.Node) {
		n.Allocatable[corev1.ResourceEphemeralStorage] = resource.MustParse("20Gi")
	})
	r := solve(t, &Input{Pods: pods("w", 3, "500m", "512Mi", requests("ephemeral-storage", "8Gi")), NodePools: []*NodePool{{NodePool: nodePool("default"), InstanceTypes: storageCatalog()}},
		Nodes: []*scheduling.Node{n}})
	expectPlaced(t, r)
	if got := len(r.Existing["n1"]); got != 2 {
		t.Fatalf("%d pods of 8Gi ephemeral storage on a node of 20Gi, want 2", got)
	}
	// A node that does not report a resource takes no pod that asks for it.
	bare := node("bare", "z-a", "8", "32Gi")
	r = solve(t, &Input{Pods: pods("w", 1, "500m", "512Mi", requests("example.com/fpga", "1")), NodePools: pools(nodePool("default")), Nodes: []*scheduling.Node{bare}})
	if len(r.Existing) != 0 {
		t.Fatal("a pod asking for an FPGA placed on a node without any")
	}
}
