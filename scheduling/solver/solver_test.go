package solver

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/scheduling"
)

var zones = []string{"z-a", "z-b", "z-c"}

// itype builds an instance type offered on-demand and spot in every zone.
func itype(name, arch string, cpu, memGi int, od float64, extra ...string) *cloudprovider.InstanceType {
	family, size, _ := strings.Cut(name, ".")
	it := &cloudprovider.InstanceType{
		Name: name,
		Labels: map[string]string{
			karpv1.LabelInstanceType: name, karpv1.LabelArch: arch, karpv1.LabelOS: "linux",
			karpv1.LabelInstanceFamily: family, karpv1.LabelInstanceCategory: family[:1], karpv1.LabelInstanceSize: size,
			karpv1.LabelInstanceCPU: fmt.Sprint(cpu),
		},
		Capacity: corev1.ResourceList{
			corev1.ResourceCPU: *resource.NewQuantity(int64(cpu), resource.DecimalSI), corev1.ResourceMemory: resource.MustParse(fmt.Sprintf("%dGi", memGi)),
			corev1.ResourcePods: resource.MustParse("110"),
		},
	}
	for i := 0; i+1 < len(extra); i += 2 {
		it.Capacity[corev1.ResourceName(extra[i])] = resource.MustParse(extra[i+1])
	}
	for i, z := range zones {
		it.Offerings = append(it.Offerings,
			cloudprovider.Offering{Zone: z, CapacityType: karpv1.CapacityTypeOnDemand, Price: od, Available: true},
			cloudprovider.Offering{Zone: z, CapacityType: karpv1.CapacityTypeSpot, Price: od * (0.3 + 0.01*float64(i)), Available: true})
	}
	return it
}

func testCatalog() []*cloudprovider.InstanceType {
	return []*cloudprovider.InstanceType{
		itype("c5.large", "amd64", 2, 4, 0.085),
		itype("m5.large", "amd64", 2, 8, 0.096),
		itype("m5.xlarge", "amd64", 4, 16, 0.192),
		itype("m5.4xlarge", "amd64", 16, 64, 0.768),
		itype("r5.large", "amd64", 2, 16, 0.126),
		itype("m6g.large", "arm64", 2, 8, 0.077),
		itype("g5.xlarge", "amd64", 4, 16, 1.006, "nvidia.com/gpu", "1"),
	}
}

func nodePool(name string, f ...func(*karpv1.NodePool)) *karpv1.NodePool {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
		NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"},
		Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}}},
	}}}}
	for _, fn := range f {
		fn(np)
	}
	return np
}

func pod(name string, cpu, mem string, f ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": strings.TrimRight(name, "0123456789-")}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}}}}}
	for _, fn := range f {
		fn(p)
	}
	return p
}

func pods(prefix string, n int, cpu, mem string, f ...func(*corev1.Pod)) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range n {
		out = append(out, pod(fmt.Sprintf("%s-%d", prefix, i), cpu, mem, f...))
	}
	return out
}

func solve(t *testing.T, in *Input) *Result {
	t.Helper()
	for _, np := range in.NodePools {
		if np.InstanceTypes == nil {
			np.InstanceTypes = testCatalog()
		}
	}
	r, err := Solve(in)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func pools(nps ...*karpv1.NodePool) []*NodePool {
	var out []*NodePool
	for _, np := range nps {
		out = append(out, &NodePool{NodePool: np})
	}
	return out
}

func expectUnschedulable(t *testing.T, r *Result, want string) {
	t.Helper()
	if len(r.Unschedulable) == 0 {
		t.Fatalf("expected an unschedulable pod (%s), got %d NodeClaims", want, len(r.NodeClaims))
	}
	if !strings.Contains(r.Unschedulable[0].Reason, want) {
		t.Fatalf("reason %q does not mention %q", r.Unschedulable[0].Reason, want)
	}
}

func expectPlaced(t *testing.T, r *Result) {
	t.Helper()
	for _, u := range r.Unschedulable {
		t.Fatalf("pod %s unschedulable: %s", PodKey(u.Pod), u.Reason)
	}
}

func label(c *NodeClaim, key string) string {
	if v, ok := c.InstanceType.Labels[key]; ok {
		return v
	}
	if r, ok := c.Requirements[key]; ok && r.Len() == 1 {
		return r.Values()[0]
	}
	if key == karpv1.LabelTopologyZone {
		return c.Offering.Zone
	}
	return ""
}

func TestResources(t *testing.T) {
	r := solve(t, &Input{Pods: []*corev1.Pod{pod("web", "1", "1Gi")}, NodePools: pools(nodePool("default"))})
	expectPlaced(t, r)
	if len(r.NodeClaims) != 1 || r.NodeClaims[0].InstanceType.Name != "m6g.large" {
		t.Fatalf("want the cheapest type that fits (m6g.large), got %+v", r.NodeClaims[0].InstanceType.Name)
	}
	if n := len(r.NodeClaims[0].InstanceTypes); n < 5 || r.NodeClaims[0].InstanceTypes[0].Name != "m6g.large" {
		t.Errorf("want a flexible list, cheapest first; got %d types", n)
	}
	r = solve(t, &Input{Pods: []*corev1.Pod{pod("huge", "100", "1Gi")}, NodePools: pools(nodePool("default"))})
	expectUnschedulable(t, r, "no instance type fits")
}

func TestExtendedResources(t *testing.T) {
	gpu := func(n string) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = resource.MustParse(n) }
	}
	r := solve(t, &Input{Pods: []*corev1.Pod{pod("train", "1", "1Gi", gpu("1"))}, NodePools: pools(nodePool("default"))})
	expectPlaced(t, r)
	if r.NodeClaims[0].InstanceType.Name != "g5.xlarge" {
		t.Fatalf("got %s", r.NodeClaims[0].InstanceType.Name)
	}
	r = solve(t, &Input{Pods: []*corev1.Pod{pod("train", "1", "1Gi", gpu("8"))}, NodePools: pools(nodePool("default"))})
	expectUnschedulable(t, r, "nvidia.com/gpu")
}

func TestNodeSelectorAndAffinity(t *testing.T) {
	for name, tc := range map[string]struct {
		np      *karpv1.NodePool
		mutate  func(*corev1.Pod)
		want    string // instance type, or "" when the pod must stay pending
		because string
	}{
		"selector arm64": {mutate: func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{karpv1.LabelArch: "arm64"} }, want: "m6g.large"},
		"selector unknown arch": {mutate: func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{karpv1.LabelArch: "s390x"} },
			because: "kubernetes.io/arch In [s390x]"},
		"NotIn family":           {mutate: requireAffinity(karpv1.LabelInstanceFamily, corev1.NodeSelectorOpNotIn, "m6g"), want: "c5.large"},
		"Gt cpu":                 {mutate: requireAffinity(karpv1.LabelInstanceCPU, corev1.NodeSelectorOpGt, "2"), want: "m5.xlarge"},
		"Gt too many":            {mutate: requireAffinity(karpv1.LabelInstanceCPU, corev1.NodeSelectorOpGt, "64"), because: "karpenter.k8s.aws/instance-cpu"},
		"Lt cpu":                 {mutate: requireAffinity(karpv1.LabelInstanceCPU, corev1.NodeSelectorOpLt, "4"), want: "m6g.large"},
		"DoesNotExist gpu label": {mutate: requireAffinity("example.com/gpu", corev1.NodeSelectorOpDoesNotExist), want: "m6g.large"},
		"custom label the NodePool does not set": {mutate: func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"team": "a"} },
			because: "team In [a]"},
		"custom label the NodePool sets": {np: nodePool("default", func(np *karpv1.NodePool) { np.Spec.Template.Labels = map[string]string{"team": "a"} }),
			mutate: func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"team": "a"} }, want: "m6g.large"},
		"custom label the NodePool requires": {np: nodePool("default", func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, karpv1.NodeSelectorRequirementWithMinValues{Key: "team", Operator: corev1.NodeSelectorOpIn, Values: []string{"a", "b"}})
		}), mutate: func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"team": "b"} }, want: "m6g.large"},
		"second ORed term": {mutate: func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
				{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: karpv1.LabelArch, Operator: corev1.NodeSelectorOpIn, Values: []string{"s390x"}}}},
				{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: karpv1.LabelInstanceFamily, Operator: corev1.NodeSelectorOpIn, Values: []string{"r5"}}}},
			}}}}
		}, want: "r5.large"},
		"preference met":     {mutate: prefer(karpv1.LabelInstanceFamily, "c5"), want: "c5.large"},
		"preference relaxed": {mutate: prefer(karpv1.LabelInstanceFamily, "x9"), want: "m6g.large"},
	} {
		t.Run(name, func(t *testing.T) {
			np := tc.np
			if np == nil {
				np = nodePool("default")
			}
			r := solve(t, &Input{Pods: []*corev1.Pod{pod("p", "1", "1Gi", tc.mutate)}, NodePools: pools(np)})
			if tc.want == "" {
				expectUnschedulable(t, r, tc.because)
				return
			}
			expectPlaced(t, r)
			if got := r.NodeClaims[0].InstanceType.Name; got != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func requireAffinity(key string, op corev1.NodeSelectorOperator, values ...string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: op, Values: values}}}}}}}
	}
}

func prefer(key string, values ...string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
			Weight: 10, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}}}}}}}
	}
}

func TestTaints(t *testing.T) {
	tainted := nodePool("gpu", func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}
		np.Spec.Template.Spec.StartupTaints = []corev1.Taint{{Key: "example.com/agent", Effect: corev1.TaintEffectNoExecute}}
	})
	r := solve(t, &Input{Pods: []*corev1.Pod{pod("p", "1", "1Gi")}, NodePools: pools(tainted)})
	expectUnschedulable(t, r, "taint dedicated=gpu:NoSchedule not tolerated")
	tolerate := func(p *corev1.Pod) {
		p.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}
	}
	expectPlaced(t, solve(t, &Input{Pods: []*corev1.Pod{pod("p", "1", "1Gi", tolerate)}, NodePools: pools(tainted)}))
	soft := nodePool("soft", func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "spot", Effect: corev1.TaintEffectPreferNoSchedule}}
	})
	expectPlaced(t, solve(t, &Input{Pods: []*corev1.Pod{pod("p", "1", "1Gi")}, NodePools: pools(soft)}))
}

func node(name, zone, cpu, mem string, f ...func(*scheduling.Node)) *scheduling.Node {
	n := &scheduling.Node{Name: name, Labels: map[string]string{corev1.LabelHostname: name, karpv1.LabelTopologyZone: zone, karpv1.LabelArch: "amd64"},
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem), corev1.ResourcePods: resource.MustParse("110")}}
	for _, fn := range f {
		fn(n)
	}
	return n
}

func TestExistingThenInFlightThenNew(t *testing.T) {
	inflight := node("inflight", "z-a", "4", "8Gi", func(n *scheduling.Node) { n.InFlight = true })
	full := node("full", "z-a", "4", "8Gi", func(n *scheduling.Node) { n.Pods = []*corev1.Pod{pod("busy", "3500m", "1Gi")} })
	onNode := node("real", "z-b", "2", "4Gi")
	r := solve(t, &Input{Pods: pods("w", 3, "1", "1Gi"), NodePools: pools(nodePool("default")), Nodes: []*scheduling.Node{inflight, full, onNode}})
	expectPlaced(t, r)
	if len(r.Existing["real"]) != 2 || len(r.Existing["inflight"]) != 1 || len(r.NodeClaims) != 0 {
		t.Fatalf("want 2 pods on the real node, then 1 on the in-flight one; got %v and %d NodeClaims", r.Existing, len(r.NodeClaims))
	}
	tainted := node("tainted", "z-a", "8", "8Gi", func(n *scheduling.Node) { n.Taints = []corev1.Taint{{Key: "x", Effect: corev1.TaintEffectNoSchedule}} })
	r = solve(t, &Input{Pods: pods("w", 1, "1", "1Gi"), NodePools: pools(nodePool("default")), Nodes: []*scheduling.Node{tainted}})
	if len(r.Existing) != 0 || len(r.NodeClaims) != 1 {
		t.Fatalf("a tainted node must not take the pod: %v", r.Existing)
	}
}

// A node that has not reported its allocatable yet, with a pod already bound to it (a
// DaemonSet pod, say), takes no pod and does not stop the solve.
func TestNodeWithoutAllocatable(t *testing.T) {
	bare := node("bare", "z-a", "4", "8Gi", func(n *scheduling.Node) {
		n.Allocatable = nil
		n.Pods = []*corev1.Pod{pod("ds", "100m", "64Mi")}
	})
	r := solve(t, &Input{Pods: pods("w", 1, "1", "1Gi"), NodePools: pools(nodePool("default")), Nodes: []*scheduling.Node{bare}})
	expectPlaced(t, r)
	if len(r.Existing) != 0 || len(r.NodeClaims) != 1 {
		t.Fatalf("want a new NodeClaim, got %v on existing nodes and %d NodeClaims", r.Existing, len(r.NodeClaims))
	}
}

func TestNodePoolWeightsAndLimits(t *testing.T) {
	heavy := nodePool("heavy", func(np *karpv1.NodePool) { np.Spec.Weight = ptr.To[int32](50) })
	r := solve(t, &Input{Pods: pods("w", 1, "1", "1Gi"), NodePools: pools(nodePool("light"), heavy)})
	if r.NodeClaims[0].NodePool != "heavy" {
		t.Fatalf("the heavier NodePool comes first, got %s", r.NodeClaims[0].NodePool)
	}
	limited := &NodePool{NodePool: nodePool("limited", func(np *karpv1.NodePool) {
		np.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("6")}
	}), Usage: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}, InstanceTypes: testCatalog()}
	r = solve(t, &Input{Pods: pods("w", 1, "3", "1Gi"), NodePools: []*NodePool{limited}})
	expectUnschedulable(t, r, "limit cpu would be exceeded")
	r = solve(t, &Input{Pods: pods("w", 1, "1", "1Gi"), NodePools: []*NodePool{limited}})
	expectPlaced(t, r)
	// Usage of resources without a limit does not count against the NodePool.
	used := &NodePool{NodePool: nodePool("used", func(np *karpv1.NodePool) {
		np.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("100")}
	}), Usage: corev1.ResourceList{"nodes": resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("64Gi")}, InstanceTypes: testCatalog()}
	expectPlaced(t, solve(t, &Input{Pods: pods("w", 1, "1", "1Gi"), NodePools: []*NodePool{used}}))
	// Limits count only the resources they name: several NodeClaims fit under a cpu limit.
	roomy := &NodePool{NodePool: nodePool("roomy", func(np *karpv1.NodePool) {
		np.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("8")}
	}), InstanceTypes: testCatalog()}
	r = solve(t, &Input{Pods: pods("w", 3, "1500m", "1Gi", hostPort(80)), NodePools: []*NodePool{roomy}})
	if len(r.NodeClaims) != 3 || len(r.Unschedulable) != 0 {
		t.Fatalf("3 nodes of 2 cpu fit a limit of 8 cpu: %d NodeClaims, %+v", len(r.NodeClaims), r.Unschedulable)
	}
	r = solve(t, &Input{Pods: pods("w", 5, "1500m", "1Gi", hostPort(80)), NodePools: []*NodePool{roomy}})
	if len(r.NodeClaims) != 4 || len(r.Unschedulable) != 1 || !strings.Contains(r.Unschedulable[0].Reason, "limit cpu would be exceeded") {
		t.Fatalf("the fifth 2-cpu node would pass the 8 cpu limit: %d NodeClaims, %+v", len(r.NodeClaims), r.Unschedulable)
	}
	nodes := &NodePool{NodePool: nodePool("nodes", func(np *karpv1.NodePool) {
		np.Spec.Limits = karpv1.Limits{"nodes": resource.MustParse("1")}
	}), InstanceTypes: testCatalog()}
	r = solve(t, &Input{Pods: pods("w", 2, "1500m", "1Gi", hostPort(8080)), NodePools: []*NodePool{nodes}})
	if len(r.NodeClaims) != 1 || len(r.Unschedulable) != 1 || !strings.Contains(r.Unschedulable[0].Reason, "limit nodes reached") {
		t.Fatalf("the nodes limit must stop the second NodeClaim: %d claims, %+v", len(r.NodeClaims), r.Unschedulable)
	}
}

func hostPort(port int32) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: port, HostPort: port}}
	}
}

func TestCapacityTypesAndOfferings(t *testing.T) {
	spot := nodePool("spot", func(np *karpv1.NodePool) { np.Spec.Template.Spec.Requirements[0].Values = []string{"spot"} })
	r := solve(t, &Input{Pods: pods("w", 1, "1", "1Gi"), NodePools: pools(spot)})
	if r.NodeClaims[0].Offering.CapacityType != "spot" || r.NodeClaims[0].Offering.Zone != "z-a" {
		t.Fatalf("want the cheapest spot offering, got %+v", r.NodeClaims[0].Offering)
	}
	types := testCatalog()
	for _, it := range types {
		for i := range it.Offerings {
			if it.Offerings[i].CapacityType == "spot" {
				it.Offerings[i].Available = false
			}
		}
	}
	r = solve(t, &Input{Pods: pods("w", 1, "1", "1Gi"), NodePools: []*NodePool{{NodePool: spot, InstanceTypes: types}}})
	expectUnschedulable(t, r, "no instance type of its")
}

func TestMinValues(t *testing.T) {
	flexible := func(n int) *karpv1.NodePool {
		return nodePool("flex", func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements,
				karpv1.NodeSelectorRequirementWithMinValues{Key: karpv1.LabelInstanceFamily, Operator: corev1.NodeSelectorOpExists, MinValues: ptr.To(n)})
		})
	}
	r := solve(t, &Input{Pods: pods("w", 1, "13", "10Gi"), NodePools: pools(flexible(2))})
	expectUnschedulable(t, r, "minValues 2 on karpenter.k8s.aws/instance-family")
	r = solve(t, &Input{Pods: pods("w", 1, "1", "1Gi"), NodePools: pools(flexible(4))})
	expectPlaced(t, r)
}

func spreadOn(key string, skew int32) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: skew, TopologyKey: key, WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": p.Labels["app"]}}}}
	}
}

func TestTopologySpread(t *testing.T) {
	r := solve(t, &Input{Pods: pods("web", 6, "100m", "128Mi", spreadOn(karpv1.LabelTopologyZone, 1)), NodePools: pools(nodePool("default"))})
	expectPlaced(t, r)
	perZone := map[string]int{}
	for _, c := range r.NodeClaims {
		perZone[label(c, karpv1.LabelTopologyZone)] += len(c.Pods)
	}
	if !reflect.DeepEqual(perZone, map[string]int{"z-a": 2, "z-b": 2, "z-c": 2}) {
		t.Fatalf("want 2 pods per zone, got %v", perZone)
	}
	// A NodePool limited to one zone cannot keep the skew once existing pods sit elsewhere.
	oneZone := nodePool("one", func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, karpv1.NodeSelectorRequirementWithMinValues{Key: karpv1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"z-a"}})
	})
	full := func(name, zone string) *scheduling.Node {
		return node(name, zone, "100m", "128Mi", func(n *scheduling.Node) {
			n.Pods = []*corev1.Pod{pod("existing-"+zone, "100m", "128Mi", func(p *corev1.Pod) { p.Labels["app"] = "web" })}
		})
	}
	r = solve(t, &Input{Pods: pods("web", 3, "100m", "128Mi", spreadOn(karpv1.LabelTopologyZone, 1)), NodePools: pools(oneZone), Nodes: []*scheduling.Node{full("b", "z-b"), full("c", "z-c")}})
	if len(r.NodeClaims) != 1 || len(r.NodeClaims[0].Pods) != 2 {
		t.Fatalf("zone a can take 2 pods within maxSkew 1 of b and c, got %d NodeClaims", len(r.NodeClaims))
	}
	expectUnschedulable(t, r, "topology spread on topology.kubernetes.io/zone")

	r = solve(t, &Input{Pods: pods("web", 3, "100m", "128Mi", spreadOn(corev1.LabelHostname, 1)), NodePools: pools(nodePool("default"))})
	if len(r.NodeClaims) != 3 {
		t.Fatalf("hostname spread with maxSkew 1: want 3 NodeClaims, got %d", len(r.NodeClaims))
	}
}

func podAntiAffinity(key string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": p.Labels["app"]}}}}}}
	}
}

func podAffinity(key string, labels map[string]string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: labels}}}}}
	}
}

func TestPodAffinityAndAntiAffinity(t *testing.T) {
	r := solve(t, &Input{Pods: pods("db", 3, "100m", "128Mi", podAntiAffinity(corev1.LabelHostname)), NodePools: pools(nodePool("default")),
		Nodes: []*scheduling.Node{node("n1", "z-a", "8", "8Gi", func(n *scheduling.Node) { n.Pods = []*corev1.Pod{pod("db-9", "100m", "128Mi")} })}})
	expectPlaced(t, r)
	if len(r.Existing) != 0 || len(r.NodeClaims) != 3 {
		t.Fatalf("hostname anti-affinity: want 3 new nodes and none on n1 (a db is there), got %d and %v", len(r.NodeClaims), r.Existing)
	}
	// Zone affinity to a database in zone b.
	dbNode := node("db", "z-b", "1", "1Gi", func(n *scheduling.Node) { n.Pods = []*corev1.Pod{pod("postgres", "500m", "512Mi")} })
	r = solve(t, &Input{Pods: pods("api", 2, "1", "1Gi", podAffinity(karpv1.LabelTopologyZone, map[string]string{"app": "postgres"})), NodePools: pools(nodePool("default")), Nodes: []*scheduling.Node{dbNode}})
	expectPlaced(t, r)
	if z := label(r.NodeClaims[0], karpv1.LabelTopologyZone); z != "z-b" {
		t.Fatalf("want zone z-b, got %s", z)
	}
	r = solve(t, &Input{Pods: pods("api", 1, "1", "1Gi", podAffinity(karpv1.LabelTopologyZone, map[string]string{"app": "redis"})), NodePools: pools(nodePool("default"))})
	expectUnschedulable(t, r, "pod affinity on topology.kubernetes.io/zone")
	// The first pod of a self-affine group may go anywhere; the rest follow it.
	r = solve(t, &Input{Pods: pods("cache", 3, "1", "1Gi", podAffinity(karpv1.LabelTopologyZone, map[string]string{"app": "cache"})), NodePools: pools(nodePool("default"))})
	expectPlaced(t, r)
	zonesUsed := map[string]bool{}
	for _, c := range r.NodeClaims {
		zonesUsed[label(c, karpv1.LabelTopologyZone)] = true
	}
	if len(zonesUsed) != 1 {
		t.Fatalf("self-affine pods must share a zone, got %v", zonesUsed)
	}
}

func TestHostPortsAndVolumes(t *testing.T) {
	r := solve(t, &Input{Pods: pods("proxy", 2, "100m", "128Mi", hostPort(443)), NodePools: pools(nodePool("default"))})
	if len(r.NodeClaims) != 2 {
		t.Fatalf("two pods on host port 443 need two nodes, got %d", len(r.NodeClaims))
	}
	used := node("n1", "z-a", "8", "8Gi", func(n *scheduling.Node) { n.Pods = []*corev1.Pod{pod("other", "100m", "128Mi", hostPort(443))} })
	r = solve(t, &Input{Pods: pods("proxy", 1, "100m", "128Mi", hostPort(443)), NodePools: pools(nodePool("default")), Nodes: []*scheduling.Node{used}})
	if len(r.Existing) != 0 {
		t.Fatalf("host port in use on n1, yet placed there")
	}
	p := pod("pg-0", "1", "1Gi")
	r = solve(t, &Input{Pods: []*corev1.Pod{p}, NodePools: pools(nodePool("default")),
		VolumeRequirements: map[string][]corev1.NodeSelectorRequirement{PodKey(p): {{Key: karpv1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"z-c"}}}}})
	if z := label(r.NodeClaims[0], karpv1.LabelTopologyZone); z != "z-c" {
		t.Fatalf("the pod's volume is in z-c, node in %s", z)
	}
}

func TestDaemonSetOverhead(t *testing.T) {
	np := &NodePool{NodePool: nodePool("default"), InstanceTypes: testCatalog(), DaemonSetOverhead: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")}}
	r := solve(t, &Input{Pods: []*corev1.Pod{pod("w", "1", "1Gi")}, NodePools: []*NodePool{np}})
	if c := r.NodeClaims[0]; c.Requests.Cpu().MilliValue() != 2500 || c.InstanceType.Labels[karpv1.LabelInstanceCPU] == "2" {
		t.Fatalf("daemon overhead must be counted: requests %s on %s", c.Requests.Cpu(), c.InstanceType.Name)
	}
}

type denyFamily struct{ family string }

func (d denyFamily) Constraints(p *corev1.Pod, _ string) *Constraints {
	if p.Namespace != "team-a" {
		return nil
	}
	return &Constraints{
		Requirements:  []corev1.NodeSelectorRequirement{{Key: karpv1.LabelInstanceFamily, Operator: corev1.NodeSelectorOpNotIn, Values: []string{d.family}}},
		AllowOffering: func(_ *cloudprovider.InstanceType, o cloudprovider.Offering) bool { return o.Price < 0.09 },
		Source:        "CapacityBudget team-a/default",
	}
}

func TestPolicyHook(t *testing.T) {
	p := pod("w", "1", "1Gi", func(p *corev1.Pod) { p.Namespace = "team-a" })
	r := solve(t, &Input{Pods: []*corev1.Pod{p}, NodePools: pools(nodePool("default")), Policy: denyFamily{"m6g"}})
	expectPlaced(t, r)
	if got := r.NodeClaims[0].InstanceType.Name; got != "c5.large" {
		t.Fatalf("policy denies m6g and prices above $0.09: want c5.large, got %s", got)
	}
	big := pod("big", "3", "1Gi", func(p *corev1.Pod) { p.Namespace = "team-a" })
	r = solve(t, &Input{Pods: []*corev1.Pod{big}, NodePools: pools(nodePool("default")), Policy: denyFamily{"m6g"}})
	expectUnschedulable(t, r, "no available offering")
	other := pod("w", "1", "1Gi")
	if r := solve(t, &Input{Pods: []*corev1.Pod{other}, NodePools: pools(nodePool("default")), Policy: denyFamily{"m6g"}}); r.NodeClaims[0].InstanceType.Name != "m6g.large" {
		t.Fatal("the policy is for team-a only")
	}
}

func TestDeterministic(t *testing.T) {
	in := func() *Input {
		return &Input{Pods: append(pods("web", 30, "300m", "600Mi", spreadOn(karpv1.LabelTopologyZone, 1)), pods("batch", 20, "1", "2Gi")...), NodePools: pools(nodePool("default"))}
	}
	a, b := solve(t, in()), solve(t, in())
	if len(a.NodeClaims) != len(b.NodeClaims) {
		t.Fatal("different NodeClaim counts")
	}
	for i := range a.NodeClaims {
		if a.NodeClaims[i].InstanceType.Name != b.NodeClaims[i].InstanceType.Name || len(a.NodeClaims[i].Pods) != len(b.NodeClaims[i].Pods) ||
			a.NodeClaims[i].Offering != b.NodeClaims[i].Offering {
			t.Fatalf("NodeClaim %d differs", i)
		}
	}
}

func TestDaemonSetOverheadSelection(t *testing.T) {
	np := nodePool("gpu", func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "gpu", Effect: corev1.TaintEffectNoSchedule}}
		np.Spec.Template.Labels = map[string]string{"team": "ml"}
		np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements,
			karpv1.NodeSelectorRequirementWithMinValues{Key: karpv1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"z-a"}})
	})
	ds := func(cpu string, f func(*corev1.PodSpec)) scheduling.DaemonSetPod {
		p := pod("ds", cpu, "100Mi")
		if f != nil {
			f(&p.Spec)
		}
		return scheduling.DaemonSetRequests(corev1.PodTemplateSpec{Spec: p.Spec}, "kube-system", nil, scheduling.Admission{})
	}
	tolerant := func(s *corev1.PodSpec) { s.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}} }
	zones := func(zs ...string) func(*corev1.PodSpec) {
		return func(s *corev1.PodSpec) {
			tolerant(s)
			s.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
					{Key: karpv1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: zs}}}}}}}
		}
	}
	got := DaemonSetOverhead(np, []scheduling.DaemonSetPod{
		ds("100m", tolerant), // runs there
		ds("200m", nil),      // does not tolerate the taint
		ds("300m", func(s *corev1.PodSpec) { tolerant(s); s.NodeSelector = map[string]string{"team": "web"} }), // other team
		ds("400m", func(s *corev1.PodSpec) { tolerant(s); s.NodeSelector = map[string]string{"team": "ml", "disk": "ssd"} }),
		ds("1000m", zones("z-b", "z-c")), // its affinity rules the pool's only zone out
		ds("2000m", zones("z-a", "z-b")), // runs there
	})
	if got.Cpu().MilliValue() != 2500 {
		t.Fatalf("want 100m + 400m + 2000m from the DaemonSets that would run there, got %s", got.Cpu())
	}
	if _, ok := got[corev1.ResourcePods]; ok {
		t.Error("DaemonSet pods do not count against the pods a solver places")
	}
}

// nodeTaintsPolicy Honor leaves out of the skew the domains whose nodes all have a taint the
// pod does not tolerate; the default (Ignore) counts them, as kube-scheduler does.
func TestTopologySpreadNodeTaintsPolicy(t *testing.T) {
	onlyA := nodePool("default", func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements,
			karpv1.NodeSelectorRequirementWithMinValues{Key: karpv1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"z-a"}})
	})
	tainted := node("tainted", "z-b", "4", "8Gi", func(n *scheduling.Node) {
		n.Taints = []corev1.Taint{{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}}
	})
	for _, honor := range []bool{false, true} {
		ps := pods("web", 3, "100m", "128Mi", spreadOn(karpv1.LabelTopologyZone, 1), func(p *corev1.Pod) {
			if honor {
				p.Spec.TopologySpreadConstraints[0].NodeTaintsPolicy = ptr.To(corev1.NodeInclusionPolicyHonor)
			}
		})
		r := solve(t, &Input{Pods: ps, NodePools: pools(onlyA), Nodes: []*scheduling.Node{tainted}})
		if honor {
			expectPlaced(t, r)
			continue
		}
		if len(r.Unschedulable) != 2 {
			t.Errorf("Ignore counts the tainted zone z-b (0 pods): one pod in z-a, two pending; got %d pending", len(r.Unschedulable))
		}
	}
}

// nodeAffinityPolicy Ignore counts the domains the pod's node selector excludes; the default
// (Honor) does not.
func TestTopologySpreadNodeAffinityPolicy(t *testing.T) {
	for _, ignore := range []bool{false, true} {
		ps := pods("web", 3, "100m", "128Mi", spreadOn(karpv1.LabelTopologyZone, 1), func(p *corev1.Pod) {
			p.Spec.NodeSelector = map[string]string{karpv1.LabelTopologyZone: "z-a"}
			if ignore {
				p.Spec.TopologySpreadConstraints[0].NodeAffinityPolicy = ptr.To(corev1.NodeInclusionPolicyIgnore)
			}
		})
		r := solve(t, &Input{Pods: ps, NodePools: pools(nodePool("default"))})
		if !ignore {
			expectPlaced(t, r)
			continue
		}
		if len(r.Unschedulable) != 2 {
			t.Errorf("Ignore counts z-b and z-c (0 pods): one pod in z-a, two pending; got %d pending", len(r.Unschedulable))
		}
	}
}

// Preferences are relaxed one at a time: a preferred pod affinity nothing can meet is dropped,
// and the pods still keep their preferred anti-affinity (one per node).
func TestPreferencesRelaxOneAtATime(t *testing.T) {
	ps := pods("web", 3, "100m", "128Mi", func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{
			PodAffinity: &corev1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 10,
				PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: karpv1.LabelTopologyZone,
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "missing-db"}}}}}},
			PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 10,
				PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname,
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}}},
		}
	})
	r := solve(t, &Input{Pods: ps, NodePools: pools(nodePool("default"))})
	expectPlaced(t, r)
	if len(r.NodeClaims) != 3 {
		t.Fatalf("the anti-affinity preference holds once the impossible affinity is dropped: want 3 NodeClaims, got %d", len(r.NodeClaims))
	}
}

// A NodePool whose first instance types offer only Spot still launches on-demand from the
// later ones: the capacity types its requirement allows are not decided before every type's
// offerings are known.
func TestCapacityTypesOfferedOnlyByLaterTypes(t *testing.T) {
	spotOnly := itype("c5.xlarge", "amd64", 4, 8, 0.17)
	var offs cloudprovider.Offerings
	for _, o := range spotOnly.Offerings {
		if o.CapacityType == karpv1.CapacityTypeSpot {
			offs = append(offs, o)
		}
	}
	spotOnly.Offerings = offs
	np := nodePool("default", func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.CapacityTypeOnDemand}}}
	})
	r := solve(t, &Input{Pods: pods("w", 1, "1", "1Gi"), NodePools: []*NodePool{{NodePool: np, InstanceTypes: append([]*cloudprovider.InstanceType{spotOnly}, testCatalog()...)}}})
	expectPlaced(t, r)
	if c := r.NodeClaims[0]; c.Offering.CapacityType != karpv1.CapacityTypeOnDemand {
		t.Errorf("launched %s on %s, want on-demand", c.InstanceType.Name, c.Offering.CapacityType)
	}
}

// Progress counts down from the number of pods to 0, one step per pod, whether the pod was
// placed on an existing node (by packing or not), on a new NodeClaim, or nowhere.
func TestProgressCountsDownEveryPod(t *testing.T) {
	roomy := node("roomy", "z-a", "4", "8Gi")
	in := &Input{Pods: append(append(pods("small", 6, "500m", "512Mi"), pods("big", 3, "3", "4Gi")...), pod("huge", "500", "1Gi")),
		NodePools: pools(nodePool("default")), Nodes: []*scheduling.Node{roomy}}
	var seen []int
	in.Progress = func(left int) { seen = append(seen, left) }
	r := solve(t, in)
	if len(r.Unschedulable) != 1 || len(r.Existing["roomy"]) == 0 || len(r.NodeClaims) == 0 {
		t.Fatalf("want pods on the existing node, on new NodeClaims and one unschedulable: %d on the node, %d NodeClaims, %d unschedulable",
			len(r.Existing["roomy"]), len(r.NodeClaims), len(r.Unschedulable))
	}
	if len(seen) == 0 || seen[len(seen)-1] != 0 {
		t.Fatalf("progress %v does not end at 0", seen)
	}
	for i := 1; i < len(seen); i++ {
		if seen[i] > seen[i-1] {
			t.Fatalf("progress %v goes up", seen)
		}
	}
	if seen[0] >= len(in.Pods) {
		t.Fatalf("progress %v starts at %d pods or more, not after the first", seen, len(in.Pods))
	}
}
