// Package termination finishes a deleted NodeClaim: it deletes the NodeClaim's Node (whose own
// termination drains it), waits for the Node to be gone, terminates the instance through the
// cloud provider, and then removes the karpenter.sh/termination finalizer.
package termination

import (
	"context"
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/controllers/index"
	"github.com/karpenter-policy/karpenter/controllers/metrics"
)

// MaxConcurrentReconciles is high: launches and drains wait on the cloud and on evictions, so many run
// at once.
const MaxConcurrentReconciles = 100

// Controller terminates deleted NodeClaims.
type Controller struct {
	client client.Client
	cloud  cloudprovider.CloudProvider
}

// NewController builds the NodeClaim termination controller.
func NewController(c client.Client, cloud cloudprovider.CloudProvider) *Controller {
	return &Controller{client: c, cloud: cloud}
}

// Register watches NodeClaims.
func (c *Controller) Register(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("nodeclaim.termination").
		WithOptions(controller.Options{MaxConcurrentReconciles: MaxConcurrentReconciles}).For(&karpv1.NodeClaim{}).
		Complete(reconcile.AsReconciler(mgr.GetClient(), c))
}

// Reconcile deletes the node, then the instance, then lets the NodeClaim go.
func (c *Controller) Reconcile(ctx context.Context, nc *karpv1.NodeClaim) (reconcile.Result, error) {
	if nc.DeletionTimestamp == nil || !controllerutil.ContainsFinalizer(nc, karpv1.TerminationFinalizer) {
		return reconcile.Result{}, nil
	}
	if nc.Status.ProviderID != "" {
		n, err := index.NodeByProviderID(ctx, c.client, nc.Status.ProviderID)
		if err != nil {
			return reconcile.Result{}, err
		}
		if n != nil {
			if n.DeletionTimestamp == nil {
				if err := c.client.Delete(ctx, n); client.IgnoreNotFound(err) != nil {
					return reconcile.Result{}, fmt.Errorf("deleting node %s: %w", n.Name, err)
				}
			}
			// The node drains; come back when it is gone.
			return reconcile.Result{RequeueAfter: time.Second}, nil
		}
		if err := c.cloud.Delete(ctx, nc); err != nil && !cloudprovider.IsNodeClaimNotFoundError(err) {
			return reconcile.Result{}, fmt.Errorf("terminating the instance of nodeclaim %s: %w", nc.Name, err)
		}
	}
	patch := client.MergeFrom(nc.DeepCopy())
	controllerutil.RemoveFinalizer(nc, karpv1.TerminationFinalizer)
	if err := c.client.Patch(ctx, nc, patch); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	metrics.NodeClaimsTerminated.WithLabelValues(nc.Labels[karpv1.NodePoolLabelKey]).Inc()
	log.FromContext(ctx).Info("terminated nodeclaim", "NodeClaim", nc.Name)
	return reconcile.Result{}, nil
}
