// Package expiration deletes NodeClaims whose own spec.expireAfter has passed since they were
// created, as upstream's NodeClaim expiration controller does (docs/disruption.md,
// "Expiration"). The duration is the NodeClaim's, copied from its NodePool's template at
// launch: a later change to the NodePool neither expires a NodeClaim sooner nor saves it.
// Expiration is forceful: no budget, do-not-disrupt or replacement holds it back; the
// termination controller drains the node within its terminationGracePeriod, and the
// provisioner launches for the pods that were on it. It deletes; it does not drain or launch.
package expiration

import (
	"context"

	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

// Controller deletes expired NodeClaims.
type Controller struct {
	client client.Client
	clock  clock.Clock
}

// NewController builds the expiration controller.
func NewController(c client.Client, clk clock.Clock) *Controller {
	return &Controller{client: c, clock: clk}
}

// Register watches NodeClaims.
func (c *Controller) Register(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("nodeclaim.expiration").For(&karpv1.NodeClaim{}).
		Complete(reconcile.AsReconciler(mgr.GetClient(), c))
}

// Reconcile deletes the NodeClaim once its expireAfter has passed, and otherwise comes back
// when it will have.
func (c *Controller) Reconcile(ctx context.Context, nc *karpv1.NodeClaim) (reconcile.Result, error) {
	// Only NodeClaims Karpenter launched from a NodePool.
	if nc.Labels[karpv1.NodePoolLabelKey] == "" || nc.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	d := nc.Spec.ExpireAfter.Duration
	if d == nil {
		return reconcile.Result{}, nil
	}
	due := nc.CreationTimestamp.Add(*d)
	if now := c.clock.Now(); now.Before(due) {
		return reconcile.Result{RequeueAfter: due.Sub(now)}, nil
	}
	if err := c.client.Delete(ctx, nc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	log.FromContext(ctx).Info("deleting expired nodeclaim", "NodeClaim", nc.Name, "expireAfter", d.String(), "created", nc.CreationTimestamp.Time)
	return reconcile.Result{}, nil
}
