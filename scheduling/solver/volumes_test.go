package solver

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/scheduling"
)

// A node's CSINode limit caps the volumes of its driver placed there: pods whose claims would
// exceed it go to new NodeClaims; pods that share a claim count it once; another driver's
// volumes, and nodes without a limit, are not capped.
func TestVolumeAttachLimits(t *testing.T) {
	big := &scheduling.Node{Name: "big", Labels: map[string]string{corev1.LabelHostname: "big", karpv1.LabelTopologyZone: "test-zone-a", karpv1.LabelArch: "amd64"},
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("256Gi"),
			corev1.ResourcePods: resource.MustParse("110")},
		VolumeLimits: map[string]int{"ebs.csi.aws.com": 4}}
	existing := pod("existing", "100m", "100Mi")
	big.Pods = []*corev1.Pod{existing}
	vols := map[string]scheduling.Volumes{"default/existing": {"ebs.csi.aws.com": {"default/data-existing"}}}
	ps := pods("db", 6, "100m", "100Mi")
	for _, p := range ps {
		vols[PodKey(p)] = scheduling.Volumes{"ebs.csi.aws.com": {"default/data-" + p.Name}}
	}
	shared := pods("reader", 3, "100m", "100Mi")
	for _, p := range shared {
		vols[PodKey(p)] = scheduling.Volumes{"efs.csi.aws.com": {"default/shared"}}
	}
	r := solve(t, &Input{Pods: append(ps, shared...), NodePools: pools(nodePool("default")), Nodes: []*scheduling.Node{big}, PodVolumes: vols})
	expectPlaced(t, r)
	if got := len(r.Existing["big"]); got != 6 {
		t.Fatalf("big takes 3 more ebs volumes (1 attached, limit 4) and the 3 readers, got %d pods", got)
	}
	onNew := 0
	for _, c := range r.NodeClaims {
		onNew += len(c.Pods)
	}
	if onNew != 3 {
		t.Fatalf("three db pods need new nodes, got %d", onNew)
	}
	// Without the limit, every pod fits on big.
	big.VolumeLimits = nil
	if r := solve(t, &Input{Pods: append(ps, shared...), NodePools: pools(nodePool("default")), Nodes: []*scheduling.Node{big}, PodVolumes: vols}); len(r.Existing["big"]) != 9 {
		t.Fatalf("no limit: all nine pods on big, got %d", len(r.Existing["big"]))
	}
}

func TestAttachments(t *testing.T) {
	a := scheduling.NewAttachments(map[string]int{"d": 2})
	a.Add(scheduling.Volumes{"d": {"x"}})
	for _, tc := range []struct {
		v    scheduling.Volumes
		fits bool
	}{
		{scheduling.Volumes{"d": {"y"}}, true},
		{scheduling.Volumes{"d": {"x", "y"}}, true},          // x is attached already
		{scheduling.Volumes{"d": {"y", "y"}}, true},          // one claim twice is one volume
		{scheduling.Volumes{"d": {"y", "z"}}, false},         // three volumes of d
		{scheduling.Volumes{"other": {"a", "b", "c"}}, true}, // no limit for other
	} {
		if ok, _ := a.Fits(tc.v); ok != tc.fits {
			t.Errorf("%v: fits %v, want %v", tc.v, ok, tc.fits)
		}
	}
}

// Attach limits per CSI driver on existing nodes, as kube-scheduler's NodeVolumeLimits counts
// them: per driver, a claim shared by pods once, across the pods already there and those
// placed.
func TestAttachLimitCases(t *testing.T) {
	limited := func(name string, limits map[string]int, bound ...*corev1.Pod) *scheduling.Node {
		return node(name, "z-a", "64", "256Gi", func(n *scheduling.Node) {
			n.VolumeLimits = limits
			n.Pods = bound
		})
	}
	vol := func(driver string, claims ...string) scheduling.Volumes { return scheduling.Volumes{driver: claims} }
	for name, tc := range map[string]struct {
		nodeLimits map[string]int
		bound      map[string]scheduling.Volumes // bound pod name: volumes
		pending    map[string]scheduling.Volumes // pending pod name: volumes
		onNode     int                           // pending pods placed on the node
	}{
		"under the limit": {nodeLimits: map[string]int{"ebs": 3}, pending: map[string]scheduling.Volumes{"a": vol("ebs", "ns/a"), "b": vol("ebs", "ns/b")}, onNode: 2},
		"at the limit":    {nodeLimits: map[string]int{"ebs": 2}, pending: map[string]scheduling.Volumes{"a": vol("ebs", "ns/a"), "b": vol("ebs", "ns/b"), "c": vol("ebs", "ns/c")}, onNode: 2},
		"bound pods' volumes count": {nodeLimits: map[string]int{"ebs": 2}, bound: map[string]scheduling.Volumes{"old": vol("ebs", "ns/old")},
			pending: map[string]scheduling.Volumes{"a": vol("ebs", "ns/a"), "b": vol("ebs", "ns/b")}, onNode: 1},
		"a shared claim counts once": {nodeLimits: map[string]int{"ebs": 1}, pending: map[string]scheduling.Volumes{"a": vol("ebs", "ns/shared"), "b": vol("ebs", "ns/shared")}, onNode: 2},
		"a claim already attached":   {nodeLimits: map[string]int{"ebs": 1}, bound: map[string]scheduling.Volumes{"old": vol("ebs", "ns/shared")}, pending: map[string]scheduling.Volumes{"a": vol("ebs", "ns/shared")}, onNode: 1},
		"another driver is not limited": {nodeLimits: map[string]int{"ebs": 1}, bound: map[string]scheduling.Volumes{"old": vol("ebs", "ns/old")},
			pending: map[string]scheduling.Volumes{"a": vol("efs", "ns/a"), "b": vol("efs", "ns/b")}, onNode: 2},
		"a limit of zero": {nodeLimits: map[string]int{"ebs": 0}, pending: map[string]scheduling.Volumes{"a": vol("ebs", "ns/a")}, onNode: 0},
		"no limit known":  {nodeLimits: nil, pending: map[string]scheduling.Volumes{"a": vol("ebs", "ns/a"), "b": vol("ebs", "ns/b"), "c": vol("ebs", "ns/c")}, onNode: 3},
	} {
		t.Run(name, func(t *testing.T) {
			vols := map[string]scheduling.Volumes{}
			var bound []*corev1.Pod
			for n, v := range tc.bound {
				p := pod(n, "100m", "100Mi")
				bound = append(bound, p)
				vols[PodKey(p)] = v
			}
			var ps []*corev1.Pod
			for n, v := range tc.pending {
				p := pod(n, "100m", "100Mi")
				ps = append(ps, p)
				vols[PodKey(p)] = v
			}
			r := solve(t, &Input{Pods: ps, NodePools: pools(nodePool("default")), Nodes: []*scheduling.Node{limited("n1", tc.nodeLimits, bound...)}, PodVolumes: vols})
			expectPlaced(t, r)
			if got := len(r.Existing["n1"]); got != tc.onNode {
				t.Fatalf("%d pending pods on n1, want %d", got, tc.onNode)
			}
		})
	}
}
