package solver

import (
	"runtime"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/cloudprovider/catalog"
	"github.com/karpenter-policy/karpenter/test/bench"
)

// The mixed benchmark has the shape of upstream Karpenter's scheduling benchmark, so that
// the figures compare: 400 synthetic instance types (type i has i+1 vCPU and 2(i+1) GiB, in
// three zones, spot and on-demand) and pods in five equal groups: plain, zone topology spread,
// hostname topology spread, zone pod affinity, hostname pod anti-affinity.
//
//	go test ./scheduling/solver -run='^$' -bench=Mixed -benchmem

func benchmarkMixed(b *testing.B, n int) { benchmarkMixedOn(b, n, bench.SyntheticTypes(400)) }

// benchmarkMixedOn is the mixed workload on the given instance types; on the kwok provider's
// embedded catalog (MixedCatalog) it is what karpenterctl simulate solves for the same pods.
func benchmarkMixedOn(b *testing.B, n int, types []*cloudprovider.InstanceType) {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
		NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"},
	}}}}
	pods := bench.MixedPods(n)
	var r *Result
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc
	b.ResetTimer()
	for b.Loop() {
		var err error
		if r, err = Solve(&Input{Pods: pods, NodePools: []*NodePool{{NodePool: np, InstanceTypes: types}}}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	runtime.ReadMemStats(&ms)
	if len(r.Unschedulable) > 0 {
		b.Fatalf("%d pods unschedulable, first: %s", len(r.Unschedulable), r.Unschedulable[0].Reason)
	}
	price := 0.0
	for _, c := range r.NodeClaims {
		price += c.Offering.Price
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "pods/s")
	b.ReportMetric(float64(len(r.NodeClaims)), "nodes")
	b.ReportMetric(price, "$/hour")
	b.ReportMetric(float64(ms.TotalAlloc-before)/float64(b.N)/1e6, "MB/solve")
}

func BenchmarkMixed1000(b *testing.B)  { benchmarkMixed(b, 1000) }
func BenchmarkMixed5000(b *testing.B)  { benchmarkMixed(b, 5000) }
func BenchmarkMixed20000(b *testing.B) { benchmarkMixed(b, 20000) }
func BenchmarkMixed50000(b *testing.B) { benchmarkMixed(b, 50000) }

func BenchmarkMixedCatalog5000(b *testing.B) {
	benchmarkMixedOn(b, 5000, catalog.Embedded().ForProvider())
}
func BenchmarkMixedCatalog20000(b *testing.B) {
	benchmarkMixedOn(b, 20000, catalog.Embedded().ForProvider())
}

// BenchmarkEffectiveZonesCatalog5000 is what the provisioner's effective-zone metric adds to
// a batch of the mixed workload (compare MixedCatalog5000, the batch's solve).
func BenchmarkEffectiveZonesCatalog5000(b *testing.B) {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
		NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"},
	}}}}
	pods, types := bench.MixedPods(5000), catalog.Embedded().ForProvider()
	for b.Loop() {
		zones, err := EffectiveZones(&Input{Pods: pods, NodePools: []*NodePool{{NodePool: np, InstanceTypes: types}}})
		if err != nil || zones[ZoneFlexible] == 0 {
			b.Fatal(zones, err)
		}
	}
}

// The mixed workload on the EC2 catalog of testdata/ (1363 real types, three zones, on-demand
// and synthetic Spot prices): what `karpenterctl simulate --instance-types
// testdata/aws-instance-types.json` solves.
func BenchmarkMixedEC2Catalog5000(b *testing.B)  { benchmarkMixedOn(b, 5000, ec2Catalog(b)) }
func BenchmarkMixedEC2Catalog20000(b *testing.B) { benchmarkMixedOn(b, 20000, ec2Catalog(b)) }
