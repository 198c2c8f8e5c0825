package lifecycle

// Launch: the instance is created once, and what the provider returned is kept.

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
)

// launch creates the instance once.
func (c *Controller) launch(ctx context.Context, nc *karpv1.NodeClaim) (reconcile.Result, error) {
	if nc.Status.ProviderID != "" {
		return reconcile.Result{}, nil
	}
	launched := c.remembered(nc)
	fresh := launched == nil
	var err error
	if fresh {
		launched, err = c.cloud.Create(ctx, nc)
	}
	switch {
	case cloudprovider.IsInsufficientCapacityError(err):
		// The pods go back to the provisioner, which will pick other offerings.
		c.recorder.Eventf(nc, nil, corev1.EventTypeWarning, "InsufficientCapacityError", "Launch", "NodeClaim %s launch failed, %v", nc.Name, err)
		if derr := c.client.Delete(ctx, nc); derr != nil && !apierrors.IsNotFound(derr) {
			return reconcile.Result{}, derr
		}
		return reconcile.Result{}, errDeleted
	case cloudprovider.IsNodeClassNotReadyError(err):
		// As upstream: a NodeClaim whose node class is missing or not ready is deleted, not
		// retried forever. Its pods go back to the provisioner, which launches nothing from a
		// NodePool whose node class cannot serve instance types.
		c.recorder.Eventf(nc, nil, corev1.EventTypeWarning, "NodeClassNotReady", "Launch", "NodeClaim %s launch failed, %v", nc.Name, err)
		log.FromContext(ctx).Error(err, "failed launching nodeclaim; deleting it", "NodeClaim", nc.Name)
		if derr := c.client.Delete(ctx, nc); derr != nil && !apierrors.IsNotFound(derr) {
			return reconcile.Result{}, derr
		}
		return reconcile.Result{}, errDeleted
	case err != nil:
		c.setCondition(nc, karpv1.ConditionTypeLaunched, metav1.ConditionFalse, "LaunchFailed", err.Error())
		return reconcile.Result{}, fmt.Errorf("launching nodeclaim %s: %w", nc.Name, err)
	}
	mergeLaunch(nc, launched)
	c.remember(nc, launched)
	c.setCondition(nc, karpv1.ConditionTypeLaunched, metav1.ConditionTrue, "Launched", "")
	if fresh {
		log.FromContext(ctx).Info("launched nodeclaim", "NodeClaim", nc.Name, "providerID", nc.Status.ProviderID,
			"instanceType", nc.Labels[karpv1.LabelInstanceType], "zone", nc.Labels[karpv1.LabelTopologyZone], "capacityType", nc.Labels[karpv1.CapacityTypeLabelKey])
		// The provider launched another offering than the solve priced: the plan and the
		// cluster differ here, and the NodeClaim's annotation and this Event say why.
		if why := launched.Annotations[cloudprovider.LaunchDeviationAnnotation]; why != "" {
			c.recorder.Eventf(nc, nil, corev1.EventTypeNormal, "LaunchedOtherThanPriced", "Launch", "NodeClaim %s %s", nc.Name, why)
		}
	}
	return reconcile.Result{}, nil
}

// mergeLaunch copies what the cloud provider's launch returned onto the NodeClaim.
func mergeLaunch(nc, launched *karpv1.NodeClaim) {
	for k, v := range launched.Labels {
		if nc.Labels == nil {
			nc.Labels = map[string]string{}
		}
		nc.Labels[k] = v
	}
	for k, v := range launched.Annotations {
		if nc.Annotations == nil {
			nc.Annotations = map[string]string{}
		}
		nc.Annotations[k] = v
	}
	nc.Status.ProviderID, nc.Status.ImageID = launched.Status.ProviderID, launched.Status.ImageID
	nc.Status.Capacity, nc.Status.Allocatable = launched.Status.Capacity, launched.Status.Allocatable
}
