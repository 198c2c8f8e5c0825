package instancetype

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/cloudprovider/fake"
	"github.com/karpenter-policy/karpenter/controllers/metrics"
	"github.com/karpenter-policy/karpenter/controllers/metrics/metricstest"
	"github.com/karpenter-policy/karpenter/scheduling/snapshot"
)

type model struct{ objs *snapshot.Objects }

func (m *model) Synced() bool               { return true }
func (m *model) Objects() *snapshot.Objects { return m.objs }

// byPool answers each NodePool with its own instance types, or an error.
type byPool struct {
	*fake.Provider
	types map[string][]*cloudprovider.InstanceType
	errs  map[string]error
}

func (b *byPool) GetInstanceTypes(_ context.Context, np *karpv1.NodePool) ([]*cloudprovider.InstanceType, error) {
	return b.types[np.Name], b.errs[np.Name]
}

func instanceType(name string, cpu int64, mem string, offerings ...cloudprovider.Offering) *cloudprovider.InstanceType {
	return &cloudprovider.InstanceType{Name: name, Offerings: offerings, Capacity: corev1.ResourceList{
		corev1.ResourceCPU: *resource.NewQuantity(cpu, resource.DecimalSI), corev1.ResourceMemory: resource.MustParse(mem)}}
}

func pool(name string) *karpv1.NodePool {
	return &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func TestPass(t *testing.T) {
	for _, g := range []interface{ Reset() }{metrics.InstanceTypeOfferingAvailable, metrics.InstanceTypeOfferingPrice, metrics.InstanceTypeCPU, metrics.InstanceTypeMemory} {
		g.Reset()
	}
	m5 := instanceType("m5.large", 2, "8Gi",
		cloudprovider.Offering{CapacityType: karpv1.CapacityTypeOnDemand, Zone: "z-a", Price: 0.096, Available: true},
		cloudprovider.Offering{CapacityType: karpv1.CapacityTypeSpot, Zone: "z-a", Price: 0.031, Available: false})
	c5 := instanceType("c5.xlarge", 4, "8Gi", cloudprovider.Offering{CapacityType: karpv1.CapacityTypeSpot, Zone: "z-b", Price: 0.06, Available: true})
	cloud := &byPool{Provider: fake.New(), types: map[string][]*cloudprovider.InstanceType{"general": {m5}, "compute": {c5}}, errs: map[string]error{}}
	mod := &model{objs: &snapshot.Objects{NodePools: []*karpv1.NodePool{pool("general"), pool("compute")}}}
	c := NewController(mod, cloud, clocktesting.NewFakeClock(metav1.Now().Time))
	ctx := context.Background()
	if err := c.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	check := func(what string, got, want float64) {
		t.Helper()
		if got != want {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	check("m5.large on-demand z-a available", testutil.ToFloat64(metrics.InstanceTypeOfferingAvailable.WithLabelValues("m5.large", "on-demand", "z-a")), 1)
	check("m5.large spot z-a available", testutil.ToFloat64(metrics.InstanceTypeOfferingAvailable.WithLabelValues("m5.large", "spot", "z-a")), 0)
	check("m5.large spot z-a price", testutil.ToFloat64(metrics.InstanceTypeOfferingPrice.WithLabelValues("m5.large", "spot", "z-a")), 0.031)
	check("c5.xlarge cpu", testutil.ToFloat64(metrics.InstanceTypeCPU.WithLabelValues("c5.xlarge")), 4)
	check("m5.large memory", testutil.ToFloat64(metrics.InstanceTypeMemory.WithLabelValues("m5.large")), 8<<30)

	// A NodePool whose types cannot be read is named, and its series are kept: its types are
	// unknown, not gone.
	cloud.errs["compute"] = errors.New("node class not ready")
	err := c.Pass(ctx)
	if err == nil || !strings.Contains(err.Error(), "NodePool compute") {
		t.Fatalf("Pass = %v, want the error naming NodePool compute", err)
	}
	if n := metricstest.Series(t, metrics.InstanceTypeCPU, map[string]string{"instance_type": "c5.xlarge"}); n != 1 {
		t.Errorf("c5.xlarge's series dropped while its NodePool's types could not be read (%d)", n)
	}
	// Once no NodePool offers a type, its series go.
	mod.objs.NodePools = mod.objs.NodePools[:1]
	if err := c.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if n := metricstest.Series(t, metrics.InstanceTypeOfferingAvailable, map[string]string{"instance_type": "c5.xlarge"}); n != 0 {
		t.Errorf("c5.xlarge is offered by no NodePool, yet %d offering series remain", n)
	}
	if n := metricstest.Series(t, metrics.InstanceTypeOfferingAvailable, nil); n != 2 {
		t.Errorf("%d offering series, want m5.large's 2", n)
	}
}
