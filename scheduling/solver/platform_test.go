package solver

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

// NodePool setups platform teams write (upstream's docs' examples): Spot first with an
// on-demand fallback, a tainted GPU pool, a system pool for critical add-ons, Graviton first,
// a capped pool that overflows. Each workload lands where the setup means it to.

func spotOnly(np *karpv1.NodePool) {
	np.Spec.Template.Spec.Requirements[0].Values = []string{karpv1.CapacityTypeSpot}
}

func platformPools() []*NodePool {
	gpuTypes := append(testCatalog()[:0:0], testCatalog()...)
	return []*NodePool{
		{NodePool: weighted("spot-first", 50, spotOnly), InstanceTypes: testCatalog()},
		{NodePool: weighted("on-demand", 10), InstanceTypes: testCatalog()},
		{NodePool: weighted("gpu", 90, tainted("nvidia.com/gpu", "", corev1.TaintEffectNoSchedule), withRequirements(requirement(karpv1.LabelInstanceFamily, corev1.NodeSelectorOpIn, "g5"))),
			InstanceTypes: gpuTypes},
		{NodePool: weighted("system", 100, withLabels("pool", "system"), tainted("CriticalAddonsOnly", "true", corev1.TaintEffectNoSchedule)), InstanceTypes: testCatalog()},
	}
}

func TestPlatformSetups(t *testing.T) {
	gpu := func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = resource.MustParse("1")
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists})
	}
	critical := func(p *corev1.Pod) {
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists})
		p.Spec.NodeSelector = map[string]string{"pool": "system"}
	}
	for name, tc := range map[string]struct {
		pod      *corev1.Pod
		wantPool string
		wantCT   string
	}{
		"a plain pod on Spot first":                  {pod: pod("w", "1", "1Gi"), wantPool: "spot-first", wantCT: karpv1.CapacityTypeSpot},
		"a pod that wants on-demand on the fallback": {pod: pod("w", "1", "1Gi", selector(karpv1.CapacityTypeLabelKey, karpv1.CapacityTypeOnDemand)), wantPool: "on-demand", wantCT: karpv1.CapacityTypeOnDemand},
		"a GPU pod on the GPU pool":                  {pod: pod("train", "1", "4Gi", gpu), wantPool: "gpu"},
		"a critical add-on on the system pool":       {pod: pod("coredns", "100m", "128Mi", critical), wantPool: "system"},
		"a pod tolerating the GPU taint but asking for no GPU": {pod: pod("w", "1", "1Gi", func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}}
		}), wantPool: "gpu"},
	} {
		t.Run(name, func(t *testing.T) {
			r := solve(t, &Input{Pods: []*corev1.Pod{tc.pod}, NodePools: platformPools()})
			expectPlaced(t, r)
			c := r.NodeClaims[0]
			if c.NodePool != tc.wantPool {
				t.Fatalf("NodePool %s, want %s", c.NodePool, tc.wantPool)
			}
			if tc.wantCT != "" && c.Offering.CapacityType != tc.wantCT {
				t.Fatalf("capacity type %s, want %s", c.Offering.CapacityType, tc.wantCT)
			}
		})
	}
}

// Spot first, on-demand when Spot is gone: the fallback takes what Spot no longer offers.
func TestSpotFallsBackToOnDemand(t *testing.T) {
	ps := platformPools()[:2]
	for _, np := range ps {
		for _, it := range np.InstanceTypes {
			for i := range it.Offerings {
				if it.Offerings[i].CapacityType == karpv1.CapacityTypeSpot {
					it.Offerings[i].Available = false
				}
			}
		}
	}
	r := solve(t, &Input{Pods: pods("w", 3, "1", "1Gi"), NodePools: ps})
	expectPlaced(t, r)
	for _, c := range r.NodeClaims {
		if c.NodePool != "on-demand" || c.Offering.CapacityType != karpv1.CapacityTypeOnDemand {
			t.Fatalf("%s/%s, want the on-demand fallback", c.NodePool, c.Offering.CapacityType)
		}
	}
}

// Graviton first: an arm64 pool of higher weight takes what it can, amd64-only pods go to the
// amd64 pool.
func TestGravitonFirst(t *testing.T) {
	arm := &NodePool{NodePool: weighted("arm", 50, withRequirements(requirement(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "arm64"))), InstanceTypes: testCatalog()}
	amd := &NodePool{NodePool: weighted("amd", 10, withRequirements(requirement(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64"))), InstanceTypes: testCatalog()}
	ps := append(pods("multi", 4, "500m", "512Mi"), pods("legacy", 2, "500m", "512Mi", selector(corev1.LabelArchStable, "amd64"))...)
	r := solve(t, &Input{Pods: ps, NodePools: []*NodePool{arm, amd}})
	expectPlaced(t, r)
	for _, c := range r.NodeClaims {
		for _, p := range c.Pods {
			want := "arm"
			if p.Spec.NodeSelector[corev1.LabelArchStable] == "amd64" {
				want = "amd"
			}
			if c.NodePool != want {
				t.Fatalf("%s on %s, want %s", p.Name, c.NodePool, want)
			}
		}
	}
}

// A capped pool overflows into the next by weight, pod by pod, never past its cap.
func TestCappedPoolOverflows(t *testing.T) {
	for _, cap := range []int{2, 4, 8} {
		t.Run(fmt.Sprintf("%d cpu", cap), func(t *testing.T) {
			capped := &NodePool{NodePool: weighted("capped", 50, limited("cpu", fmt.Sprint(cap))), InstanceTypes: testCatalog()}
			rest := &NodePool{NodePool: weighted("rest", 10), InstanceTypes: testCatalog()}
			r := solve(t, &Input{Pods: pods("w", 10, "900m", "512Mi", hostPort(8080)), NodePools: []*NodePool{capped, rest}})
			expectPlaced(t, r)
			var used int64
			for _, c := range r.NodeClaims {
				if c.NodePool == "capped" {
					used += c.InstanceType.Capacity.Cpu().Value()
				}
			}
			if used > int64(cap) {
				t.Fatalf("capped launches %d cpu against %d", used, cap)
			}
			if used == 0 {
				t.Fatal("the capped pool took nothing though it has room for a node")
			}
		})
	}
}
