package lifecycle

// Validation: the checks a NodeClaim must pass before it is launched.

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

// WithValidation sets the checks a NodeClaim must pass before it is launched, beyond the
// CRD's: the validating webhook's for NodeClaims (there is no NodeClaim webhook, so that a
// manager whose webhook endpoint is unreachable still launches). A NodeClaim that fails them
// gets ValidationSucceeded False with every problem, a FailedValidation event, and no
// instance; liveness deletes it after LaunchTTL.
func (c *Controller) WithValidation(validate func(*karpv1.NodeClaim) field.ErrorList) *Controller {
	c.validate = validate
	return c
}

// validation sets ValidationSucceeded before the launch, and holds a NodeClaim that fails.
func (c *Controller) validation(_ context.Context, nc *karpv1.NodeClaim) (reconcile.Result, error) {
	if c.validate == nil || nc.Status.ProviderID != "" {
		return reconcile.Result{}, nil
	}
	if errs := c.validate(nc); len(errs) > 0 {
		msg := errs.ToAggregate().Error()
		if !meta.IsStatusConditionFalse(nc.Status.Conditions, karpv1.ConditionTypeValidationSucceeded) {
			c.recorder.Eventf(nc, nil, corev1.EventTypeWarning, "FailedValidation", "Launch", "NodeClaim %s is not launched: %s", nc.Name, msg)
		}
		c.setCondition(nc, karpv1.ConditionTypeValidationSucceeded, metav1.ConditionFalse, "ValidationFailed", msg)
		// Nothing to retry: a change to the NodeClaim brings it back, and liveness at LaunchTTL.
		return reconcile.Result{RequeueAfter: max(time.Second, nc.CreationTimestamp.Add(LaunchTTL).Sub(c.clock.Now())+time.Second)}, nil
	}
	c.setCondition(nc, karpv1.ConditionTypeValidationSucceeded, metav1.ConditionTrue, "Validated", "")
	return reconcile.Result{}, nil
}
