package solver

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/scheduling"
)

// dsPod is a DaemonSet's pod of cpu (10Mi), its spec changed by f, as admitted.
func dsPod(cpu string, f func(*corev1.PodSpec)) scheduling.DaemonSetPod {
	p := pod("ds", cpu, "10Mi")
	if f != nil {
		f(&p.Spec)
	}
	return scheduling.DaemonSetRequests(corev1.PodTemplateSpec{Spec: p.Spec}, "kube-system", nil, scheduling.Admission{})
}

// Which DaemonSets count in a NodePool's overhead, upstream's "Daemonsets" cases: tolerations
// of every kind, node selectors on the pool's labels, on well-known labels it leaves open and
// on labels nobody sets, ORed node affinity terms, and requests as admitted.
func TestWhichDaemonSetsCount(t *testing.T) {
	terms := func(ts ...[]corev1.NodeSelectorRequirement) func(*corev1.PodSpec) {
		return func(s *corev1.PodSpec) {
			var out []corev1.NodeSelectorTerm
			for _, e := range ts {
				out = append(out, corev1.NodeSelectorTerm{MatchExpressions: e})
			}
			s.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: out}}}
		}
	}
	tolerate := func(tols ...corev1.Toleration) func(*corev1.PodSpec) {
		return func(s *corev1.PodSpec) { s.Tolerations = tols }
	}
	for name, tc := range map[string]struct {
		np   *karpv1.NodePool
		ds   func(*corev1.PodSpec)
		runs bool
	}{
		"a NoExecute taint tolerated by key":         {np: nodePool("p", tainted("a", "", corev1.TaintEffectNoExecute)), ds: tolerate(corev1.Toleration{Key: "a", Operator: corev1.TolerationOpExists}), runs: true},
		"a NoExecute taint not tolerated":            {np: nodePool("p", tainted("a", "", corev1.TaintEffectNoExecute)), ds: tolerate(corev1.Toleration{Key: "b", Operator: corev1.TolerationOpExists})},
		"every taint tolerated":                      {np: nodePool("p", tainted("a", "1", corev1.TaintEffectNoSchedule), tainted("b", "", corev1.TaintEffectNoExecute)), ds: tolerate(corev1.Toleration{Operator: corev1.TolerationOpExists}), runs: true},
		"a value that differs":                       {np: nodePool("p", tainted("a", "1", corev1.TaintEffectNoSchedule)), ds: tolerate(corev1.Toleration{Key: "a", Operator: corev1.TolerationOpEqual, Value: "2"})},
		"a selector on a well-known label left open": {np: nodePool("p"), ds: func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{karpv1.LabelInstanceFamily: "m5"} }, runs: true},
		// Counted: another controller (node-feature-discovery, say) may set it once the node
		// is up, and a DaemonSet counted for nothing costs less than pods that do not fit.
		"a selector on a label the pool leaves open": {np: nodePool("p"), ds: func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"example.com/gpu-node": "true"} }, runs: true},
		"a selector on a label the pool sets":        {np: nodePool("p", withLabels("example.com/gpu-node", "true")), ds: func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"example.com/gpu-node": "true"} }, runs: true},
		"a selector on a value the pool requires":    {np: nodePool("p", withRequirements(requirement("tier", corev1.NodeSelectorOpIn, "a", "b"))), ds: func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"tier": "b"} }, runs: true},
		"a selector on a value the pool refuses":     {np: nodePool("p", withRequirements(requirement("tier", corev1.NodeSelectorOpIn, "a"))), ds: func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"tier": "b"} }},
		"one of two affinity terms may hold": {np: nodePool("p", withRequirements(requirement(karpv1.LabelTopologyZone, corev1.NodeSelectorOpIn, "z-a"))),
			ds: terms([]corev1.NodeSelectorRequirement{expr(karpv1.LabelTopologyZone, corev1.NodeSelectorOpIn, "z-b")}, []corev1.NodeSelectorRequirement{expr(karpv1.LabelTopologyZone, corev1.NodeSelectorOpIn, "z-a")}), runs: true},
		"no affinity term may hold": {np: nodePool("p", withRequirements(requirement(karpv1.LabelTopologyZone, corev1.NodeSelectorOpIn, "z-a"))),
			ds: terms([]corev1.NodeSelectorRequirement{expr(karpv1.LabelTopologyZone, corev1.NodeSelectorOpIn, "z-b")}, []corev1.NodeSelectorRequirement{expr(karpv1.LabelTopologyZone, corev1.NodeSelectorOpIn, "z-c")})},
		"an affinity on the capacity type the pool allows": {np: nodePool("p", bothCapacityTypes),
			ds: terms([]corev1.NodeSelectorRequirement{expr(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, karpv1.CapacityTypeSpot)}), runs: true},
		"an affinity on a capacity type the pool refuses": {np: nodePool("p"),
			ds: terms([]corev1.NodeSelectorRequirement{expr(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, karpv1.CapacityTypeSpot)})},
	} {
		t.Run(name, func(t *testing.T) {
			got := DaemonSetOverhead(tc.np, []scheduling.DaemonSetPod{dsPod("100m", tc.ds)})
			if runs := got.Cpu().MilliValue() == 100; runs != tc.runs {
				t.Fatalf("overhead %s; the DaemonSet runs there: %v", got.Cpu(), tc.runs)
			}
		})
	}
}

// A DaemonSet's requests are what the API server admits: limits as requests, init containers.
func TestDaemonSetRequestsAsAdmitted(t *testing.T) {
	p := pod("ds", "100m", "10Mi", func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Requests = nil
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("300m"), corev1.ResourceMemory: resource.MustParse("64Mi")}
		p.Spec.InitContainers = []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}
	})
	d := scheduling.DaemonSetRequests(corev1.PodTemplateSpec{Spec: p.Spec}, "kube-system", nil, scheduling.Admission{})
	got := DaemonSetOverhead(nodePool("p"), []scheduling.DaemonSetPod{d})
	if got.Cpu().MilliValue() != 1000 || got.Memory().Value() != 64<<20 {
		t.Fatalf("overhead %v, want 1 cpu (the init container) and 64Mi (the limit as request)", got)
	}
	// The overhead then moves a 1.5-cpu pod off the 2-cpu types.
	np := &NodePool{NodePool: nodePool("p"), InstanceTypes: testCatalog(), DaemonSetOverhead: got}
	r := solve(t, &Input{Pods: []*corev1.Pod{pod("w", "1500m", "1Gi")}, NodePools: []*NodePool{np}})
	expectPlaced(t, r)
	if c := r.NodeClaims[0].InstanceType.Capacity[corev1.ResourceCPU]; c.Value() < 4 {
		t.Fatalf("%s holds 1.5 cpu and 1 cpu of DaemonSets?", r.NodeClaims[0].InstanceType.Name)
	}
}

// Which DaemonSets run on a NodePool's nodes, and so count in its overhead: those whose pod
// template tolerates the pool's taints and whose node selector and affinity the pool's
// labels and requirements allow.
func TestDaemonSetOverheadByPool(t *testing.T) {
	for name, tc := range map[string]struct {
		np   *karpv1.NodePool
		ds   func(*corev1.PodSpec)
		runs bool
	}{
		"a plain DaemonSet on a plain pool": {np: nodePool("default"), runs: true},
		"a taint not tolerated":             {np: nodePool("default", tainted("gpu", "", corev1.TaintEffectNoSchedule))},
		"a taint tolerated": {np: nodePool("default", tainted("gpu", "", corev1.TaintEffectNoSchedule)), runs: true,
			ds: func(s *corev1.PodSpec) {
				s.Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}
			}},
		"a PreferNoSchedule taint needs no toleration": {np: nodePool("default", tainted("soft", "", corev1.TaintEffectPreferNoSchedule)), runs: true},
		"a startup taint needs no toleration": {np: nodePool("default", func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.StartupTaints = []corev1.Taint{{Key: "init", Effect: corev1.TaintEffectNoSchedule}}
		}), runs: true},
		"a node selector on the pool's label":     {np: nodePool("default", withLabels("team", "a")), runs: true, ds: func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"team": "a"} }},
		"a node selector on another label value":  {np: nodePool("default", withLabels("team", "a")), ds: func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"team": "b"} }},
		"a node selector on an arch the pool has": {np: nodePool("default"), runs: true, ds: func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{corev1.LabelArchStable: "arm64"} }},
		"a node selector on an arch the pool refuses": {np: nodePool("default", withRequirements(requirement(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64"))),
			ds: func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{corev1.LabelArchStable: "arm64"} }},
	} {
		t.Run(name, func(t *testing.T) {
			got := DaemonSetOverhead(tc.np, []scheduling.DaemonSetPod{dsPod("250m", tc.ds)})
			runs := got.Cpu().MilliValue() == 250
			if runs != tc.runs {
				t.Fatalf("overhead %s; the DaemonSet should run there: %v", got.Cpu(), tc.runs)
			}
		})
	}
	t.Run("several add up", func(t *testing.T) {
		got := DaemonSetOverhead(nodePool("default"), []scheduling.DaemonSetPod{dsPod("100m", nil), dsPod("200m", nil), dsPod("300m", nil)})
		if got.Cpu().MilliValue() != 600 {
			t.Fatalf("overhead %s, want 600m", got.Cpu())
		}
		if mem := got[corev1.ResourceMemory]; mem.Cmp(resource.MustParse("30Mi")) != 0 {
			t.Fatalf("memory %s, want 30Mi", mem.String())
		}
	})
}
