package overlay

import (
	"fmt"
	"path/filepath"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	karpv1alpha1 "github.com/karpenter-policy/karpenter/api/karpenter/v1alpha1"
	"github.com/karpenter-policy/karpenter/cloudprovider/catalog"
)

// benchInput is the EC2 catalog (1363 types, each in its zones and capacity types) for four
// NodePools, and five overlays of the kinds teams write: a Savings Plan on two families, a
// Spot markup, a zone's discount, a device plugin's resource and a reserved-instance price.
func benchInput(b *testing.B) ([]*karpv1alpha1.NodeOverlay, []Pool) {
	_, file, _, _ := runtime.Caller(0)
	cat, err := catalog.Load(filepath.Join(filepath.Dir(file), "..", "..", "testdata", "aws-instance-types.json"))
	if err != nil {
		b.Fatal(err)
	}
	its := cat.ForProvider()
	var pools []Pool
	for i := range 4 {
		pools = append(pools, Pool{NodePool: pool(fmt.Sprintf("pool-%d", i), map[string]string{"team": fmt.Sprint(i)}), InstanceTypes: its})
	}
	objs := []*karpv1alpha1.NodeOverlay{
		ov{name: "savings-plan", adjustment: "-28%", weight: 10, reqs: []karpv1alpha1.NodeSelectorRequirement{
			req("karpenter.k8s.aws/instance-family", corev1.NodeSelectorOpIn, "m7i", "c7i"), req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "on-demand")}}.object(),
		ov{name: "spot-markup", adjustment: "+5%", reqs: []karpv1alpha1.NodeSelectorRequirement{req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "spot")}}.object(),
		ov{name: "zone-discount", adjustment: "-0.001", weight: 2, reqs: []karpv1alpha1.NodeSelectorRequirement{req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1a")}}.object(),
		ov{name: "widgets", capacity: corev1.ResourceList{"example.com/widget": resource.MustParse("4")}, reqs: []karpv1alpha1.NodeSelectorRequirement{
			req("karpenter.k8s.aws/instance-cpu", corev1.NodeSelectorOpGt, "15"), req("team", corev1.NodeSelectorOpIn, "1")}}.object(),
		ov{name: "reserved", price: "0.05", weight: 50, reqs: []karpv1alpha1.NodeSelectorRequirement{req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "m5.large")}}.object(),
	}
	return objs, pools
}

// BenchmarkResolveAndApply is what a snapshot pays when an overlay or a NodePool changed.
func BenchmarkResolveAndApply(b *testing.B) {
	objs, pools := benchInput(b)
	b.ReportAllocs()
	for b.Loop() {
		if set, _ := apply(objs, pools); len(set.Problems) != 0 {
			b.Fatal(set.Problems)
		}
	}
}

// BenchmarkMemoHit is what a snapshot pays while nothing changed.
func BenchmarkMemoHit(b *testing.B) {
	objs, pools := benchInput(b)
	var m Memo
	m.Apply(objs, pools)
	b.ReportAllocs()
	for b.Loop() {
		m.Apply(objs, pools)
	}
}
