package nodepool

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clocktesting "k8s.io/utils/clock/testing"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
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
