package nodepool

import (
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/cloudprovider/fake"
	"github.com/karpenter-policy/karpenter/controllers/metrics"
	"github.com/karpenter-policy/karpenter/controllers/state"
)

// NodeRegistrationHealthy follows the NodePool's latest registration outcome, and starts over
// (Unknown, outcomes forgotten) when its spec changes.
func TestRegistrationHealth(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	cluster := state.NewCluster(nil, clk)
	c := NewController(nil, nil, cluster)
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "general", Generation: 1}}
	status := func() (metav1.ConditionStatus, string) {
		c.registrationHealth(np)
		cond := meta.FindStatusCondition(np.Status.Conditions, karpv1.ConditionTypeNodeRegistrationHealthy)
		return cond.Status, cond.Message
	}
	if s, _ := status(); s != metav1.ConditionUnknown {
		t.Fatalf("a new NodePool: %s", s)
	}
	cluster.RecordRegistration("general", true, "NodeClaim general-abc was not registered within 15m0s of its launch")
	if s, msg := status(); s != metav1.ConditionFalse || msg != "NodeClaim general-abc was not registered within 15m0s of its launch" {
		t.Fatalf("after a failed registration: %s %q", s, msg)
	}
	cluster.RecordRegistration("general", false, "")
	if s, _ := status(); s != metav1.ConditionTrue {
		t.Fatalf("after a registration: %s", s)
	}
	cluster.RecordRegistration("general", true, "failed again")
	np.Generation = 2
	if s, _ := status(); s != metav1.ConditionUnknown {
		t.Fatalf("after a spec change: %s", s)
	}
	if s, _ := status(); s != metav1.ConditionUnknown {
		t.Fatalf("the failure before the change was not forgotten: %s", s)
	}
}

// ValidationSucceeded carries the validating webhook's verdict, and Ready follows it.
func TestValidationCondition(t *testing.T) {
	c := NewController(nil, nil, state.NewCluster(nil, clocktesting.NewFakeClock(time.Now()))).WithValidation(func(*karpv1.NodePool) field.ErrorList {
		return field.ErrorList{field.Invalid(field.NewPath("spec", "disruption", "budgets").Index(0).Child("schedule"), "@every 1h", "not a cron schedule")}
	})
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "general"}}
	c.validation(np)
	cond := meta.FindStatusCondition(np.Status.Conditions, karpv1.ConditionTypeValidationSucceeded)
	if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != "ValidationFailed" || cond.Message == "" {
		t.Fatalf("ValidationSucceeded %+v", cond)
	}
	NewController(nil, nil, nil).validation(np)
	if !meta.IsStatusConditionTrue(np.Status.Conditions, karpv1.ConditionTypeValidationSucceeded) {
		t.Fatal("without checks beyond the CRD's, a NodePool is valid")
	}
}

// karpenter_nodepools_limit carries the NodePool's limits, and a limit removed leaves no
// series behind.
func TestLimitMetric(t *testing.T) {
	c := NewController(nil, nil, state.NewCluster(nil, clocktesting.NewFakeClock(time.Now())))
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "limited"}}
	np.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("1500m"), corev1.ResourceMemory: resource.MustParse("1Gi")}
	if err := c.counters(t.Context(), np); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(metrics.NodePoolLimit.WithLabelValues("limited", "cpu")); got != 1.5 {
		t.Errorf("cpu limit %v, want 1.5", got)
	}
	if got := testutil.ToFloat64(metrics.NodePoolLimit.WithLabelValues("limited", "memory")); got != 1<<30 {
		t.Errorf("memory limit %v, want %d", got, 1<<30)
	}
	delete(np.Spec.Limits, corev1.ResourceMemory)
	if err := c.counters(t.Context(), np); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(metrics.NodePoolLimit); n != 1 {
		t.Errorf("%d series after the memory limit was removed, want 1", n)
	}
}

// karpenter_nodepools_cost_total is what the NodePool's nodes and in-flight NodeClaims cost
// per hour at the prices the solver sees, and a deleted NodePool's series go.
func TestCostMetric(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	cloud := fake.New()
	cloud.InstanceTypes = []*cloudprovider.InstanceType{{Name: "m5.large", Labels: map[string]string{corev1.LabelInstanceTypeStable: "m5.large"},
		Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi")},
		Offerings: []cloudprovider.Offering{
			{Zone: "z-a", CapacityType: karpv1.CapacityTypeOnDemand, Price: 0.096, Available: true},
			{Zone: "z-a", CapacityType: karpv1.CapacityTypeSpot, Price: 0.035, Available: true},
		}}}
	labels := func(capacityType string) map[string]string {
		return map[string]string{karpv1.NodePoolLabelKey: "priced", corev1.LabelInstanceTypeStable: "m5.large",
			corev1.LabelTopologyZone: "z-a", karpv1.CapacityTypeLabelKey: capacityType}
	}
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "priced"}}
	running := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "priced-a", Labels: labels(karpv1.CapacityTypeOnDemand)},
		Status: karpv1.NodeClaimStatus{ProviderID: "fake://a", NodeName: "priced-a"}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "priced-a", Labels: labels(karpv1.CapacityTypeOnDemand)},
		Spec: corev1.NodeSpec{ProviderID: "fake://a"}}
	inFlight := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "priced-b", Labels: labels(karpv1.CapacityTypeSpot)}}
	other := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "other-a", Labels: map[string]string{karpv1.NodePoolLabelKey: "other",
		corev1.LabelInstanceTypeStable: "m5.large", corev1.LabelTopologyZone: "z-a", karpv1.CapacityTypeLabelKey: karpv1.CapacityTypeOnDemand}}}
	cluster := state.NewCluster(nil, clk)
	for _, o := range []client.Object{np, running, node, inFlight, other} {
		cluster.Update(o)
	}
	c := NewController(nil, cloud, cluster)
	if err := c.counters(t.Context(), np); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(metrics.NodePoolCost.WithLabelValues("priced")); math.Abs(got-0.131) > 1e-9 {
		t.Errorf("cost %v, want 0.131 (one on-demand node and one Spot NodeClaim in flight; the other NodePool's not counted)", got)
	}
	ForgetNodePool("priced")
	if metrics.NodePoolCost.DeleteLabelValues("priced") || metrics.NodePoolUsage.DeleteLabelValues("priced", "cpu") {
		t.Error("a deleted NodePool's series are still exported")
	}
}
