// Package disruption keeps the NodeClaim conditions disruption reads: Consolidatable (its
// NodePool's consolidateAfter has passed since a pod last came to its node or left it) and
// Drifted (the cloud provider, its NodePool's template hash or its requirements say the node no
// longer matches, or its instance type is no longer in the provider's catalog), and status.lastPodEventTime, from the pod events the cluster model saw. It
// writes NodeClaim status only, and only when a condition changes, so that a
// scale-out's pod bindings cost no writes.
package disruption

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/controllers/index"
	"github.com/karpenter-policy/karpenter/controllers/ratelimit"
	"github.com/karpenter-policy/karpenter/controllers/state"
	"github.com/karpenter-policy/karpenter/scheduling/methods"
	"github.com/karpenter-policy/karpenter/scheduling/snapshot"
)

// DriftRecheck is how often a NodeClaim's drift is asked of the cloud provider again.
const DriftRecheck = 5 * time.Minute

// Controller reconciles the disruption conditions of NodeClaims.
type Controller struct {
	client  client.Client
	cloud   cloudprovider.CloudProvider
	cluster *state.Cluster
	clock   clock.Clock
}

// NewController builds the NodeClaim disruption-conditions controller.
func NewController(c client.Client, cloud cloudprovider.CloudProvider, cluster *state.Cluster, clk clock.Clock) *Controller {
	return &Controller{client: c, cloud: cloud, cluster: cluster, clock: clk}
}

// Register watches NodeClaims, their NodePools, and pods coming to nodes and leaving them.
func (c *Controller) Register(mgr ctrl.Manager) error {
	// A pod event is a cache lookup by index, not a list of every NodeClaim: a scale-out binds
	// thousands of pods.
	claimOfNode := func(ctx context.Context, node string) []reconcile.Request {
		name, err := index.NodeClaimOfNode(ctx, c.client, node)
		if err != nil || name == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: name}}}
	}
	pods := handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.TypedCreateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if p := e.Object.(*corev1.Pod); p.Spec.NodeName != "" {
				c.podEvent(ctx, p.Spec.NodeName, q, claimOfNode)
			}
		},
		UpdateFunc: func(ctx context.Context, e event.TypedUpdateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			old, p := e.ObjectOld.(*corev1.Pod), e.ObjectNew.(*corev1.Pod)
			bound := old.Spec.NodeName == "" && p.Spec.NodeName != ""
			finished := !terminal(old) && terminal(p)
			if bound || finished {
				c.podEvent(ctx, p.Spec.NodeName, q, claimOfNode)
			}
		},
		DeleteFunc: func(ctx context.Context, e event.TypedDeleteEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if p, ok := e.Object.(*corev1.Pod); ok && p.Spec.NodeName != "" {
				c.podEvent(ctx, p.Spec.NodeName, q, claimOfNode)
			}
		},
	}
	byPool := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		var claims karpv1.NodeClaimList
		if c.client.List(ctx, &claims, client.MatchingLabels{karpv1.NodePoolLabelKey: o.GetName()}) != nil {
			return nil
		}
		out := make([]reconcile.Request, 0, len(claims.Items))
		for _, nc := range claims.Items {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: nc.Name}})
		}
		return out
	})
	return ctrl.NewControllerManagedBy(mgr).Named("nodeclaim.disruption").WithOptions(ratelimit.Options(1)).
		For(&karpv1.NodeClaim{}).
		Watches(&corev1.Pod{}, pods).
		Watches(&karpv1.NodePool{}, byPool, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(reconcile.AsReconciler(mgr.GetClient(), c))
}

// podEvent brings the node's NodeClaim back: its Consolidatable condition may flip. The
// cluster model records the event itself (state.Cluster.LastPodEvent).
func (c *Controller) podEvent(ctx context.Context, node string, q workqueue.TypedRateLimitingInterface[reconcile.Request], claimOf func(context.Context, string) []reconcile.Request) {
	for _, r := range claimOf(ctx, node) {
		q.Add(r)
	}
}

func terminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || p.DeletionTimestamp != nil
}

// Reconcile sets Consolidatable and Drifted.
func (c *Controller) Reconcile(ctx context.Context, nc *karpv1.NodeClaim) (reconcile.Result, error) {
	if nc.DeletionTimestamp != nil || !meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeInitialized) {
		return reconcile.Result{}, nil
	}
	np := &karpv1.NodePool{}
	if err := c.client.Get(ctx, client.ObjectKey{Name: nc.Labels[karpv1.NodePoolLabelKey]}, np); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	before := nc.DeepCopy()
	requeue := DriftRecheck
	if wait := c.consolidatable(nc, np); wait > 0 && wait < requeue {
		requeue = wait
	}
	c.drifted(ctx, nc, np)
	if !equality.Semantic.DeepEqual(before.Status, nc.Status) {
		if err := c.client.Status().Patch(ctx, nc, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return ratelimit.Retry(client.IgnoreNotFound(err))
		}
	}
	return reconcile.Result{RequeueAfter: requeue}, nil
}

// consolidatable sets the condition from the last pod event (this process's, else status's,
// else initialization) and consolidateAfter, recording the event in status when the condition
// flips; it returns how long until it would turn true.
func (c *Controller) consolidatable(nc *karpv1.NodeClaim, np *karpv1.NodePool) time.Duration {
	last := snapshot.LastPodEvent(nc, c.cluster.LastPodEvent(nc.Status.NodeName))
	after := np.Spec.Disruption.ConsolidateAfter.Duration
	cur := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeConsolidatable)
	switch {
	case after == nil:
		meta.RemoveStatusCondition(&nc.Status.Conditions, karpv1.ConditionTypeConsolidatable)
		return 0
	case c.clock.Since(last) >= *after:
		if cur == nil || cur.Status != metav1.ConditionTrue {
			nc.Status.LastPodEventTime = metav1.NewTime(last)
			meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeConsolidatable, Status: metav1.ConditionTrue,
				Reason: "Consolidatable", Message: "consolidateAfter has passed since a pod last came or went", ObservedGeneration: nc.Generation})
		}
		return 0
	default:
		if cur != nil && cur.Status == metav1.ConditionTrue {
			nc.Status.LastPodEventTime = metav1.NewTime(last)
			meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeConsolidatable, Status: metav1.ConditionFalse,
				Reason: "PodEvent", Message: "a pod came or went within consolidateAfter", ObservedGeneration: nc.Generation})
		}
		return *after - c.clock.Since(last)
	}
}

// drifted sets Drifted from the cloud provider's verdict, or the NodePool's hash and
// requirements against the node's labels.
func (c *Controller) drifted(ctx context.Context, nc *karpv1.NodeClaim, np *karpv1.NodePool) {
	// An error (a node class not ready) is no verdict: the static checks still hold, and the
	// provider is asked again at the next recheck.
	reason, _ := c.cloud.IsDrifted(ctx, nc)
	why := string(reason)
	if why == "" {
		labels := nc.Labels
		node := &corev1.Node{}
		if nc.Status.NodeName != "" && c.client.Get(ctx, client.ObjectKey{Name: nc.Status.NodeName}, node) == nil {
			labels = node.Labels
		}
		why = methods.StaticDrift(labels, nc, np)
		if why == "" {
			// An error (a node class not ready) is no verdict either.
			if its, err := c.cloud.GetInstanceTypes(ctx, np); err == nil && methods.InstanceTypeNotFound(labels, its) {
				why = "InstanceTypeNotFound"
			}
		}
	}
	if why == "" {
		meta.RemoveStatusCondition(&nc.Status.Conditions, karpv1.ConditionTypeDrifted)
		return
	}
	meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeDrifted, Status: metav1.ConditionTrue,
		Reason: why, Message: "the node no longer matches its NodePool or node class", ObservedGeneration: nc.Generation})
}
