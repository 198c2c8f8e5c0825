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
