package lifecycle

// Liveness: a NodeClaim stuck before launch or registration is deleted.

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

// Liveness limits: a NodeClaim not launched within LaunchTTL of its creation, or not
// registered within RegistrationTTL of its launch, is deleted; its pods are provisioned again.
const (
	LaunchTTL       = 5 * time.Minute
	RegistrationTTL = 15 * time.Minute
)

// liveness deletes a NodeClaim stuck before launch or before registration.
func (c *Controller) liveness(ctx context.Context, nc *karpv1.NodeClaim) (reconcile.Result, error) {
	now := c.clock.Now()
	var reason string
	if launched := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeLaunched); launched == nil || launched.Status != metav1.ConditionTrue {
		deadline := nc.CreationTimestamp.Add(LaunchTTL)
		if now.After(deadline) {
			reason = fmt.Sprintf("not launched within %s", LaunchTTL)
		}
	} else if !meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeRegistered) {
		deadline := launched.LastTransitionTime.Add(RegistrationTTL)
		if now.After(deadline) {
			reason = fmt.Sprintf("not registered within %s of its launch", RegistrationTTL)
		}
	}
	if reason == "" {
		return reconcile.Result{}, nil
	}
	c.recorder.Eventf(nc, nil, corev1.EventTypeWarning, "LivenessTimeout", "Liveness", "Deleting NodeClaim %s: %s", nc.Name, reason)
	if pool := nc.Labels[karpv1.NodePoolLabelKey]; pool != "" && c.registrations != nil {
		c.registrations.RecordRegistration(pool, true, fmt.Sprintf("NodeClaim %s was %s", nc.Name, reason))
	}
	log.FromContext(ctx).Info("deleting nodeclaim", "NodeClaim", nc.Name, "reason", reason)
	if err := c.client.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, errDeleted
}
