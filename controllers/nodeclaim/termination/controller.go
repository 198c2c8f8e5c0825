// Package termination finishes a deleted NodeClaim: it records when its terminationGracePeriod
// runs out (karpenter.sh/nodeclaim-termination-timestamp, which the node's drain keeps), deletes
// the NodeClaim's Node (whose own termination drains it and terminates the instance), waits for
// the Node to be gone, makes sure the instance is terminated (a NodeClaim whose Node never
// registered has only the instance), and then removes the karpenter.sh/termination finalizer.
// It writes the NodeClaim's metadata and deletes Nodes; it does not drain.
package termination

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/controllers/index"
	"github.com/karpenter-policy/karpenter/controllers/metrics"
	"github.com/karpenter-policy/karpenter/controllers/ratelimit"
)

// MaxConcurrentReconciles is high: terminations wait on drains and the cloud, so many run at once.
const MaxConcurrentReconciles = 100

// Backoff is how a terminating NodeClaim is looked at again when no event brings it back
// (its Node going does): after 1 s, then 2 s, ... at most every 30 s.
var Backoff = ratelimit.Settings{Base: time.Second, Max: 30 * time.Second, QPS: 50, Burst: 500}

// Controller terminates deleted NodeClaims.
type Controller struct {
	client   client.Client
	cloud    cloudprovider.CloudProvider
	recorder events.EventRecorder
	clock    clock.Clock
}

// NewController builds the NodeClaim termination controller.
func NewController(c client.Client, cloud cloudprovider.CloudProvider, recorder events.EventRecorder, clk clock.Clock) *Controller {
	return &Controller{client: c, cloud: cloud, recorder: recorder, clock: clk}
}

// Register watches NodeClaims, and their Nodes going (the manager must have the indexes of
// package index).
func (c *Controller) Register(mgr ctrl.Manager) error {
	nodeGone := predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return false }, UpdateFunc: func(event.UpdateEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false }, DeleteFunc: func(event.DeleteEvent) bool { return true },
	}
	return ctrl.NewControllerManagedBy(mgr).Named("nodeclaim.termination").
		WithOptions(ratelimit.OptionsWith(MaxConcurrentReconciles, Backoff)).
		For(&karpv1.NodeClaim{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetDeletionTimestamp() != nil
		}))).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			id := o.(*corev1.Node).Spec.ProviderID
			if id == "" {
				return nil
			}
			claims, err := index.NodeClaimsByProviderID(ctx, c.client, id)
			if err != nil {
				log.FromContext(ctx).Error(err, "mapping a deleted node to its nodeclaim", "Node", o.GetName())
				return nil
			}
			out := make([]reconcile.Request, 0, len(claims))
			for _, nc := range claims {
				out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: nc.Name}})
			}
			return out
		}), builder.WithPredicates(nodeGone)).
		Complete(reconcile.AsReconciler(mgr.GetClient(), c))
}

// Reconcile records the deadline, deletes the node, then the instance, then lets the
// NodeClaim go.
func (c *Controller) Reconcile(ctx context.Context, nc *karpv1.NodeClaim) (reconcile.Result, error) {
	if nc.DeletionTimestamp == nil || !controllerutil.ContainsFinalizer(nc, karpv1.TerminationFinalizer) {
		return reconcile.Result{}, nil
	}
	if err := c.annotateDeadline(ctx, nc); err != nil {
		return ratelimit.Retry(err)
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
			// The node drains; its going brings us back.
			return ratelimit.Again(), nil
		}
		// The node is gone (or never registered): the instance must be too.
		if err := c.cloud.Delete(ctx, nc); !cloudprovider.IsNodeClaimNotFoundError(err) {
			if err != nil {
				return reconcile.Result{}, fmt.Errorf("terminating the instance of nodeclaim %s: %w", nc.Name, err)
			}
			return ratelimit.Again(), nil
		}
	}
	patch := client.MergeFromWithOptions(nc.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(nc, karpv1.TerminationFinalizer)
	if err := c.client.Patch(ctx, nc, patch); client.IgnoreNotFound(err) != nil {
		return ratelimit.Retry(err)
	}
	metrics.NodeClaimsTerminated.WithLabelValues(nc.Labels[karpv1.NodePoolLabelKey], nc.Labels[karpv1.CapacityTypeLabelKey], nc.Labels[karpv1.LabelTopologyZone]).Inc()
	metrics.NodeClaimsTerminationDuration.WithLabelValues(nc.Labels[karpv1.NodePoolLabelKey]).Observe(c.clock.Since(nc.DeletionTimestamp.Time).Seconds())
	log.FromContext(ctx).Info("terminated nodeclaim", "NodeClaim", nc.Name)
	return reconcile.Result{}, nil
}

// annotateDeadline records, once, when the NodeClaim's terminationGracePeriod runs out: its
// deletion plus the period. The drain reads it; kept on the object, it outlives a restart.
func (c *Controller) annotateDeadline(ctx context.Context, nc *karpv1.NodeClaim) error {
	tgp := nc.Spec.TerminationGracePeriod
	if tgp == nil {
		return nil
	}
	if _, ok := nc.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey]; ok {
		return nil
	}
	at := nc.DeletionTimestamp.Add(tgp.Duration).UTC().Format(time.RFC3339)
	patch := client.MergeFrom(nc.DeepCopy())
	if nc.Annotations == nil {
		nc.Annotations = map[string]string{}
	}
	nc.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey] = at
	if err := c.client.Patch(ctx, nc, patch); err != nil {
		return client.IgnoreNotFound(err)
	}
	c.recorder.Eventf(nc, nil, corev1.EventTypeWarning, "TerminationGracePeriodExpiring", "Termination", "All pods will be deleted by %s", at)
	return nil
}
