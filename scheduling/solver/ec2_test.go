package solver

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
)

// Decisions on the real EC2 catalog (testdata's 1363 types with their on-demand prices), the
// shapes a platform team meets: the family a pod's shape calls for, GPUs, Graviton, local
// NVMe, generations, sizes, and NodePools written as upstream's examples write them.

func ec2Pool(name string, reqs ...karpv1.NodeSelectorRequirementWithMinValues) *karpv1.NodePool {
	np := nodePool(name, withRequirements(reqs...))
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
	return np
}

func ec2Solve(t *testing.T, types []*cloudprovider.InstanceType, np *karpv1.NodePool, ps ...*corev1.Pod) *Result {
	t.Helper()
	r, err := Solve(&Input{Pods: ps, NodePools: []*NodePool{{NodePool: np, InstanceTypes: types}}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestEC2Shapes(t *testing.T) {
	types := ec2Catalog(t)
	category := func(c *NodeClaim) string { return c.InstanceType.Labels[karpv1.LabelInstanceCategory] }
	generation := func(c *NodeClaim) int {
		g, _ := strconv.Atoi(c.InstanceType.Labels[karpv1.LabelInstanceGeneration])
		return g
	}
	cmr := requirement(karpv1.LabelInstanceCategory, corev1.NodeSelectorOpIn, "c", "m", "r")
	gen5 := requirement(karpv1.LabelInstanceGeneration, corev1.NodeSelectorOpGt, "4")
	for name, tc := range map[string]struct {
		np    *karpv1.NodePool
		pods  []*corev1.Pod
		check func(*testing.T, *Result)
	}{
		"cpu-heavy pods on a compute family": {np: ec2Pool("p", cmr, gen5), pods: pods("enc", 8, "4", "4Gi"), check: func(t *testing.T, r *Result) {
			for _, c := range r.NodeClaims {
				if category(c) != "c" {
					t.Errorf("cpu-heavy pods (1 GiB a vCPU) on %s", c.InstanceType.Name)
				}
			}
		}},
		"memory-heavy pods on a memory family": {np: ec2Pool("p", cmr, gen5), pods: pods("cache", 8, "1", "8Gi"), check: func(t *testing.T, r *Result) {
			for _, c := range r.NodeClaims {
				if category(c) != "r" {
					t.Errorf("memory-heavy pods (8 GiB a vCPU) on %s", c.InstanceType.Name)
				}
			}
		}},
		"balanced pods on a general family": {np: ec2Pool("p", cmr, gen5), pods: pods("web", 8, "1", "4Gi"), check: func(t *testing.T, r *Result) {
			for _, c := range r.NodeClaims {
				if category(c) != "m" {
					t.Errorf("4 GiB a vCPU on %s", c.InstanceType.Name)
				}
			}
		}},
		"generation above 4 holds": {np: ec2Pool("p", cmr, gen5), pods: pods("w", 20, "500m", "1Gi"), check: func(t *testing.T, r *Result) {
			for _, c := range r.NodeClaims {
				for _, it := range c.InstanceTypes {
					if g, _ := strconv.Atoi(it.Labels[karpv1.LabelInstanceGeneration]); g <= 4 {
						t.Fatalf("%s of generation %d offered", it.Name, g)
					}
				}
				if generation(c) <= 4 {
					t.Errorf("priced at %s", c.InstanceType.Name)
				}
			}
		}},
		"a GPU pod gets a GPU type": {np: ec2Pool("gpu", requirement(karpv1.LabelInstanceCategory, corev1.NodeSelectorOpIn, "g", "p")), pods: []*corev1.Pod{
			pod("train", "4", "16Gi", func(p *corev1.Pod) {
				p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = resource.MustParse("1")
			})},
			check: func(t *testing.T, r *Result) {
				c := r.NodeClaims[0]
				if q := c.InstanceType.Capacity["nvidia.com/gpu"]; q.Value() < 1 {
					t.Errorf("a GPU pod on %s without GPUs", c.InstanceType.Name)
				}
			}},
		"four GPUs need a large GPU type": {np: ec2Pool("gpu", requirement(karpv1.LabelInstanceCategory, corev1.NodeSelectorOpIn, "g", "p")), pods: []*corev1.Pod{
			pod("train", "8", "32Gi", func(p *corev1.Pod) {
				p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = resource.MustParse("4")
			})},
			check: func(t *testing.T, r *Result) {
				for _, it := range r.NodeClaims[0].InstanceTypes {
					if q := it.Capacity["nvidia.com/gpu"]; q.Value() < 4 {
						t.Errorf("%s offered with %d GPUs", it.Name, q.Value())
					}
				}
			}},
		"arm64 gets Graviton": {np: ec2Pool("arm", cmr, gen5), pods: pods("w", 4, "1", "2Gi", selector(corev1.LabelArchStable, "arm64")), check: func(t *testing.T, r *Result) {
			for _, c := range r.NodeClaims {
				for _, it := range c.InstanceTypes {
					if it.Labels[corev1.LabelArchStable] != "arm64" {
						t.Fatalf("%s offered to arm64 pods", it.Name)
					}
				}
			}
		}},
		"a pool of sizes up to xlarge": {np: ec2Pool("small", cmr, gen5, requirement(karpv1.LabelInstanceSize, corev1.NodeSelectorOpIn, "large", "xlarge")),
			pods: pods("w", 30, "1", "2Gi"), check: func(t *testing.T, r *Result) {
				for _, c := range r.NodeClaims {
					if s := c.InstanceType.Labels[karpv1.LabelInstanceSize]; s != "large" && s != "xlarge" {
						t.Errorf("size %s", s)
					}
				}
			}},
		"a cpu ceiling by Lt": {np: ec2Pool("small", cmr, gen5, requirement(karpv1.LabelInstanceCPU, corev1.NodeSelectorOpLt, "9")),
			pods: pods("w", 30, "1", "2Gi"), check: func(t *testing.T, r *Result) {
				for _, c := range r.NodeClaims {
					for _, it := range c.InstanceTypes {
						if q := it.Capacity[corev1.ResourceCPU]; q.Value() > 8 {
							t.Fatalf("%s (%d vCPU) offered under Lt 9", it.Name, q.Value())
						}
					}
				}
			}},
		"families by name": {np: ec2Pool("fam", requirement(karpv1.LabelInstanceFamily, corev1.NodeSelectorOpIn, "m7i", "c7i")),
			pods: pods("w", 10, "1", "2Gi"), check: func(t *testing.T, r *Result) {
				for _, c := range r.NodeClaims {
					if f := c.InstanceType.Labels[karpv1.LabelInstanceFamily]; f != "m7i" && f != "c7i" {
						t.Errorf("family %s", f)
					}
				}
			}},
		"a family excluded": {np: ec2Pool("nt", cmr, gen5, requirement(karpv1.LabelInstanceFamily, corev1.NodeSelectorOpNotIn, "c6g", "c7g", "c6gn", "c7gn", "c8g")),
			pods: pods("w", 10, "2", "2Gi"), check: func(t *testing.T, r *Result) {
				for _, c := range r.NodeClaims {
					for _, it := range c.InstanceTypes {
						switch it.Labels[karpv1.LabelInstanceFamily] {
						case "c6g", "c7g", "c6gn", "c7gn", "c8g":
							t.Fatalf("%s offered though its family is excluded", it.Name)
						}
					}
				}
			}},
	} {
		t.Run(name, func(t *testing.T) {
			r := ec2Solve(t, types, tc.np, tc.pods...)
			if len(r.Unschedulable) > 0 {
				t.Fatalf("%d unschedulable: %s", len(r.Unschedulable), r.Unschedulable[0].Reason)
			}
			if len(r.NodeClaims) == 0 {
				t.Fatal("no NodeClaim")
			}
			tc.check(t, r)
			// On the real catalog too, every NodeClaim offers its pods room on every type.
			for _, c := range r.NodeClaims {
				for _, it := range c.InstanceTypes {
					alloc := it.Allocatable()
					for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
						if have, want := alloc[res], c.Requests[res]; have.Cmp(want) < 0 {
							t.Fatalf("%s offers %s %s for %s", it.Name, res, have.String(), want.String())
						}
					}
				}
			}
		})
	}
}

// Sizing on the real catalog: more pods of a shape use larger nodes when larger nodes are no
// dearer per vCPU, and the total never exceeds a node per pod.
func TestEC2Sizing(t *testing.T) {
	types := ec2Catalog(t)
	np := ec2Pool("p", requirement(karpv1.LabelInstanceFamily, corev1.NodeSelectorOpIn, "m5"))
	var prev float64
	for _, n := range []int{1, 4, 16, 64} {
		r := ec2Solve(t, types, np, pods("w", n, "1", "4Gi")...)
		if len(r.Unschedulable) > 0 {
			t.Fatalf("%d pods: %s", n, r.Unschedulable[0].Reason)
		}
		perPod := r.PricePerHour() / float64(n)
		if n > 1 && perPod > prev*1.0001 {
			t.Errorf("%d pods cost $%.4f each, %d fewer cost $%.4f", n, perPod, n, prev)
		}
		prev = perPod
		var sizes []string
		for _, c := range r.NodeClaims {
			sizes = append(sizes, c.InstanceType.Name)
		}
		t.Logf("%d pods: %s, $%.3f/hour", n, strings.Join(sizes, " "), r.PricePerHour())
	}
}

// The on-demand prices decide between families on the real catalog: the type chosen for a
// pod is the cheapest of those its NodePool allows that hold it.
func TestEC2CheapestAllowed(t *testing.T) {
	types := ec2Catalog(t)
	for _, shape := range []struct{ cpu, mem string }{{"500m", "512Mi"}, {"2", "4Gi"}, {"3", "20Gi"}, {"15", "30Gi"}} {
		t.Run(fmt.Sprintf("%s/%s", shape.cpu, shape.mem), func(t *testing.T) {
			np := ec2Pool("p", requirement(karpv1.LabelInstanceCategory, corev1.NodeSelectorOpIn, "c", "m", "r"))
			r := ec2Solve(t, types, np, pod("w", shape.cpu, shape.mem))
			if len(r.NodeClaims) != 1 {
				t.Fatalf("%d NodeClaims", len(r.NodeClaims))
			}
			got := r.NodeClaims[0].Offering.Price
			want := standaloneOn(pod("w", shape.cpu, shape.mem), types, func(it *cloudprovider.InstanceType) bool {
				switch it.Labels[karpv1.LabelInstanceCategory] {
				case "c", "m", "r":
					return true
				}
				return false
			})
			if got > want+1e-9 {
				t.Fatalf("$%.4f for %s, the cheapest allowed type holding the pod costs $%.4f", got, r.NodeClaims[0].InstanceType.Name, want)
			}
		})
	}
}

// standaloneOn is the cheapest on-demand offering of the allowed types that hold the pod.
func standaloneOn(p *corev1.Pod, types []*cloudprovider.InstanceType, allowed func(*cloudprovider.InstanceType) bool) float64 {
	var keep []*cloudprovider.InstanceType
	for _, it := range types {
		if allowed(it) {
			keep = append(keep, it)
		}
	}
	return standalone(p, keep)
}
