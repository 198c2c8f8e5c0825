// Package interruption acts on a cloud's notice that it will reclaim an instance (a Spot
// interruption): the provider marks the Node with cloudprovider.InterruptionNoticeAnnotation,
// and this controller deletes the node's NodeClaim at once, so that termination drains the
// pods and the provisioner places them elsewhere before the instance is gone, and tells the
// provider (cloudprovider.CapacityReporter) that the offering has no capacity now. A provider
// with a queue of notices (the AWS provider's SQS queue, cloudprovider.NoticeQueue) is read by
// QueueConsumer, which acts the same way on Spot interruptions, stops and terminations and
// scheduled changes, and records rebalance recommendations as Events. A provider that polls
// its instances' health checks (cloudprovider.HealthChecker, the AWS provider's EC2 status
// checks) is read by HealthPoller, which deletes the NodeClaims of broken instances without a
// graceful drain and of instances with a scheduled event with one. It only deletes NodeClaims
// (setting their termination timestamp) and queue messages; it does not drain, launch or
// write Nodes.
package interruption

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/controllers/index"
	"github.com/karpenter-policy/karpenter/controllers/metrics"
	"github.com/karpenter-policy/karpenter/controllers/ratelimit"
)

// Controller deletes the NodeClaims of interrupted nodes.
type Controller struct {
	handler
}

// NewController builds the interruption controller.
func NewController(c client.Client, cloud cloudprovider.CloudProvider, recorder events.EventRecorder) *Controller {
	return &Controller{handler{client: c, cloud: cloud, recorder: recorder}}
}

// Register watches Nodes that carry an interruption notice.
func (c *Controller) Register(mgr ctrl.Manager) error {
	noticed := predicate.NewPredicateFuncs(func(o client.Object) bool {
		_, ok := o.GetAnnotations()[cloudprovider.InterruptionNoticeAnnotation]
		return ok
	})
	return ctrl.NewControllerManagedBy(mgr).Named("interruption").WithOptions(ratelimit.Options(1)).
		For(&corev1.Node{}, builder.WithPredicates(noticed, predicate.Funcs{DeleteFunc: func(event.DeleteEvent) bool { return false }})).
		Complete(reconcile.AsReconciler(mgr.GetClient(), c))
}

// Reconcile deletes the interrupted node's NodeClaim, once.
func (c *Controller) Reconcile(ctx context.Context, n *corev1.Node) (reconcile.Result, error) {
	deadline, ok := n.Annotations[cloudprovider.InterruptionNoticeAnnotation]
	if !ok || n.Spec.ProviderID == "" {
		return reconcile.Result{}, nil
	}
	claims, err := index.NodeClaimsByProviderID(ctx, c.client, n.Spec.ProviderID)
	if err != nil {
		return reconcile.Result{}, err
	}
	for i := range claims {
		nc := &claims[i]
		if nc.DeletionTimestamp != nil {
			continue
		}
		c.event(nc, n, corev1.EventTypeWarning, "SpotInterrupted", fmt.Sprintf("Instance %s will be reclaimed (Spot interruption) at %s", n.Spec.ProviderID, deadline))
		if r, ok := c.cloud.(cloudprovider.CapacityReporter); ok {
			r.MarkUnavailable(n.Labels[corev1.LabelInstanceTypeStable], n.Labels[corev1.LabelTopologyZone], n.Labels[karpv1.CapacityTypeLabelKey])
		}
		if err := c.client.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, fmt.Errorf("deleting nodeclaim %s of interrupted node %s: %w", nc.Name, n.Name, err)
		}
		// The simulated cloud's notice is a Spot interruption's, counted as upstream's AWS
		// provider counts one from its queue.
		spot := cloudprovider.Notice{Kind: cloudprovider.NoticeSpotInterruption}
		metrics.InterruptionsReceived.WithLabelValues(spot.MessageType()).Inc()
		metrics.Interrupted(nc, spot.MessageType())
		log.FromContext(ctx).Info("interruption: deleting the nodeclaim before the instance is reclaimed", "NodeClaim", nc.Name, "Node", n.Name, "deadline", deadline)
		c.event(nc, n, corev1.EventTypeWarning, "TerminatingOnInterruption", "Interruption triggered termination for the NodeClaim: its node drains now")
	}
	return reconcile.Result{}, nil
}
