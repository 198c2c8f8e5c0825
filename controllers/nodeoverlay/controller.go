// Package nodeoverlay keeps NodeOverlay status (the NodeOverlay feature gate): it resolves every
// overlay against every NodePool's instance types, as each snapshot does (scheduling/overlay),
// and says in each overlay's ValidationSucceeded and Ready conditions whether it is applied, or
// why not (an invalid requirement or capacity, or a conflict with another overlay of the same
// weight). It writes status only: it never changes an overlay's spec, and applies nothing
// itself; the cluster model gives the overlays to the snapshots.
package nodeoverlay

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	karpv1alpha1 "github.com/karpenter-policy/karpenter/api/karpenter/v1alpha1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/controllers/ratelimit"
	"github.com/karpenter-policy/karpenter/scheduling/overlay"
)

// Resync is how often the verdicts are computed again with nothing changed: instance types
// and their offerings change with the provider's prices and availability.
const Resync = 5 * time.Minute

// all is the one key every event maps to: the verdicts depend on every overlay and pool.
var all = reconcile.Request{NamespacedName: types.NamespacedName{Name: "nodeoverlays"}}

// Controller reconciles NodeOverlay status.
type Controller struct {
	client client.Client
	cloud  cloudprovider.CloudProvider
}

// NewController returns the NodeOverlay status controller.
func NewController(c client.Client, cloud cloudprovider.CloudProvider) *Controller {
	return &Controller{client: c, cloud: cloud}
}

// Register watches NodeOverlays, NodePools and node classes; any change resolves them all.
func (c *Controller) Register(mgr ctrl.Manager) error {
	toAll := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request { return []reconcile.Request{all} })
	b := ctrl.NewControllerManagedBy(mgr).Named("nodeoverlay.status").WithOptions(ratelimit.Options(1)).
		Watches(&karpv1alpha1.NodeOverlay{}, toAll, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&karpv1.NodePool{}, toAll, builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	for _, nc := range c.cloud.GetSupportedNodeClasses() {
		b = b.Watches(nc, toAll, builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	}
	return b.Complete(c)
}

// Reconcile resolves the overlays over every NodePool whose instance types are known and
// writes each overlay's conditions where they changed.
func (c *Controller) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	var overlays karpv1alpha1.NodeOverlayList
	var pools karpv1.NodePoolList
	if err := c.client.List(ctx, &overlays); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing nodeoverlays: %w", err)
	}
	if len(overlays.Items) == 0 {
		return reconcile.Result{}, nil
	}
	if err := c.client.List(ctx, &pools); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing nodepools: %w", err)
	}
	var resolved []overlay.Pool
	var errs []error
	for i := range pools.Items {
		np := &pools.Items[i]
		its, err := c.cloud.GetInstanceTypes(ctx, np)
		if err != nil {
			// A NodePool that cannot launch (its node class missing or not ready) has no
			// instance types to overlay; the others are resolved without it.
			errs = append(errs, fmt.Errorf("instance types of NodePool %s: %w", np.Name, err))
			continue
		}
		resolved = append(resolved, overlay.Pool{NodePool: np, InstanceTypes: its})
	}
	objs := make([]*karpv1alpha1.NodeOverlay, len(overlays.Items))
	for i := range overlays.Items {
		objs[i] = &overlays.Items[i]
	}
	set := overlay.Resolve(objs, resolved)
	for _, o := range objs {
		if err := c.write(ctx, o, set.Problems); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: Resync}, nil
}

// write sets the overlay's ValidationSucceeded and Ready conditions and patches its status
// when they changed.
func (c *Controller) write(ctx context.Context, o *karpv1alpha1.NodeOverlay, problems map[string]overlay.Problem) error {
	before := o.DeepCopy()
	valid := metav1.Condition{Type: karpv1alpha1.ConditionTypeValidationSucceeded, Status: metav1.ConditionTrue, Reason: "ValidationSucceeded", ObservedGeneration: o.Generation}
	ready := metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", ObservedGeneration: o.Generation}
	if p, ok := problems[o.Name]; ok {
		valid.Status, valid.Reason, valid.Message = metav1.ConditionFalse, p.Reason, p.Message
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, "ValidationFailed", p.Message
	}
	changed := meta.SetStatusCondition(&o.Status.Conditions, valid)
	changed = meta.SetStatusCondition(&o.Status.Conditions, ready) || changed
	if !changed {
		return nil
	}
	if err := c.client.Status().Patch(ctx, o, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("writing the status of NodeOverlay %s: %w", o.Name, err)
	}
	return nil
}
