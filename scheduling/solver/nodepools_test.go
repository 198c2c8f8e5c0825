package solver

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/scheduling"
)

// The cases of upstream's provisioning and scheduling suites on NodePools ("Weighted
// NodePools", limits, taints, "In-Flight Nodes", "Existing Nodes", "Daemonsets",
// "Binpacking"), written against this solver.

func weighted(name string, w int32, f ...func(*karpv1.NodePool)) *karpv1.NodePool {
	return nodePool(name, append([]func(*karpv1.NodePool){func(np *karpv1.NodePool) { np.Spec.Weight = ptr.To(w) }}, f...)...)
}

func limited(kv ...string) func(*karpv1.NodePool) {
	return func(np *karpv1.NodePool) {
		np.Spec.Limits = karpv1.Limits{}
		for i := 0; i+1 < len(kv); i += 2 {
			np.Spec.Limits[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
	}
}

func tainted(key, value string, effect corev1.TaintEffect) func(*karpv1.NodePool) {
	return func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Taints = append(np.Spec.Template.Spec.Taints, corev1.Taint{Key: key, Value: value, Effect: effect})
	}
}

func tolerating(key, value string, effect corev1.TaintEffect) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		op := corev1.TolerationOpEqual
		if value == "" {
			op = corev1.TolerationOpExists
		}
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: key, Operator: op, Value: value, Effect: effect})
	}
}

// byPool counts the placed pods by NodePool.
func byPool(r *Result) map[string]int {
	out := map[string]int{}
	for _, c := range r.NodeClaims {
		out[c.NodePool] += len(c.Pods)
	}
	return out
}

func TestWeightedNodePools(t *testing.T) {
	for name, tc := range map[string]struct {
		pools []*karpv1.NodePool
		pod   []func(*corev1.Pod)
		want  string // the NodePool of the pod's NodeClaim
	}{
		"the heaviest pool":             {pools: []*karpv1.NodePool{weighted("low", 10), weighted("high", 90), weighted("mid", 50)}, want: "high"},
		"an unweighted pool comes last": {pools: []*karpv1.NodePool{nodePool("none"), weighted("some", 1)}, want: "some"},
		"equal weights go by name":      {pools: []*karpv1.NodePool{weighted("b", 10), weighted("a", 10)}, want: "a"},
		"the heaviest pool the pod can use": {pools: []*karpv1.NodePool{
			weighted("high", 90, withRequirements(requirement(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "arm64"))), weighted("low", 10)},
			pod: []func(*corev1.Pod){selector(corev1.LabelArchStable, "amd64")}, want: "low"},
		"a heavy pool the pod does not tolerate": {pools: []*karpv1.NodePool{weighted("gpu", 90, tainted("gpu", "true", corev1.TaintEffectNoSchedule)), weighted("general", 10)},
			want: "general"},
		"a heavy pool the pod tolerates": {pools: []*karpv1.NodePool{weighted("gpu", 90, tainted("gpu", "true", corev1.TaintEffectNoSchedule)), weighted("general", 10)},
			pod: []func(*corev1.Pod){tolerating("gpu", "true", corev1.TaintEffectNoSchedule)}, want: "gpu"},
		"a heavy pool at its limit": {pools: []*karpv1.NodePool{weighted("capped", 90, limited("cpu", "0")), weighted("open", 10)}, want: "open"},
		"a heavy pool whose types are too small": {pools: []*karpv1.NodePool{
			weighted("small", 90, withRequirements(requirement(karpv1.LabelInstanceSize, corev1.NodeSelectorOpIn, "large"))), weighted("any", 10)},
			pod: []func(*corev1.Pod){func(p *corev1.Pod) {
				p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("3")
			}}, want: "any"},
		"a pod that selects a pool by name": {pools: []*karpv1.NodePool{weighted("high", 90), weighted("low", 10)},
			pod: []func(*corev1.Pod){selector(karpv1.NodePoolLabelKey, "low")}, want: "low"},
		"a pool that is cheaper but lighter loses": {pools: []*karpv1.NodePool{
			weighted("dear", 90, withRequirements(requirement(karpv1.LabelInstanceFamily, corev1.NodeSelectorOpIn, "r5"))), weighted("cheap", 10)}, want: "dear"},
	} {
		t.Run(name, func(t *testing.T) {
			r := solve(t, &Input{Pods: []*corev1.Pod{pod("p", "1", "1Gi", tc.pod...)}, NodePools: pools(tc.pools...)})
			expectPlaced(t, r)
			if got := r.NodeClaims[0].NodePool; got != tc.want {
				t.Fatalf("NodePool %s, want %s", got, tc.want)
			}
		})
	}
	t.Run("a heavy pool's limit spills the rest to the next", func(t *testing.T) {
		r := solve(t, &Input{Pods: pods("w", 4, "1500m", "1Gi", hostPort(80)), NodePools: pools(weighted("capped", 90, limited("cpu", "4")), weighted("open", 10))})
		expectPlaced(t, r)
		if got := byPool(r); got["capped"] != 2 || got["open"] != 2 {
			t.Fatalf("pods per pool %v, want 2 in capped (2 nodes of 2 cpu) and 2 in open", got)
		}
	})
}

func TestNodePoolLimits(t *testing.T) {
	for name, tc := range map[string]struct {
		limits []string
		usage  corev1.ResourceList
		n      int
		cpu    string
		// placed pods, and a substring of the first pending pod's reason.
		placed  int
		because string
	}{
		"under a cpu limit":                       {limits: []string{"cpu", "10"}, n: 3, cpu: "1", placed: 3},
		"a cpu limit already used":                {limits: []string{"cpu", "10"}, usage: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10")}, n: 1, cpu: "1", because: "limit cpu would be exceeded"},
		"a memory limit":                          {limits: []string{"memory", "8Gi"}, usage: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("6Gi")}, n: 1, cpu: "1", because: "limit memory would be exceeded"},
		"a memory limit with room":                {limits: []string{"memory", "64Gi"}, n: 2, cpu: "1", placed: 2},
		"a nodes limit of zero":                   {limits: []string{"nodes", "0"}, n: 1, cpu: "1", because: "limit nodes reached"},
		"a limit on a resource the types lack":    {limits: []string{"nvidia.com/gpu", "0"}, n: 2, cpu: "1", placed: 2},
		"a pods limit":                            {limits: []string{"pods", "1000"}, n: 2, cpu: "1", placed: 2},
		"a limit counts the node, not the pod":    {limits: []string{"cpu", "3"}, n: 2, cpu: "1500m", placed: 1, because: "limit cpu would be exceeded"},
		"a limit a small type still fits":         {limits: []string{"cpu", "2"}, n: 1, cpu: "1", placed: 1},
		"several pods stop at the limit together": {limits: []string{"cpu", "4"}, n: 10, cpu: "700m", placed: 5, because: "limit cpu"},
	} {
		t.Run(name, func(t *testing.T) {
			np := &NodePool{NodePool: nodePool("default", limited(tc.limits...)), Usage: tc.usage, InstanceTypes: testCatalog()}
			r := solve(t, &Input{Pods: pods("w", tc.n, tc.cpu, "512Mi"), NodePools: []*NodePool{np}})
			placed := 0
			for _, c := range r.NodeClaims {
				placed += len(c.Pods)
			}
			if placed != tc.placed {
				t.Fatalf("%d pods placed, want %d (%d NodeClaims, pending %v)", placed, tc.placed, len(r.NodeClaims), r.Unschedulable)
			}
			if tc.because != "" {
				expectUnschedulable(t, r, tc.because)
			}
			// The NodeClaims launched never exceed the limit with the usage.
			for k, limit := range np.NodePool.Spec.Limits {
				total := tc.usage[k].DeepCopy()
				for _, c := range r.NodeClaims {
					if q, ok := c.InstanceType.Capacity[k]; ok {
						total.Add(q)
					}
					if k == "nodes" {
						total.Add(resource.MustParse("1"))
					}
				}
				if total.Cmp(limit) > 0 {
					t.Errorf("%s: %s launched and used against a limit of %s", k, total.String(), limit.String())
				}
			}
		})
	}
}

func TestTaintsAndTolerations(t *testing.T) {
	for name, tc := range map[string]struct {
		np     []func(*karpv1.NodePool)
		pod    []func(*corev1.Pod)
		placed bool
	}{
		"NoSchedule not tolerated":    {np: []func(*karpv1.NodePool){tainted("a", "1", corev1.TaintEffectNoSchedule)}},
		"NoExecute not tolerated":     {np: []func(*karpv1.NodePool){tainted("a", "1", corev1.TaintEffectNoExecute)}},
		"PreferNoSchedule is allowed": {np: []func(*karpv1.NodePool){tainted("a", "1", corev1.TaintEffectPreferNoSchedule)}, placed: true},
		"tolerated by key and value":  {np: []func(*karpv1.NodePool){tainted("a", "1", corev1.TaintEffectNoSchedule)}, pod: []func(*corev1.Pod){tolerating("a", "1", corev1.TaintEffectNoSchedule)}, placed: true},
		"tolerated by Exists":         {np: []func(*karpv1.NodePool){tainted("a", "1", corev1.TaintEffectNoSchedule)}, pod: []func(*corev1.Pod){tolerating("a", "", corev1.TaintEffectNoSchedule)}, placed: true},
		"tolerated for every effect":  {np: []func(*karpv1.NodePool){tainted("a", "1", corev1.TaintEffectNoExecute)}, pod: []func(*corev1.Pod){tolerating("a", "1", "")}, placed: true},
		"a wrong value":               {np: []func(*karpv1.NodePool){tainted("a", "1", corev1.TaintEffectNoSchedule)}, pod: []func(*corev1.Pod){tolerating("a", "2", corev1.TaintEffectNoSchedule)}},
		"a wrong effect":              {np: []func(*karpv1.NodePool){tainted("a", "1", corev1.TaintEffectNoSchedule)}, pod: []func(*corev1.Pod){tolerating("a", "1", corev1.TaintEffectNoExecute)}},
		"tolerate everything": {np: []func(*karpv1.NodePool){tainted("a", "1", corev1.TaintEffectNoSchedule), tainted("b", "", corev1.TaintEffectNoExecute)},
			pod: []func(*corev1.Pod){func(p *corev1.Pod) { p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}} }}, placed: true},
		"one of two taints tolerated": {np: []func(*karpv1.NodePool){tainted("a", "1", corev1.TaintEffectNoSchedule), tainted("b", "1", corev1.TaintEffectNoSchedule)},
			pod: []func(*corev1.Pod){tolerating("a", "1", corev1.TaintEffectNoSchedule)}},
		"startup taints need no toleration": {np: []func(*karpv1.NodePool){func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.StartupTaints = []corev1.Taint{{Key: "cni-not-ready", Effect: corev1.TaintEffectNoSchedule}}
		}}, placed: true},
	} {
		t.Run(name, func(t *testing.T) {
			r := solve(t, &Input{Pods: []*corev1.Pod{pod("p", "1", "1Gi", tc.pod...)}, NodePools: pools(nodePool("default", tc.np...))})
			if tc.placed {
				expectPlaced(t, r)
				return
			}
			expectUnschedulable(t, r, "not tolerated")
		})
	}
	t.Run("a PreferNoSchedule pool is the last resort", func(t *testing.T) {
		r := solve(t, &Input{Pods: []*corev1.Pod{pod("p", "1", "1Gi")},
			NodePools: pools(weighted("soft", 90, tainted("spot", "", corev1.TaintEffectPreferNoSchedule)), weighted("plain", 10))})
		expectPlaced(t, r)
		if r.NodeClaims[0].NodePool != "plain" {
			t.Fatalf("NodePool %s, want plain: PreferNoSchedule repels while another pool takes the pod", r.NodeClaims[0].NodePool)
		}
	})
}

func TestExistingNodes(t *testing.T) {
	t.Run("pods fill an existing node before a new one", func(t *testing.T) {
		r := solve(t, &Input{Pods: pods("w", 3, "1", "1Gi"), NodePools: pools(nodePool("default")), Nodes: []*scheduling.Node{node("n1", "z-a", "4", "8Gi")}})
		expectPlaced(t, r)
		if len(r.Existing["n1"]) != 3 || len(r.NodeClaims) != 0 {
			t.Fatalf("want all three on n1, got %v and %d NodeClaims", r.Existing, len(r.NodeClaims))
		}
	})
	t.Run("the pods already on a node use its room", func(t *testing.T) {
		busy := node("n1", "z-a", "4", "8Gi", func(n *scheduling.Node) { n.Pods = []*corev1.Pod{pod("old", "3", "1Gi")} })
		r := solve(t, &Input{Pods: pods("w", 2, "1", "1Gi"), NodePools: pools(nodePool("default")), Nodes: []*scheduling.Node{busy}})
		expectPlaced(t, r)
		if len(r.Existing["n1"]) != 1 || len(r.NodeClaims) != 1 {
			t.Fatalf("n1 has room for one; got %v and %d NodeClaims", r.Existing, len(r.NodeClaims))
		}
	})
	t.Run("a node's labels must satisfy the pod", func(t *testing.T) {
		r := solve(t, &Input{Pods: []*corev1.Pod{pod("w", "1", "1Gi", selector(karpv1.LabelTopologyZone, "z-b"))}, NodePools: pools(nodePool("default")),
			Nodes: []*scheduling.Node{node("n1", "z-a", "4", "8Gi")}})
		expectPlaced(t, r)
		if len(r.Existing) != 0 {
			t.Fatal("a z-b pod on a z-a node")
		}
	})
	t.Run("a node's taints must be tolerated", func(t *testing.T) {
		n := node("n1", "z-a", "4", "8Gi", func(n *scheduling.Node) {
			n.Taints = []corev1.Taint{{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}}
		})
		r := solve(t, &Input{Pods: []*corev1.Pod{pod("w", "1", "1Gi", tolerating("dedicated", "db", corev1.TaintEffectNoSchedule))}, NodePools: pools(nodePool("default")), Nodes: []*scheduling.Node{n}})
		if len(r.Existing["n1"]) != 1 {
			t.Fatalf("a tolerating pod goes on n1, got %v", r.Existing)
		}
	})
	t.Run("a node's pods limit counts", func(t *testing.T) {
		n := node("n1", "z-a", "64", "256Gi", func(n *scheduling.Node) { n.Allocatable[corev1.ResourcePods] = resource.MustParse("2") })
		r := solve(t, &Input{Pods: pods("w", 3, "10m", "10Mi"), NodePools: pools(nodePool("default")), Nodes: []*scheduling.Node{n}})
		expectPlaced(t, r)
		if len(r.Existing["n1"]) != 2 {
			t.Fatalf("n1 takes 2 pods, got %d", len(r.Existing["n1"]))
		}
	})
	t.Run("an extended resource a node has", func(t *testing.T) {
		n := node("gpu", "z-a", "8", "32Gi", func(n *scheduling.Node) { n.Allocatable["nvidia.com/gpu"] = resource.MustParse("2") })
		gpu := func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = resource.MustParse("1")
		}
		r := solve(t, &Input{Pods: pods("train", 3, "1", "1Gi", gpu), NodePools: pools(nodePool("default")), Nodes: []*scheduling.Node{n}})
		expectPlaced(t, r)
		if len(r.Existing["gpu"]) != 2 || len(r.NodeClaims) != 1 {
			t.Fatalf("2 on the gpu node, 1 new: got %v and %d NodeClaims", r.Existing, len(r.NodeClaims))
		}
	})
	t.Run("in-flight NodeClaims take pods before new ones and after ready nodes", func(t *testing.T) {
		ready := node("ready", "z-a", "2", "4Gi")
		inflight := node("inflight", "z-a", "2", "4Gi", func(n *scheduling.Node) { n.InFlight = true })
		r := solve(t, &Input{Pods: pods("w", 5, "900m", "512Mi"), NodePools: pools(nodePool("default")), Nodes: []*scheduling.Node{inflight, ready}})
		expectPlaced(t, r)
		if len(r.Existing["ready"]) != 2 || len(r.Existing["inflight"]) != 2 || len(r.NodeClaims) != 1 {
			t.Fatalf("2 on ready, 2 on inflight, 1 new: got %v and %d NodeClaims", r.Existing, len(r.NodeClaims))
		}
	})
	t.Run("host ports in use on a node", func(t *testing.T) {
		n := node("n1", "z-a", "8", "8Gi", func(n *scheduling.Node) { n.Pods = []*corev1.Pod{pod("old", "100m", "64Mi", hostPort(9100))} })
		r := solve(t, &Input{Pods: pods("exporter", 1, "100m", "64Mi", hostPort(9100)), NodePools: pools(nodePool("default")), Nodes: []*scheduling.Node{n}})
		expectPlaced(t, r)
		if len(r.Existing) != 0 {
			t.Fatal("host port 9100 is taken on n1")
		}
		r = solve(t, &Input{Pods: pods("other", 1, "100m", "64Mi", hostPort(9200)), NodePools: pools(nodePool("default")), Nodes: []*scheduling.Node{n}})
		if len(r.Existing["n1"]) != 1 {
			t.Fatal("another host port fits on n1")
		}
	})
}

func TestHostPortConflicts(t *testing.T) {
	port := func(proto corev1.Protocol, ip string, p int32) func(*corev1.Pod) {
		return func(pd *corev1.Pod) {
			pd.Spec.Containers[0].Ports = append(pd.Spec.Containers[0].Ports, corev1.ContainerPort{ContainerPort: p, HostPort: p, Protocol: proto, HostIP: ip})
		}
	}
	for name, tc := range map[string]struct {
		a, b  func(*corev1.Pod)
		share bool
	}{
		"same port, TCP":                    {a: port("", "", 80), b: port("", "", 80)},
		"same port, TCP and UDP":            {a: port(corev1.ProtocolTCP, "", 53), b: port(corev1.ProtocolUDP, "", 53), share: true},
		"different ports":                   {a: port("", "", 80), b: port("", "", 81), share: true},
		"same port on two IPs":              {a: port("", "10.0.0.1", 80), b: port("", "10.0.0.2", 80), share: true},
		"one on every IP, one on a single":  {a: port("", "", 80), b: port("", "10.0.0.2", 80)},
		"a container port without hostPort": {a: func(p *corev1.Pod) { p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80}} }, b: port("", "", 80), share: true},
	} {
		t.Run(name, func(t *testing.T) {
			r := solve(t, &Input{Pods: []*corev1.Pod{pod("a", "100m", "64Mi", tc.a), pod("b", "100m", "64Mi", tc.b)}, NodePools: pools(nodePool("default"))})
			expectPlaced(t, r)
			if shared := len(r.NodeClaims) == 1; shared != tc.share {
				t.Fatalf("%d NodeClaims; sharing a node should be %v", len(r.NodeClaims), tc.share)
			}
		})
	}
}

func TestDaemonSetOverheadCases(t *testing.T) {
	withOverhead := func(cpu, mem string) *NodePool {
		return &NodePool{NodePool: nodePool("default"), InstanceTypes: testCatalog(),
			DaemonSetOverhead: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}
	}
	t.Run("overhead that fills the smallest types moves the pod up a size", func(t *testing.T) {
		r := solve(t, &Input{Pods: []*corev1.Pod{pod("w", "1", "1Gi")}, NodePools: []*NodePool{withOverhead("1500m", "256Mi")}})
		expectPlaced(t, r)
		if cpu := r.NodeClaims[0].InstanceType.Capacity[corev1.ResourceCPU]; cpu.Value() < 4 {
			t.Fatalf("1 cpu and 1.5 cpu of DaemonSets on %s", r.NodeClaims[0].InstanceType.Name)
		}
	})
	t.Run("overhead is counted once per node, not per pod", func(t *testing.T) {
		r := solve(t, &Input{Pods: pods("w", 4, "500m", "512Mi"), NodePools: []*NodePool{withOverhead("1", "1Gi")}})
		expectPlaced(t, r)
		for _, c := range r.NodeClaims {
			want := int64(1000 + 500*len(c.Pods))
			if got := c.Requests.Cpu().MilliValue(); got != want {
				t.Fatalf("%d pods: requests %dm, want %dm (the DaemonSets' 1 cpu once)", len(c.Pods), got, want)
			}
		}
	})
	t.Run("overhead no type can hold leaves the pool out", func(t *testing.T) {
		r := solve(t, &Input{Pods: []*corev1.Pod{pod("w", "100m", "64Mi")}, NodePools: []*NodePool{withOverhead("100", "1Gi")}})
		expectUnschedulable(t, r, "no instance type")
	})
	t.Run("each pool's own overhead", func(t *testing.T) {
		heavy := &NodePool{NodePool: weighted("heavy", 90), InstanceTypes: testCatalog(),
			DaemonSetOverhead: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("15")}}
		light := &NodePool{NodePool: weighted("light", 10), InstanceTypes: testCatalog()}
		r := solve(t, &Input{Pods: []*corev1.Pod{pod("w", "2", "1Gi")}, NodePools: []*NodePool{heavy, light}})
		expectPlaced(t, r)
		if r.NodeClaims[0].NodePool != "light" {
			t.Fatalf("heavy's DaemonSets leave no type room for 2 cpu; got %s", r.NodeClaims[0].NodePool)
		}
	})
}

// Upstream's "Binpacking": pods of mixed sizes on as few, as cheap, nodes as fit them.
func TestBinpacking(t *testing.T) {
	for name, tc := range map[string]struct {
		pods      []*corev1.Pod
		maxNodes  int
		wantTypes string // sorted type names, joined by ","; "" not checked
	}{
		"small pods share one small node":             {pods: pods("s", 3, "500m", "512Mi"), maxNodes: 1, wantTypes: "m6g.large"},
		"a pod larger than the small types":           {pods: pods("l", 1, "3", "4Gi"), maxNodes: 1, wantTypes: "m5.xlarge"},
		"many small pods pack onto few nodes":         {pods: pods("s", 40, "100m", "128Mi"), maxNodes: 3},
		"a memory-heavy pod picks a memory type":      {pods: pods("m", 1, "500m", "12Gi"), maxNodes: 1, wantTypes: "r5.large"},
		"big and small pods fill gaps":                {pods: append(pods("b", 2, "3", "6Gi"), pods("s", 4, "400m", "512Mi")...), maxNodes: 3},
		"four nodes of 4 cpu cost one of 16":          {pods: pods("q", 4, "3500m", "14Gi"), maxNodes: 4},
		"no pod, no node":                             {pods: nil, maxNodes: 0},
		"a pod asking for nothing still needs a node": {pods: []*corev1.Pod{pod("z", "0", "0")}, maxNodes: 1},
	} {
		t.Run(name, func(t *testing.T) {
			r := solve(t, &Input{Pods: tc.pods, NodePools: pools(nodePool("default"))})
			expectPlaced(t, r)
			if len(r.NodeClaims) > tc.maxNodes {
				t.Fatalf("%d NodeClaims, want at most %d", len(r.NodeClaims), tc.maxNodes)
			}
			var types []string
			for _, c := range r.NodeClaims {
				types = append(types, c.InstanceType.Name)
				// Every NodeClaim's type holds its pods.
				alloc := c.InstanceType.Allocatable()
				for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods} {
					have, want := alloc[res], c.Requests[res]
					if have.Cmp(want) < 0 {
						t.Errorf("%s holds %s %s, its pods ask %s", c.InstanceType.Name, res, have.String(), want.String())
					}
				}
			}
			if tc.wantTypes != "" && strings.Join(slices.Sorted(slices.Values(types)), ",") != tc.wantTypes {
				t.Fatalf("types %v, want %s", types, tc.wantTypes)
			}
		})
	}
}

// Unavailable offerings (a capacity error marked them) are never chosen; a type with none
// left is not offered.
func TestUnavailableOfferings(t *testing.T) {
	types := testCatalog()
	for _, it := range types {
		if it.Name == "m6g.large" {
			for i := range it.Offerings {
				it.Offerings[i].Available = it.Offerings[i].Zone == "z-c"
			}
		}
		if it.Name == "c5.large" {
			for i := range it.Offerings {
				it.Offerings[i].Available = false
			}
		}
	}
	r := solve(t, &Input{Pods: []*corev1.Pod{pod("w", "1", "1Gi")}, NodePools: []*NodePool{{NodePool: nodePool("default"), InstanceTypes: types}}})
	expectPlaced(t, r)
	c := r.NodeClaims[0]
	if c.InstanceType.Name != "m6g.large" || c.Offering.Zone != "z-c" {
		t.Fatalf("want m6g.large in z-c, its only available zone; got %s in %s", c.InstanceType.Name, c.Offering.Zone)
	}
	for _, it := range c.InstanceTypes {
		if it.Name == "c5.large" {
			t.Fatal("c5.large has no available offering, yet is offered")
		}
	}
	// A pod that needs z-a cannot have m6g.large there.
	r = solve(t, &Input{Pods: []*corev1.Pod{pod("w", "1", "1Gi", selector(karpv1.LabelTopologyZone, "z-a"))}, NodePools: []*NodePool{{NodePool: nodePool("default"), InstanceTypes: types}}})
	expectPlaced(t, r)
	if r.NodeClaims[0].InstanceType.Name == "m6g.large" || r.NodeClaims[0].InstanceType.Name == "c5.large" {
		t.Fatalf("%s has no available offering in z-a", r.NodeClaims[0].InstanceType.Name)
	}
}

// A NodePool whose template has no types at all says so; with several pools the reason names
// each.
func TestUnschedulableReasonsNameEachPool(t *testing.T) {
	none := &NodePool{NodePool: nodePool("empty"), InstanceTypes: []*cloudprovider.InstanceType{}}
	arm := &NodePool{NodePool: nodePool("arm", withRequirements(requirement(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "arm64"))), InstanceTypes: testCatalog()}
	r := solve(t, &Input{Pods: []*corev1.Pod{pod("w", "1", "1Gi", selector(corev1.LabelArchStable, "amd64"))}, NodePools: []*NodePool{none, arm}})
	if len(r.Unschedulable) != 1 {
		t.Fatalf("want the pod pending, got %d NodeClaims", len(r.NodeClaims))
	}
	reason := r.Unschedulable[0].Reason
	for _, want := range []string{"nodepool empty", "nodepool arm", "kubernetes.io/arch"} {
		if !strings.Contains(reason, want) {
			t.Errorf("reason %q does not name %q", reason, want)
		}
	}
	r = solve(t, &Input{Pods: []*corev1.Pod{pod("w", "1", "1Gi")}})
	expectUnschedulable(t, r, "no NodePool")
}

// Many identical pods land on identical NodeClaims: 200 pods of 1 cpu and 2 GiB go two to a
// 2-cpu node at $0.077 (3.85 cents a pod), not sixteen to the 16-cpu one at $0.768 (4.8
// cents), and every NodeClaim is full.
func TestIdenticalPodsFillNodes(t *testing.T) {
	r := solve(t, &Input{Pods: pods("w", 200, "1", "2Gi"), NodePools: pools(nodePool("default"))})
	expectPlaced(t, r)
	for i, c := range r.NodeClaims {
		if c.InstanceType.Name != "m6g.large" || len(c.Pods) != 2 {
			t.Fatalf("NodeClaim %d: %d pods on %s, want 2 on m6g.large", i, len(c.Pods), c.InstanceType.Name)
		}
	}
	if len(r.NodeClaims) != 100 {
		t.Fatalf("%d NodeClaims, want 100", len(r.NodeClaims))
	}
	if got, bound := r.PricePerHour(), r.LowerBoundPerHour; got > bound*1.0001 {
		t.Errorf("$%.3f an hour against a lower bound of $%.3f", got, bound)
	}
}

// A NodeClaim's Hostname never takes an input node's name: a simulation applies one solve's
// NodeClaims as nodes named by their Hostnames and solves again.
func TestHostnamesAvoidExistingNodes(t *testing.T) {
	taken := node("default-nodeclaim-0", "z-a", "100m", "64Mi", func(n *scheduling.Node) { n.Pods = []*corev1.Pod{pod("x", "50m", "32Mi")} })
	alsoTaken := node("other", "z-a", "100m", "64Mi", func(n *scheduling.Node) { n.Labels[corev1.LabelHostname] = "default-nodeclaim-1" })
	r := solve(t, &Input{Pods: pods("w", 3, "1500m", "1Gi", hostPort(80)), NodePools: pools(nodePool("default")), Nodes: []*scheduling.Node{taken, alsoTaken}})
	expectPlaced(t, r)
	seen := map[string]bool{}
	for _, c := range r.NodeClaims {
		if c.Hostname == "default-nodeclaim-0" || c.Hostname == "default-nodeclaim-1" {
			t.Errorf("NodeClaim hostname %s is an existing node's", c.Hostname)
		}
		if seen[c.Hostname] {
			t.Errorf("two NodeClaims named %s", c.Hostname)
		}
		seen[c.Hostname] = true
	}
}

// NodePool usage counts against limits: what the pool's nodes and in-flight NodeClaims use
// (Usage) plus what the solve launches stays within every limit, per resource.
func TestUsageAndLimitsTogether(t *testing.T) {
	for name, tc := range map[string]struct {
		limits []string
		usage  corev1.ResourceList
		pods   int
		want   int // NodeClaims
	}{
		"cpu left for one 2-cpu node":   {limits: []string{"cpu", "10"}, usage: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}, pods: 3, want: 1},
		"memory left for two 8Gi nodes": {limits: []string{"memory", "40Gi"}, usage: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("24Gi")}, pods: 3, want: 2},
		"nodes left for two":            {limits: []string{"nodes", "5"}, usage: corev1.ResourceList{"nodes": resource.MustParse("3")}, pods: 3, want: 2},
		"cpu and nodes, the tighter wins": {limits: []string{"cpu", "100", "nodes", "4"}, usage: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), "nodes": resource.MustParse("3")},
			pods: 3, want: 1},
		"no limit on what is used": {limits: []string{"cpu", "100"}, usage: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Ti")}, pods: 3, want: 3},
	} {
		t.Run(name, func(t *testing.T) {
			np := &NodePool{NodePool: nodePool("default", limited(tc.limits...)), Usage: tc.usage,
				InstanceTypes: []*cloudprovider.InstanceType{itype("m5.large", "amd64", 2, 8, 0.096)}}
			// Each pod fills an m5.large, so each needs a NodeClaim of its own.
			r := solve(t, &Input{Pods: pods("w", tc.pods, "1500m", "2Gi"), NodePools: []*NodePool{np}})
			if len(r.NodeClaims) != tc.want {
				t.Fatalf("%d NodeClaims, want %d (pending %d)", len(r.NodeClaims), tc.want, len(r.Unschedulable))
			}
			if len(r.Unschedulable) != tc.pods-tc.want {
				t.Fatalf("%d pending, want %d", len(r.Unschedulable), tc.pods-tc.want)
			}
		})
	}
}
