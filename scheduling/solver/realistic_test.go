package solver

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/cloudprovider/catalog"
)

// ec2Catalog is the repository's EC2 catalog (testdata/, 1363 types with real prices).
func ec2Catalog(tb testing.TB) []*cloudprovider.InstanceType {
	tb.Helper()
	path := filepath.Join("..", "..", "testdata", "aws-instance-types.json")
	if _, err := os.Stat(path); err != nil {
		tb.Fatalf("the realistic workload needs the EC2 catalog at %s: %v", path, err)
	}
	f, err := catalog.Load(path)
	if err != nil {
		tb.Fatal(err)
	}
	return f.ForProvider()
}

// profile is a kind of pod in the realistic workload.
type profile struct {
	name     string
	cpu, mem string
	share    int // pods per 100
	spread   bool
}

var profiles = []profile{
	{"web-frontend", "250m", "512Mi", 12, true}, {"web-api", "500m", "1Gi", 10, true}, {"graphql", "1", "1536Mi", 5, true},
	{"auth", "250m", "256Mi", 4, false}, {"search", "2", "4Gi", 4, true}, {"checkout", "500m", "768Mi", 6, false},
	{"batch-etl", "2", "3Gi", 8, false}, {"batch-report", "1", "2Gi", 6, false}, {"video-encode", "4", "4Gi", 4, false},
	{"ml-preprocess", "3", "6Gi", 3, false}, {"cache-redis", "1", "8Gi", 5, false}, {"analytics-db", "2", "16Gi", 2, false},
	{"jvm-service", "1", "4Gi", 8, false}, {"kafka-consumer", "500m", "2Gi", 6, false}, {"cron-small", "100m", "128Mi", 4, false},
	{"log-shipper", "200m", "400Mi", 3, false}, {"metrics-agg", "1500m", "3Gi", 3, false}, {"image-resize", "2", "1Gi", 3, false},
	{"notification", "250m", "512Mi", 2, false}, {"feature-store", "4", "32Gi", 2, false},
}

func realisticPods(n int) []*corev1.Pod {
	var out []*corev1.Pod
	for i := 0; len(out) < n; i++ {
		for _, pr := range profiles {
			for j := 0; j < pr.share && len(out) < n; j++ {
				p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d-%d", pr.name, i, j), Namespace: "prod", Labels: map[string]string{"app": pr.name}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceCPU: resource.MustParse(pr.cpu), corev1.ResourceMemory: resource.MustParse(pr.mem)}}}}}}
				if pr.spread {
					p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: karpv1.LabelTopologyZone,
						WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": pr.name}}}}
				}
				out = append(out, p)
			}
		}
	}
	return out
}

func realisticNodePool() *karpv1.NodePool {
	return &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "general"}, Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
		NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
		Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
			{Key: karpv1.LabelInstanceCategory, Operator: corev1.NodeSelectorOpIn, Values: []string{"c", "m", "r"}},
			{Key: karpv1.LabelInstanceGeneration, Operator: corev1.NodeSelectorOpGt, Values: []string{"4"}},
			{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}},
		},
	}}}}
}

// TestRealisticCostNearLowerBound guards the solver's cost on the realistic workload against
// the lower bound (a cost property, not a speed one): at most 1.05 x, the goal. Packing the
// pods without topology constraints node by node (pack.go) brought it from 1.074 to about
// 1.02 at 2000 pods.
func TestRealisticCostNearLowerBound(t *testing.T) {
	types := ec2Catalog(t)
	r, err := Solve(&Input{Pods: realisticPods(2000), NodePools: []*NodePool{{NodePool: realisticNodePool(), InstanceTypes: types}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Unschedulable) > 0 {
		t.Fatalf("%d unschedulable: %s", len(r.Unschedulable), r.Unschedulable[0].Reason)
	}
	ratio := r.PricePerHour() / r.LowerBoundPerHour
	t.Logf("%d nodes, $%.2f/hour, lower bound $%.2f/hour, ratio %.3f", len(r.NodeClaims), r.PricePerHour(), r.LowerBoundPerHour, ratio)
	if r.LowerBoundPerHour <= 0 || ratio > 1.05 {
		t.Fatalf("cost %.2f is %.3f x the lower bound %.2f; want at most 1.05", r.PricePerHour(), ratio, r.LowerBoundPerHour)
	}
}

// go test ./scheduling/solver -run='^$' -bench=Realistic -benchmem
func BenchmarkRealistic5000(b *testing.B) {
	types := ec2Catalog(b)
	pods := realisticPods(5000)
	np := realisticNodePool()
	var r *Result
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc
	for b.Loop() {
		var err error
		if r, err = Solve(&Input{Pods: pods, NodePools: []*NodePool{{NodePool: np, InstanceTypes: types}}}); err != nil {
			b.Fatal(err)
		}
	}
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(len(pods))*float64(b.N)/b.Elapsed().Seconds(), "pods/s")
	b.ReportMetric(r.PricePerHour(), "$/hour")
	b.ReportMetric(r.LowerBoundPerHour, "bound$/hour")
	b.ReportMetric(r.PricePerHour()/r.LowerBoundPerHour, "x-bound")
	b.ReportMetric(float64(ms.TotalAlloc-before)/float64(b.N)/1e6, "MB/solve")
}
